"""Everything that runs a job: config, CLI, rollout, learner, algorithms, trainer, tracking."""
