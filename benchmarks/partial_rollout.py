"""Partial rollouts: step time with one deliberately long episode per batch, `rollout.partial` on against off.

    python benchmarks/partial_rollout.py [--steps 12] [--staleness 2]

Both modes run the real RolloutPipeline (its synchronous-batch path and its partial path) in the trainer's loop
shape (take batch s, train for --learn-s seconds, publish version s + 1) with the same async bound, against a
simulated rollout manager: decoding goes in rounds of --round-s seconds, in which every episode in flight
samples one token with the version last pushed (a batched engine's step costs about the same for any row
count). Each prompt has --group samples; every draw of prompts holds one long episode (--long rounds) among
short ones (--short rounds). No model, no Ray: what is measured is the scheduling, not the engine. The
mechanism on real workers (weights loaded mid-episode) is tested in tests/rl/rollout/test_workers.py.

Prints per mode the mean step time (after the first step), the rollout share of it, the mean groups per batch,
the oldest token's lag behind its step (never above --staleness), and the off/on ratio.
"""
from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import torch

from jointrl.rl.rollout.agent import Task
from jointrl.rl.rollout.pipeline import RolloutPipeline


class SimSampler:
    """Draws prompts of `group` samples; the first sample of each draw's first prompt is the long one."""

    def __init__(self, prompts_per_step: int, group: int, short: int, long: int):
        self.prompts_per_step, self.group, self.short, self.long = prompts_per_step, group, short, long
        self.next_group_id = 0

    def next_step(self, prompts: int | None = None) -> list[Task]:
        """`prompts` prompts (default prompts_per_step); a task's seed is its episode length in rounds."""
        tasks = []
        for p in range(self.prompts_per_step if prompts is None else prompts):
            lengths = [self.long if p == 0 and i == 0 else self.short for i in range(self.group)]
            tasks += [Task("bench/sim-v0:default", n, "low", self.next_group_id) for n in lengths]
            self.next_group_id += 1
        return tasks

    def record(self, outcomes) -> None:
        """The pipeline's outcome report (unused here)."""

    def state_dict(self) -> dict:
        """Nothing to resume."""
        return {}


class SimManager:
    """Episodes advance one token per round of `round_s` seconds, each token tagged with the pushed version."""

    chunk_timeout_s = 60.0

    def __init__(self, round_s: float):
        self.round_s, self.version = round_s, -1
        self.live: dict[int, tuple[Task, list[int]]] = {}
        self.next_key = 0

    def push_weights(self, weights, version: int) -> None:
        """Take on a version; episodes in flight sample their next tokens with it."""
        self.version = version

    def submit(self, tasks: list[Task]) -> list[int]:
        """Partial mode: put tasks in flight; returns their keys."""
        keys = list(range(self.next_key, self.next_key + len(tasks)))
        self.next_key += len(tasks)
        self.live.update((k, (t, [])) for k, t in zip(keys, tasks))
        return keys

    def advance(self, seed: int = 0, max_steps: int = 16) -> list[tuple[int, SimpleNamespace]]:
        """Partial mode: rounds until an episode ends (at most max_steps); the ones that ended."""
        for _ in range(max_steps):
            ended = self._round()
            if ended:
                return ended
        return []

    def run(self, tasks: list[Task], seed: int = 0) -> list[SimpleNamespace]:
        """Whole-batch mode: play every task to the end; one trajectory per task, in order."""
        keys = self.submit(tasks)
        done: dict[int, SimpleNamespace] = {}
        while len(done) < len(keys):
            done.update(self._round())
        return [done[k] for k in keys]

    def _round(self) -> list[tuple[int, SimpleNamespace]]:
        time.sleep(self.round_s)
        ended = []
        for key, (task, versions) in list(self.live.items()):
            versions.append(self.version)
            if len(versions) == task.seed:
                del self.live[key]
                episode = SimpleNamespace(env_id=task.env_id, group_id=task.group_id, signals={}, failed=False)
                ended.append((key, SimpleNamespace(episode=episode, policy_version=torch.tensor(versions))))
        return ended


def measure(args: argparse.Namespace, partial: bool) -> dict[str, float]:
    """Run the trainer-shaped loop for args.steps steps; step times and staleness of one mode."""
    sampler = SimSampler(args.prompts, args.group, args.short, args.long)
    pipeline = RolloutPipeline(SimManager(args.round_s), sampler, run_seed=0, max_staleness=args.staleness,
                               start_step=0, steps=args.steps, partial=partial, spare_prompts=args.spare)
    pipeline.publish({}, 0)
    ends, lags, groups, rollout_s = [], [], [], []
    start = time.perf_counter()
    for step in range(args.steps):
        batch = pipeline.next()
        lags.append(max(step - int(t.policy_version.min()) for t in batch.trajectories))
        groups.append(len({t.episode.group_id for t in batch.trajectories}))
        rollout_s.append(batch.seconds)
        time.sleep(args.learn_s)  # the learner's step
        pipeline.publish({}, step + 1)
        ends.append(time.perf_counter() - start)
    pipeline.close()
    steps = [b - a for a, b in zip(ends, ends[1:])]  # the first step holds the pipeline's start: left out
    assert max(lags) <= args.staleness, "a token older than the staleness bound reached the learner"
    return {"step_s": sum(steps) / len(steps), "rollout_s": sum(rollout_s[1:]) / len(steps),
            "groups": sum(groups) / len(groups), "max_lag": max(lags)}


def main() -> None:
    """Measure both modes in one run and print the table and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--staleness", type=int, default=2, help="rollout.max_staleness (both modes)")
    parser.add_argument("--prompts", type=int, default=4, help="trainer.prompts_per_step")
    parser.add_argument("--group", type=int, default=4, help="rollout.group_size")
    parser.add_argument("--spare", type=int, default=1, help="rollout.partial_spare_prompts")
    parser.add_argument("--short", type=int, default=20, help="rounds of a normal episode")
    parser.add_argument("--long", type=int, default=60, help="rounds of the long episode")
    parser.add_argument("--round-s", type=float, default=0.004, help="seconds of one decode round")
    parser.add_argument("--learn-s", type=float, default=0.05, help="seconds of one learner step")
    args = parser.parse_args()
    rows = {"off": measure(args, partial=False), "on": measure(args, partial=True)}
    print(f"{'partial':>8} {'step s':>8} {'rollout s':>10} {'groups/batch':>13} {'max lag':>8}")
    for mode, r in rows.items():
        print(f"{mode:>8} {r['step_s']:8.3f} {r['rollout_s']:10.3f} {r['groups']:13.2f} {r['max_lag']:8d}")
    print(f"step time off/on: {rows['off']['step_s'] / rows['on']['step_s']:.2f}x "
          f"(max_staleness {args.staleness}, one {args.long}-round episode per draw among {args.short}-round ones)")


if __name__ == "__main__":
    main()
