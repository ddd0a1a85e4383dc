"""The collective weight transport (gloo here): learner ranks broadcast their shares straight into the workers.

The reference is the policy gathered the old way (`LearnerGroup.state_dict`), and the object-store path loading the
same version. The failure tests use senders without DeepSpeed (`ShardSender`: one EP shard of a fixed model, staged and
sent through the same weight_sync calls a learner rank makes), so a refused update, a member that never joins or
never takes part, and a worker killed between pushes each end in a clear error or a completed push, never a hang.
"""
import os
import subprocess
import sys
import time

import pytest
import ray
import torch
from pydantic import ValidationError

from jointrl.model.checkpoint import save_pretrained
from jointrl.model.mxfp4 import mxfp4_state_dict
from jointrl.rl import weight_sync
from jointrl.rl.actor_group import Placement
from jointrl.rl.commands.cli import main
from jointrl.rl.config.run import RunConfig
from jointrl.rl.learner.expert_parallel import expert_keys, shard_state
from jointrl.rl.learner.group import LearnerGroup
from jointrl.rl.rollout.manager import RolloutManager
from jointrl.rl.rollout.worker import RolloutWorker
from jointrl.rl.weight_sync import (
    BucketLayout, CollectiveGroup, CollectiveSyncError, WeightUpdate, bucketize, flatten_bucket, rank_share,
    unflatten_bucket,
)
from tests.rl.learner.test_learner import PLACEMENT, synth_trajectories
from tests.rl.learner.test_publish import two_rank_config
from tests.rl.agent_envs import WORKER_RUNTIME_ENV
from tests.rl.rollout.test_workers import ROLLOUT
from tests.rl.test_train_resume import RECIPE, metrics, same

# Two workers beside two learner ranks (0.5 CPU each) in the tests' 2-CPU Ray session.
WORKERS = Placement(num_cpus=0.25, runtime_env=WORKER_RUNTIME_ENV, ready_timeout_s=120)
TIMEOUT_S = 4.0  # the groups' timeout in the failure tests: short, so a missing member fails fast


def worker_states(manager: RolloutManager) -> list[dict[str, torch.Tensor]]:
    return ray.get([w.state.remote() for w in manager.workers])


def assert_holds(state: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert state.keys() >= expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(state[name], tensor), name


def test_flatten_gives_one_buffer_per_dtype_and_unflatten_gives_the_tensors_back():
    bucket = {"a": torch.randn(3, 4), "b[0:2]": torch.randint(0, 255, (2, 5), dtype=torch.uint8),
              "c": torch.randn(7), "d": torch.ones(2, 2, dtype=torch.uint8)}
    layout, buffers = flatten_bucket(bucket, src=1, version=4, device=torch.device("cpu"))
    assert [(b.dtype, b.numel()) for b in buffers] == [(torch.float32, 19), (torch.uint8, 14)]
    assert layout.nbytes == 19 * 4 + 14 and (layout.src, layout.version) == (1, 4)
    back = unflatten_bucket(layout, [b.clone() for b in buffers])
    assert list(back) == list(bucket)
    for key, tensor in bucket.items():
        assert back[key].dtype == tensor.dtype and torch.equal(back[key], tensor), key


@pytest.mark.timeout(600)
def test_collective_sync_gives_every_worker_the_gathered_policy_as_the_object_store_does(ray_session, lookup_policy, tmp_path):
    model, tokenizer = lookup_policy
    cfg = two_rank_config(model.cfg)
    group = LearnerGroup(cfg, save_pretrained(model, tmp_path / "init", tokenizer=tokenizer), placement=PLACEMENT)
    managers = []
    try:
        group.train_step(*synth_trajectories(cfg, 6, seed=3))
        gathered = group.state_dict()
        assert not torch.equal(gathered["embed.weight"], model.state_dict()["embed.weight"]), "the step moved the weights"

        full = RolloutManager(model.cfg, tokenizer, ROLLOUT, n_workers=2, placement=WORKERS)
        managers.append(full)
        transport = full.attach_collective(CollectiveGroup(group.senders, timeout_s=60))
        update = full.push_weights(group.publish(1, bucket_bytes=20_000, transport=transport), 1)
        assert len(update.handles) > 2 and all(isinstance(h, BucketLayout) for h in update.handles)
        assert {h.src for h in update.handles} == {0, 1}, "both ranks send their share"
        states = worker_states(full)
        for state in states:
            assert_holds(state, gathered)
        assert [info.version for info in ray.get([w.info.remote() for w in full.workers])] == [1, 1]

        # The object-store path, same weights, into a worker built here: the same tensors.
        by_store = RolloutWorker(model.cfg, tokenizer, ROLLOUT, max_rows=2)
        assert by_store.load_weights(group.publish(2, bucket_bytes=20_000)) == 2
        assert_holds(by_store.state(), states[0])
        full.shutdown()  # leaves the groups: the ranks can join the next manager's

        # MXFP4 experts: each rank quantizes its rows and broadcasts blocks and scales as uint8 buffers.
        mx_rollout = ROLLOUT.model_copy(update={"mxfp4_experts": True})
        mx = RolloutManager(model.cfg, tokenizer, mx_rollout, n_workers=2, placement=WORKERS)
        managers.append(mx)
        transport = mx.attach_collective(CollectiveGroup(group.senders, timeout_s=60))
        update = mx.push_weights(group.publish(3, 20_000, mxfp4_experts=True, transport=transport), 3)
        assert any(dtype == torch.uint8 for h in update.handles for dtype, _ in h.buffers)
        expected = mxfp4_state_dict(gathered)
        assert any(name.endswith("_blocks") for name in expected)
        for state in worker_states(mx):
            assert_holds(state, expected)
    finally:
        for manager in managers:
            manager.shutdown()
        group.shutdown()


class ShardSender:
    """A learner rank without DeepSpeed: rank `rank` of an EP-2 layout of a fixed state, through weight_sync's calls."""

    def __init__(self, state: dict[str, torch.Tensor], keys: list[str], rank: int):
        torch.set_num_threads(1)
        self.local, self.keys, self.rank = shard_state(state, keys, rank, 2), keys, rank

    def stage(self, version: int, drop: tuple[str, ...] = ()) -> tuple[list[BucketLayout], int]:
        share = rank_share(self.local, self.keys, rank=self.rank, world_size=2, ep_size=2)
        share = {k: v for k, v in share.items() if k not in drop}
        return weight_sync.stage_weights(version, bucketize(share, 20_000)), 0

    def weight_device(self) -> str:
        return "cpu"

    def join_weight_group(self, spec, member: int) -> None:
        weight_sync.join_weight_group(spec, member)

    def send_weights(self, version: int, generation: int) -> int:
        return weight_sync.send_weights(version, generation)

    def serve_weights(self, version: int) -> list:
        return weight_sync.serve_weights(version)

    def leave_weight_group(self) -> None:
        weight_sync.leave_weight_group()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@pytest.fixture(scope="module")
def fake(ray_session, lookup_policy):
    """(model, two ShardSenders, a manager of two workers, their CollectiveGroup with a short timeout)."""
    model, tokenizer = lookup_policy
    state, keys = model.state_dict(), expert_keys(model)
    assert keys, "the layout splits experts"
    remote = ray.remote(num_cpus=0)(ShardSender)
    senders = [remote.remote(state, keys, rank) for rank in range(2)]
    manager = RolloutManager(model.cfg, tokenizer, ROLLOUT, n_workers=2, placement=WORKERS)
    group = CollectiveGroup(senders, timeout_s=TIMEOUT_S)
    manager.attach_collective(group)
    yield model, senders, manager, group
    manager.shutdown()
    for sender in senders:
        ray.kill(sender)


def staged(senders, version: int, transport, drop=()) -> WeightUpdate:
    """What LearnerGroup.publish returns: every sender's layouts, in rank order."""
    replies = ray.get([s.stage.remote(version, drop if rank == 1 else ()) for rank, s in enumerate(senders)])
    return WeightUpdate(version, transport, [h for layouts, _ in replies for h in layouts], False, 0)


def test_an_incomplete_or_older_update_is_refused_by_every_worker_and_the_group_still_works(fake):
    model, senders, manager, group = fake
    transport = group.form(manager.workers)
    missing = expert_keys(model)[0]
    start = time.monotonic()
    with pytest.raises(ValueError, match="lacks 1 tensors"):
        group.deliver(staged(senders, 10, transport, drop=(f"{missing}[{4}:{8}]",)), manager.workers)
    assert time.monotonic() - start < TIMEOUT_S, "refused at once, not after a timeout"
    assert not any(ray.get([w.info.remote() for w in manager.workers])[i].version == 10 for i in range(2))

    assert group.deliver(staged(senders, 11, transport), manager.workers) == []
    for state in worker_states(manager):
        assert_holds(state, model.state_dict())
    start = time.monotonic()
    with pytest.raises(ValueError, match="older than the loaded version 11"):
        group.deliver(staged(senders, 9, transport), manager.workers)
    assert time.monotonic() - start < TIMEOUT_S
    # Every member still entered every broadcast: the next push goes through on the same groups.
    assert group.deliver(staged(senders, 12, transport), manager.workers) == []
    assert [i.version for i in ray.get([w.info.remote() for w in manager.workers])] == [12, 12]


def test_a_worker_that_does_not_take_part_times_out_with_its_name(fake):
    model, senders, manager, group = fake
    transport = group.form(manager.workers)
    start = time.monotonic()
    with pytest.raises(CollectiveSyncError, match="rollout worker 1 did not finish the collective sync within 4s"):
        group.deliver(staged(senders, 20, transport), manager.workers[:1])  # worker 1 never enters the broadcasts
    assert time.monotonic() - start < 3 * TIMEOUT_S + 10
    # A new generation of the groups works again.
    assert group.deliver(staged(senders, 21, group.form(manager.workers)), manager.workers) == []


def test_a_member_that_does_not_join_is_named(fake):
    model, senders, manager, group = fake
    busy = ray.remote(num_cpus=0)(ShardSender).remote(model.state_dict(), expert_keys(model), 0)
    try:
        busy.sleep.remote(TIMEOUT_S + 8)  # its join waits behind this
        with pytest.raises(CollectiveSyncError, match="did not form within 4s: rollout worker 1 did not join"):
            group.form([manager.workers[0], busy])
        assert group.transport is None
    finally:
        ray.kill(busy)


def test_a_worker_killed_between_pushes_is_restarted_and_the_push_completes(fake):
    model, senders, manager, group = fake
    manager.attach_collective(group)
    before = manager.restarts
    update = manager.push_weights(staged(senders, 30, group.transport), 30)
    ray.kill(manager.workers[1], no_restart=True)
    update = manager.push_weights(staged(senders, 31, update.transport), 31)
    assert manager.restarts == before + 1
    assert update.transport.spec.generation == group.generation, "pushed over a new generation with the new worker"
    assert [i.version for i in ray.get([w.info.remote() for w in manager.workers])] == [31, 31]
    for state in worker_states(manager):
        assert_holds(state, model.state_dict())


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_train_run_over_the_collective_transport_logs_the_object_store_runs_metrics(tmp_path):
    # The resume test's tiny ep2_cpu run with two ranks splitting the experts and two workers, two steps.
    recipe = [*RECIPE, "learner.ranks=2", "learner.ep_size=2", "rollout.workers=2", "trainer.steps=2", "checkpoint.every=0"]
    sft_dir = tmp_path / "sft"
    assert main(["sft", "ep2_cpu", *recipe, f"checkpoint.dir={sft_dir}", f"tracking.run_dir={sft_dir}"]) == 0
    env = {**os.environ, "WANDB_MODE": "disabled"}
    runs = {}
    for transport in ("object_store", "collective"):
        command = [sys.executable, "-m", "jointrl.rl.commands.cli", "train", "ep2_cpu", *recipe,
                   f"rollout.weight_transport={transport}", f"tracking.run_dir={tmp_path / transport}",
                   "--init", str(sft_dir / "sft")]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        said = "weight sync: collective, gloo broadcasts from 2 learner ranks to 2 rollout workers" in done.stdout
        assert said == (transport == "collective"), done.stdout[-2000:]
        runs[transport] = metrics(tmp_path / transport)
    expected, got = runs["object_store"], runs["collective"]
    assert sorted(expected) == sorted(got) == [1, 2]
    for step in (1, 2):
        differing = {k: (expected[step][k], got[step].get(k)) for k in expected[step] if not same(k, expected[step][k], got[step].get(k))}
        assert not differing, f"step {step} differs between the transports: {differing}"
    # Step 2 was played with the weights pushed after step 1's update: the sync carried a changed policy.
    assert expected[1]["learner/grad_norm"] > 0


def test_the_transport_switch_names_the_bad_value_and_the_unsupported_combination():
    def config(**sections) -> RunConfig:
        return RunConfig(model={"preset": "debug"}, **sections)

    assert config().rollout.weight_transport == "object_store"
    with pytest.raises(ValidationError, match=r"rollout\.weight_transport[\s\S]*'object_store' or 'collective'"):
        config(rollout={"weight_transport": "nccl"})
    with pytest.raises(ValidationError, match=r"rollout\.weight_transport[\s\S]*needs the driver on the cluster"):
        config(rollout={"weight_transport": "collective"}, ray={"address": "ray://head:10001"})
    assert config(rollout={"weight_transport": "collective"}, ray={"address": "auto"}).rollout.weight_transport == "collective"
