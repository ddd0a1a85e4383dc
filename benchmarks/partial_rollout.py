"""Partial rollouts: step time with one deliberately long episode per batch, `rollout.partial` on against off.

    python benchmarks/partial_rollout.py [--steps 8] [--staleness 2] [--only real|sim]

Both modes run the real RolloutPipeline (its whole-batch path and its partial path) in the trainer's loop shape
(take batch s, "train" for --learn-s seconds, publish version s + 1) with the same async bound, on two backends:

  real  one Ray rollout worker (RolloutManager, engine, agent loop) playing the debug model with random weights,
        greedy, its stop tokens' head rows zeroed so that every episode runs to a limit set by its task: a short
        task's prompt fills the context (--context) up to --short free tokens, the long task's prompt is a few
        tokens and its episode runs --long tokens (max_new_tokens). New weights (the same tensors under the next
        version) go through the object store each step, so carried episodes load them mid-way.
  sim   no model, no Ray: decoding goes in rounds of --round-s seconds in which every episode in flight samples
        one token with the version last pushed (a batched engine's step costs about the same for any row count).

Each prompt has --group samples and every draw of prompts holds one long episode among short ones. Prints per
backend and mode the mean step time (after the first step), the mean groups per batch, the oldest token's lag
behind its step (never above --staleness), how many episodes hold tokens of two or more versions, and the off/on
ratio.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from jointrl.envs import registry
from jointrl.envs.base import Action, Env, EnvSpec
from jointrl.rl.rollout.agent import Task
from jointrl.rl.rollout.pipeline import RolloutPipeline

SHORT, LONG = "bench/pad-v0:short", "bench/pad-v0:long"
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
REPO_ROOT = Path(__file__).resolve().parents[1]
FILLER_VAR = "JOINTRL_BENCH_FILLER"  # the short prompt's word count, for the workers' register()


class Pad(Env):
    """A prompt of `filler` words and nothing to do: the episode's length is whatever room the context leaves."""

    def _reset(self, seed):
        words = " ".join(WORDS[(seed + i) % len(WORDS)] for i in range(self.kwargs["filler"]))
        return [{"role": "user", "content": words}]

    def _signals(self):
        return {"success": 0.0}

    def _solution(self):
        yield Action(None, answer="ok", reasoning="Nothing to do.")


def register(filler: int | None = None) -> None:
    """The two bench env ids in this process's registry (the worker's, through env_setup); filler sizes the short one."""
    if filler is None:  # in a worker, called through env_setup without arguments
        filler = int(os.environ[FILLER_VAR])
    registry.register(EnvSpec(id=SHORT, entry_point=f"{__name__}:Pad", kwargs={"filler": filler}))
    registry.register(EnvSpec(id=LONG, entry_point=f"{__name__}:Pad", kwargs={"filler": 2}))


class SimSampler:
    """Draws prompts of `group` samples; the first sample of each draw's first prompt is the long one."""

    def __init__(self, prompts_per_step: int, group: int):
        self.prompts_per_step, self.group = prompts_per_step, group
        self.next_group_id = 0

    def next_step(self, prompts: int | None = None) -> list[Task]:
        """`prompts` prompts (default prompts_per_step), each `group` samples under one group id."""
        tasks = []
        for p in range(self.prompts_per_step if prompts is None else prompts):
            ids = [LONG if p == 0 and i == 0 else SHORT for i in range(self.group)]
            tasks += [Task(env_id, self.next_group_id, "low", self.next_group_id) for env_id in ids]
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

    def __init__(self, round_s: float, short: int, long: int):
        self.round_s, self.version = round_s, -1
        self.rounds = {SHORT: short, LONG: long}
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
            if len(versions) == self.rounds[task.env_id]:
                del self.live[key]
                episode = SimpleNamespace(env_id=task.env_id, group_id=task.group_id, signals={}, failed=False)
                ended.append((key, SimpleNamespace(episode=episode, policy_version=torch.tensor(versions))))
        return ended


def measure(args: argparse.Namespace, manager, weights, partial: bool) -> dict[str, float]:
    """Run the trainer-shaped loop for args.steps steps on `manager`; step times and staleness of one mode."""
    pipeline = RolloutPipeline(manager, SimSampler(args.prompts, args.group), run_seed=0, max_staleness=args.staleness,
                               start_step=0, steps=args.steps, partial=partial, spare_prompts=args.spare)
    version = manager.sync.latest.version + 1 if hasattr(manager, "sync") and manager.sync.latest else 0
    pipeline.publish(weights, version)
    ends, lags, groups, mixed = [], [], [], 0
    start = time.perf_counter()
    for step in range(args.steps):
        batch = pipeline.next()
        played = [t.policy_version[t.policy_version >= 0] for t in batch.trajectories]
        lags.append(max(version + step - int(v.min()) for v in played if v.numel()))
        groups.append(len({t.episode.group_id for t in batch.trajectories}))
        mixed += sum(len(v.unique()) > 1 for v in played)  # episodes that took new weights mid-way
        time.sleep(args.learn_s)  # the learner's step
        pipeline.publish(weights, version + step + 1)
        ends.append(time.perf_counter() - start)
    pipeline.close()
    steps = [b - a for a, b in zip(ends, ends[1:])]  # the first step holds the pipeline's start: left out
    assert max(lags) <= args.staleness, "a token older than the staleness bound reached the learner"
    return {"step_s": sum(steps) / len(steps), "groups": sum(groups) / len(groups), "max_lag": max(lags),
            "mixed": mixed}


def real_backend(args: argparse.Namespace):
    """One Ray rollout worker with the debug model (random weights, stop tokens unreachable); (manager, weights)."""
    import ray

    from jointrl.model.chat import render_text
    from jointrl.model.presets import PRESETS
    from jointrl.model.tokenizer import train_tokenizer
    from jointrl.model.transformer import Transformer
    from jointrl.rl.actor_group import Placement
    from jointrl.rl.config.rollout import RolloutConfig
    from jointrl.rl.rollout.manager import RolloutManager

    # A new local Ray, not one another job on this machine left running.
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    texts = [render_text([{"role": "user", "content": " ".join(WORDS * 3)}, {"role": "assistant", "content": "ok"}],
                         [], "low")]
    tokenizer = train_tokenizer(texts * 20, 512)
    filler = args.context - args.short - 7  # every word is one token; the chat template adds about 7
    register(filler)
    torch.manual_seed(0)
    model = Transformer(PRESETS["debug"].model_copy(update={"max_seq_len": args.context}))
    with torch.no_grad():
        # Greedy decoding never picks a logit of 0 over 511 random ones: episodes end at their limit, not by chance.
        model.lm_head.weight[[tokenizer.eot_id, tokenizer.eos_id]] = 0.0
    rollout = RolloutConfig(
        tiers={"low": args.long, "high": args.long, "max": args.long}, max_turns=1, max_new_tokens_per_turn=args.long,
        max_new_tokens_per_episode=args.long, temperature=0.0, max_staleness=args.staleness, max_rows=64,
    )
    env_vars = {"PYTHONPATH": str(REPO_ROOT), FILLER_VAR: str(filler)}
    placement = Placement(num_cpus=1, runtime_env={"env_vars": env_vars}, ready_timeout_s=120)
    manager = RolloutManager(model.cfg, tokenizer, rollout, n_workers=1, chunk_size=10_000, placement=placement,
                             env_setup=["benchmarks.partial_rollout:register"], max_rows=64)
    return manager, model.state_dict()


def main() -> None:
    """Measure both modes on each backend in one run and print the table and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["real", "sim"], help="one backend (default: both)")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--staleness", type=int, default=2, help="rollout.max_staleness (both modes)")
    parser.add_argument("--prompts", type=int, default=4, help="trainer.prompts_per_step")
    parser.add_argument("--group", type=int, default=4, help="rollout.group_size")
    parser.add_argument("--spare", type=int, default=1, help="rollout.partial_spare_prompts")
    parser.add_argument("--short", type=int, default=64, help="tokens (real) or rounds (sim) of a short episode")
    parser.add_argument("--long", type=int, default=256, help="tokens (real) or rounds (sim) of the long episode")
    parser.add_argument("--context", type=int, default=320, help="real: the model's max_seq_len")
    parser.add_argument("--round-s", type=float, default=0.004, help="sim: seconds of one decode round")
    parser.add_argument("--learn-s", type=float, default=0.05, help="seconds of one learner step")
    args = parser.parse_args()
    rows = {}
    for backend in ["real", "sim"] if args.only is None else [args.only]:
        if backend == "real":
            manager, weights = real_backend(args)
        else:
            manager, weights = SimManager(args.round_s, args.short, args.long), {}
        try:
            rows[backend] = {mode: measure(args, manager, weights, partial=mode == "on") for mode in ("off", "on")}
        finally:
            if backend == "real":
                manager.shutdown()
    print(f"{'backend':>8} {'partial':>8} {'step s':>8} {'groups/batch':>13} {'max lag':>8} {'2+ versions':>12}")
    for backend, modes in rows.items():
        for mode, r in modes.items():
            print(f"{backend:>8} {mode:>8} {r['step_s']:8.3f} {r['groups']:13.2f} {r['max_lag']:8d} {r['mixed']:12d}")
    for backend, modes in rows.items():
        print(f"{backend}: step time off/on {modes['off']['step_s'] / modes['on']['step_s']:.2f}x (max_staleness "
              f"{args.staleness}, one {args.long}-token episode per draw among {args.short}-token ones)")


if __name__ == "__main__":
    main()
