"""Rollout throughput: the batching engine against a naive generate loop, and one rollout worker against two.

    python benchmarks/rollout.py [--quick]

1. Tokens/s of jointrl.rl.rollout.engine.Engine against a per-sequence loop over jointrl.model.generate.generate
   (one episode at a time, each turn re-prefilling the whole history: no batching, no cache kept across
   turns), on the same model (the `tiny` preset, random weights) and the same multi-turn episodes, in one
   run. Turn lengths are scripted: a random prompt, then per turn a fixed number of generated tokens with
   stop tokens disabled and a fixed-length "tool result" fed before the next turn, so both sides generate
   exactly the same number of tokens. Greedy decoding, so both should also produce the same tokens.
2. Episodes/s of RolloutManager with one worker against two, on real multi-turn tool episodes: the
   debug model fitted to the lookup env's demos (the test suite's tests/rl/agent_envs.py, so this runs
   from a checkout), which calls the tool and then answers.

Prints measurements and ratios; asserts no timing.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

from jointrl.model.generate import SamplingParams, generate
from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer
from jointrl.rl.rollout.engine import Engine, TurnRequest

ROOT = Path(__file__).resolve().parents[1]
# Ids the random scripts never contain, so no thinking block opens and no budget applies.
THINK, END_THINK, FIRST_TEXT_ID = 5, 6, 8


def scripts(n: int, turns: int, prompt_len: int, feed_len: int, vocab: int, seed: int) -> list[list[list[int]]]:
    """Per episode, per turn: the tokens fed before generating (the prompt, then a tool result)."""
    g = torch.Generator().manual_seed(seed)
    return [
        [torch.randint(FIRST_TEXT_ID, vocab, (feed_len if t else prompt_len,), generator=g).tolist() for t in range(turns)]
        for _ in range(n)
    ]


def run_engine(model: Transformer, episodes: list[list[list[int]]], gen: int) -> tuple[list[list[int]], float]:
    """All episodes at once through one engine; returns each episode's generated tokens and the seconds taken."""
    greedy = SamplingParams(temperature=0)  # no stop ids: every turn generates exactly `gen` tokens
    engine = Engine(model, THINK, END_THINK, max_rows=len(episodes))
    out: list[list[int]] = [[] for _ in episodes]
    started = time.perf_counter()
    for turn in range(len(episodes[0])):
        results = engine.run([TurnRequest(i, ep[turn], gen, greedy) for i, ep in enumerate(episodes)])
        for i, result in enumerate(results):
            out[i] += result.tokens
    return out, time.perf_counter() - started


def run_naive(model: Transformer, episodes: list[list[list[int]]], gen: int) -> tuple[list[list[int]], float]:
    """One episode at a time, each turn a fresh generate over the whole history; same outputs as run_engine."""
    greedy = SamplingParams(temperature=0, max_new_tokens=gen)
    out: list[list[int]] = []
    started = time.perf_counter()
    for episode in episodes:
        history, generated = [], []
        for feed in episode:
            history += feed
            tokens = generate(model, [history], greedy)[0].tokens
            history += tokens
            generated += tokens
        out.append(generated)
    return out, time.perf_counter() - started


def engine_vs_naive(args: argparse.Namespace) -> None:
    """Part 1: tokens/s of the engine and of the naive loop on the same scripted episodes."""
    torch.manual_seed(0)
    cfg = PRESETS["tiny"]
    model = Transformer(cfg).eval()
    episodes = scripts(args.episodes, args.turns, args.prompt_len, args.feed_len, cfg.vocab_size, seed=0)
    run_engine(model, scripts(2, 2, 8, 4, cfg.vocab_size, seed=1), 2)  # warm-up: first-call allocations
    engine_out, engine_s = run_engine(model, episodes, args.gen)
    naive_out, naive_s = run_naive(model, episodes, args.gen)
    tokens = args.episodes * args.turns * args.gen
    assert sum(map(len, engine_out)) == sum(map(len, naive_out)) == tokens, "scripted turns generate fixed lengths"
    same = sum(a == b for a, b in zip(engine_out, naive_out))
    print(f"[1] model {cfg.name} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params), "
          f"{args.episodes} concurrent episodes x {args.turns} turns x {args.gen} generated tokens "
          f"(prompt {args.prompt_len}, tool result {args.feed_len}; scripted turn lengths, stop tokens off)")
    print(f"    engine : {tokens / engine_s:8.1f} tokens/s ({engine_s:.1f} s)")
    print(f"    naive  : {tokens / naive_s:8.1f} tokens/s ({naive_s:.1f} s)")
    print(f"    engine / naive = {naive_s / engine_s:.2f}x   (target >= 3x)")
    print(f"    identical greedy episodes: {same}/{len(episodes)}")


def workers_scaling(args: argparse.Namespace) -> None:
    """Part 2: episodes/s of the rollout manager with one worker and with two."""
    import ray

    sys.path.insert(0, str(ROOT))  # the lookup env and its fitted policy live with the tests
    from jointrl.rl.actor_group import Placement
    from jointrl.rl.rollout.agent import Task
    from jointrl.rl.config.rollout import RolloutConfig
    from jointrl.rl.rollout.manager import RolloutManager
    from tests.rl import agent_envs

    agent_envs.register()
    model, tokenizer = agent_envs.train_lookup_policy()
    rollout = RolloutConfig(
        tiers={"low": 64, "high": 64, "max": 64}, max_turns=4, max_new_tokens_per_turn=48,
        max_new_tokens_per_episode=192, temperature=1.0,
    )
    tasks = [Task(agent_envs.LOOKUP, seed, "low", group_id=seed) for seed in range(args.worker_episodes)]
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    rates = {}
    try:
        for n in (1, 2):
            manager = RolloutManager(
                model.cfg, tokenizer, rollout, n_workers=n, chunk_size=args.chunk, chunk_timeout_s=600,
                placement=Placement(num_cpus=1, runtime_env=agent_envs.WORKER_RUNTIME_ENV),
                env_setup=[agent_envs.ENV_SETUP], max_rows=args.chunk,
            )
            manager.push_weights(model.state_dict(), version=1)
            manager.run(tasks[: args.chunk * n])  # warm-up: every worker's first call
            started = time.perf_counter()
            out = manager.run(tasks, seed=1)
            seconds = time.perf_counter() - started
            manager.shutdown()
            rates[n] = len(out) / seconds
            turns = sum(t.episode.turns for t in out) / len(out)
            success = sum(t.episode.signals.get("success", 0.0) for t in out) / len(out)
            label = f"{n} worker{'s' if n > 1 else ' '}"
            print(f"[2] {label}: {rates[n]:6.2f} episodes/s ({len(out)} episodes in {seconds:.1f} s, "
                  f"{turns:.2f} turns/episode, success {success:.2f}, failed {sum(t.episode.failed for t in out)})")
    finally:
        ray.shutdown()
    print(f"    2 workers / 1 worker = {rates[2] / rates[1]:.2f}x   ({os.cpu_count()} CPUs on this machine)")


def main() -> None:
    """Parse the size options and run both parts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns and tokens (about a minute)")
    args = parser.parse_args()
    args.episodes, args.prompt_len, args.feed_len = 32, 64, 16
    args.turns, args.gen = (2, 8) if args.quick else (3, 16)
    args.worker_episodes, args.chunk = (32, 8) if args.quick else (64, 8)
    torch.set_num_threads(1)  # one core each for the driver-side comparison, as a rollout worker would have
    engine_vs_naive(args)
    workers_scaling(args)


if __name__ == "__main__":
    main()
