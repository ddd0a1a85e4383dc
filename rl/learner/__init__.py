"""The learner: DeepSpeed ranks and their group, batch packing, the micro-batch forward, the critic, distributed plumbing and expert parallelism."""
