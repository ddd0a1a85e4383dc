"""The learner ranks publish the policy themselves: a worker loading their shares holds what a gather gives.

Real Ray actors, DeepSpeed on gloo, two ranks splitting the experts (ep_size 2). The reference is the policy
gathered the old way (`LearnerGroup.state_dict`, an all-gather on rank 0 shipped to this process); the
worker is built in this process and loads the update through the object store, as a Ray worker would.
"""
import torch

from jointrl.model.checkpoint import load_state, save_pretrained
from jointrl.model.mxfp4 import mxfp4_state_dict
from jointrl.rl.config.run import RunConfig
from jointrl.rl.learner.group import LearnerGroup
from jointrl.rl.rollout.worker import RolloutWorker
from tests.rl.learner.test_learner import PLACEMENT, synth_trajectories
from tests.rl.rollout.test_workers import ROLLOUT


def two_rank_config(model_cfg) -> RunConfig:
    return RunConfig(
        model=model_cfg.model_dump(), algorithm={"routing_replay": "off"},
        learner=dict(ranks=2, ep_size=2, zero_stage=1, lr=1e-3, micro_batch_tokens=96), trainer={"seed": 0},
    )


def test_ranks_publish_their_shares_a_worker_loads_the_gathered_policy_and_rank_zero_exports_it(ray_session, lookup_policy, tmp_path):
    model, tokenizer = lookup_policy
    init = save_pretrained(model, tmp_path / "init", tokenizer=tokenizer)
    cfg = two_rank_config(model.cfg)
    group = LearnerGroup(cfg, init, placement=PLACEMENT)  # the ranks read the checkpoint themselves
    try:
        worker = RolloutWorker(model.cfg, tokenizer, ROLLOUT, max_rows=2)
        first = group.publish(1, bucket_bytes=20_000)
        assert len(first.handles) > 2
        assert worker.load_weights(first) == 1
        got = worker.state()
        for name, tensor in model.state_dict().items():
            assert torch.equal(got[name], tensor), name

        group.train_step(*synth_trajectories(cfg, 6, seed=3))
        gathered = group.state_dict()
        assert not torch.equal(gathered["embed.weight"], model.state_dict()["embed.weight"]), "the step moved the weights"
        assert worker.load_weights(group.publish(2, bucket_bytes=20_000)) == 2
        got = worker.state()
        for name, tensor in gathered.items():
            assert torch.equal(got[name], tensor), name

        # MXFP4 experts on the wire: each rank quantizes its rows; the worker holds the gathered policy's encoding.
        mx_worker = RolloutWorker(model.cfg, tokenizer, ROLLOUT.model_copy(update={"mxfp4_experts": True}), max_rows=2)
        update = group.publish(3, mxfp4_experts=True)
        assert update.nbytes < 0.8 * first.nbytes
        mx_worker.load_weights(update)
        expected, got = mxfp4_state_dict(gathered), mx_worker.state()
        assert any(name.endswith("_blocks") for name in got)
        for name, tensor in expected.items():
            assert torch.equal(got[name], tensor), name

        # A checkpoint is written by rank 0 from the gathered experts, not by this process.
        written = group.export(tmp_path / "model", tokenizer)
        saved = load_state(written)
        assert set(gathered) - set(saved) <= {"lm_head.weight"}  # a tied head is saved once
        for name, tensor in saved.items():
            assert torch.equal(tensor, gathered[name]), name
    finally:
        group.shutdown()

