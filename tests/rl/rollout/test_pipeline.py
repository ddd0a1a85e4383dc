"""The rollout pipeline's staleness bound, with a fake manager and sampler (no Ray, no model)."""
import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from jointrl.rl.rollout.agent import Task
from jointrl.rl.rollout.pipeline import RolloutPipeline, step_seed
from tests.rl.rollout.loop import run_steps


class FakeSampler:
    def __init__(self):
        self.step = 0
        self.recorded: list[tuple[str, float]] = []

    def next_step(self):
        self.step += 1
        return [Task("reasoning/gcd-v0:default", self.step, "low", self.step)]

    def record(self, outcomes):
        self.recorded += list(outcomes)

    def state_dict(self):
        return {"step": self.step, "recorded": list(self.recorded)}

    def probabilities(self):
        return {"reasoning/gcd-v0:default": 1.0}


class FakeManager:
    """Records which weights version played which step; playing takes `play_s`."""

    chunk_timeout_s = 5.0

    def __init__(self, play_s=0.0, fail_at=None):
        self.version = None
        self.played: list[tuple[int, int]] = []  # (task seed = step + 1, version)
        self.pushes: list[int] = []
        self.play_s, self.fail_at = play_s, fail_at
        self.lock = threading.Lock()

    def push_weights(self, state, version):
        self.pushes.append(version)
        self.version = version

    def run(self, tasks, seed=0):
        if self.fail_at is not None and tasks[0].seed == self.fail_at:
            raise RuntimeError("worker exploded")
        time.sleep(self.play_s)
        self.played.append((tasks[0].seed, self.version))
        # Step s's episode succeeds when s is even; a failed episode (the env broke) is never recorded.
        step = tasks[0].seed - 1
        played = SimpleNamespace(env_id=tasks[0].env_id, signals={"success": float(step % 2 == 0)}, failed=False)
        broken = SimpleNamespace(env_id="broken", signals={}, failed=True)
        return [SimpleNamespace(episode=played), SimpleNamespace(episode=broken)]


def drive(max_staleness, steps=6, learn_s=0.0, play_s=0.0):
    """The trainer's loop shape: take batch s, 'train', publish version s + 1."""
    manager = FakeManager(play_s=play_s)
    pipeline = RolloutPipeline(
        manager, FakeSampler(), run_seed=0, max_staleness=max_staleness, start_step=0, steps=steps
    )
    return manager, run_steps(pipeline, steps, learn_s, lambda version: {"w": torch.tensor(float(version))} if version else {})


def test_synchronous_mode_plays_step_s_with_version_s():
    manager, batches = drive(max_staleness=0)
    assert [b.version for b in batches] == list(range(6))
    assert manager.played == [(s + 1, s) for s in range(6)]
    assert manager.pushes == list(range(6))
    assert [b.sampler_state["step"] for b in batches] == [1, 2, 3, 4, 5, 6]
    # The state a checkpoint of step s saves already holds step s's outcomes (what step s + 1 was drawn with).
    assert [len(b.sampler_state["recorded"]) for b in batches] == [1, 2, 3, 4, 5, 6]
    assert batches[-1].sampler_state["recorded"] == [("reasoning/gcd-v0:default", float(s % 2 == 0)) for s in range(6)]


@pytest.mark.parametrize("k", [1, 2])
def test_async_mode_runs_ahead_but_never_more_than_k_versions(k):
    # A slow learner and fast workers: the workers run ahead as far as the bound lets them.
    manager, batches = drive(max_staleness=k, learn_s=0.05)
    for b in batches:
        assert b.step - k <= b.version <= b.step
    # Running ahead actually happened: some batch was played by an older version than its step.
    assert any(b.version < b.step for b in batches)


def test_an_exception_in_the_rollout_thread_reaches_the_caller():
    pipeline = RolloutPipeline(
        FakeManager(fail_at=2), FakeSampler(), run_seed=0, max_staleness=0, start_step=0, steps=4
    )
    pipeline.publish({}, 0)
    assert pipeline.next().step == 0
    pipeline.publish({}, 1)
    with pytest.raises(RuntimeError, match="worker exploded"):
        pipeline.next()
    pipeline.close()


def test_resuming_starts_at_the_given_step():
    manager = FakeManager()
    pipeline = RolloutPipeline(manager, FakeSampler(), run_seed=3, max_staleness=0, start_step=4, steps=6)
    pipeline.publish({}, 4)
    assert pipeline.next().step == 4
    pipeline.publish({}, 5)
    assert pipeline.next().step == 5
    pipeline.close()
    assert manager.pushes == [4, 5]


def test_step_seeds_differ_per_run_and_step_and_survive_a_restart():
    grid = [(run, step) for run in range(20) for step in range(100)]
    seeds = [step_seed(run, step) for run, step in grid]
    assert len(set(seeds)) == len(grid), "every (run seed, step) pair gets its own rollout seed"
    assert all(0 <= s < 2**63 for s in seeds)
    # A resumed run is a new process (another PYTHONHASHSEED): it must replay the same rollout seeds.
    code = "from jointrl.rl.rollout.pipeline import step_seed; print([step_seed(r, s) for r in (0, 7) for s in (0, 5, 99)])"
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout
    assert fresh.strip() == str([step_seed(r, s) for r in (0, 7) for s in (0, 5, 99)])
