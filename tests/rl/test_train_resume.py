"""The real `jointrl train` command: a run killed with SIGKILL after a checkpoint resumes to the same metrics.

Three processes on one recipe (ep2_cpu shrunk: debug preset, one learner rank, one rollout worker, four steps, a checkpoint
every two): an uninterrupted run; a run killed once its step-2 checkpoint is complete; and that run
resumed with --resume. The resumed steps 3 and 4 must log exactly the uninterrupted run's metrics (wall
times aside), which needs the model, optimizer, router biases, sampler position, reward-normaliser state
and rollout seeds all restored.
"""
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jointrl.rl.commands.cli import main
from jointrl.rl.run_checkpoint import latest_checkpoint

RECIPE = [
    "model.preset=debug", "tokenizer.n_samples=200",
    "rewards.normalization=domain", "rollout.workers=1", "rollout.group_size=2", "rollout.max_rows=8",
    "rollout.max_turns=1", "rollout.max_new_tokens_per_turn=24", "rollout.max_new_tokens_per_episode=24",
    "rollout.tiers.low=8", "rollout.tier_selection.mode=fixed", "rollout.tier_selection.fixed={'*': low}",
    "learner.ranks=1", "learner.ep_size=1", "learner.lr=1e-3", "learner.micro_batch_tokens=1024", "learner.warmup_steps=2",
    "trainer.steps=4", "trainer.prompts_per_step=2", "trainer.sft.demos_per_env=2", "trainer.sft.max_len=256",
    "tracking.wandb_mode=disabled", "tracking.console=false", "checkpoint.every=2", "checkpoint.keep_last=2",
]
# Wall-clock figures differ between any two runs; everything else must match.
TIMING = ("perf/",)


def train_command(run_dir: Path, init: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "jointrl.rl.commands.cli", "train", "ep2_cpu", *RECIPE,
            f"tracking.run_dir={run_dir}", "--init", str(init), *extra]


def metrics(run_dir: Path) -> dict[int, dict]:
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {m["step"]: {k: v for k, v in m.items() if not k.startswith(TIMING)} for m in lines}


# Rollout/learner mismatch statistics compare the workers' behaviour log-probs with the learner's. A resumed
# worker is a fresh process whose engine cache has other shapes, so its log-probs of the very same tokens
# can differ in the last float bits (~1e-8); every token, reward, loss and weight is identical.
BEHAVIOUR_ROUNDING = ("mismatch/", "policy/tis_weight_mean")


def same(key: str, a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and key.startswith(BEHAVIOUR_ROUNDING):
        return math.isclose(a, b, rel_tol=1e-3, abs_tol=1e-6)
    return a == b


@pytest.mark.timeout(900)
def test_sigkill_after_a_checkpoint_then_resume_reproduces_the_uninterrupted_run(tmp_path):
    sft_dir = tmp_path / "sft"
    assert main(["sft", "ep2_cpu", *RECIPE, f"checkpoint.dir={sft_dir}", f"tracking.run_dir={sft_dir}"]) == 0
    init = sft_dir / "sft"
    env = {**os.environ, "WANDB_MODE": "disabled"}

    whole = tmp_path / "whole"
    done = subprocess.run(train_command(whole, init), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    killed = tmp_path / "killed"
    proc = subprocess.Popen(train_command(killed, init), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    root = killed / "checkpoints" / "rl"
    deadline = time.monotonic() + 600
    while latest_checkpoint(root) is None:
        assert proc.poll() is None, f"the run ended before its first checkpoint: {proc.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, "no checkpoint within 10 minutes"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and everything it started (Ray, workers, learner)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert latest_checkpoint(root).name == "step-00000002"

    resumed = subprocess.run(train_command(killed, init, "--resume"), env=env, capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    expected, got = metrics(whole), metrics(killed)
    assert sorted(expected) == sorted(got) == [1, 2, 3, 4]
    for step in (3, 4):
        assert expected[step].keys() == got[step].keys()
        differing = {k: (expected[step][k], got[step][k]) for k in expected[step]
                     if not same(k, expected[step][k], got[step][k])}
        assert not differing, f"step {step} differs after resume: {differing}"
    # The metrics are not trivially equal: the policy changed between steps.
    assert expected[3]["learner/grad_norm"] > 0
    # Each step logs the draw probability of every env id of the mix.
    assert sum(v for k, v in expected[3].items() if k.startswith("mix/")) == pytest.approx(1.0)
