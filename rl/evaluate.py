"""Held-out evaluation: play env ids on eval seeds with the agent loop and summarise pass rates."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from jointrl.envs import registry
from jointrl.model.generate import SamplingParams
from jointrl.model.tokenizer import JointTokenizer
from jointrl.model.transformer import Transformer
from jointrl.rl.agent import AgentLoop, LoopLimits, Task
from jointrl.rl.config import RunConfig
from jointrl.rl.engine import Engine
from jointrl.rl.trajectory import Trajectory


@dataclass
class EvalSummary:
    """Pass rate and think tokens per domain (and overall) over the evaluated episodes."""

    trajectories: list[Trajectory]
    pass_rate: dict[str, float]  # domain -> fraction of episodes with success 1.0; "all" over everything
    think_tokens: dict[str, float]  # tier -> mean think tokens per episode


def evaluate(
    model: Transformer, tokenizer: JointTokenizer, cfg: RunConfig, env_ids: list[str], seeds: list[int],
    temperature: float = 0.0, max_rows: int = 32,
) -> EvalSummary:
    """Play every env id on every seed (each env at its default tier) and summarise."""
    eval_range = range(cfg.envs.eval_seeds.start, cfg.envs.eval_seeds.stop)
    outside = [s for s in seeds if s not in eval_range]
    if outside:
        raise ValueError(f"seeds {outside} are outside the held-out range [{eval_range.start}, {eval_range.stop})")
    tasks = [Task(env_id, seed, registry.spec(env_id).default_tier, group_id=i)
             for i, (env_id, seed) in enumerate((e, s) for e in env_ids for s in seeds)]
    engine = Engine(model, tokenizer.think_start_id, tokenizer.think_end_id, max_rows=max_rows, pad_id=tokenizer.pad_id)
    sampling = SamplingParams(temperature=temperature, top_p=cfg.rollout.top_p, top_k=cfg.rollout.top_k)
    trajectories = AgentLoop(engine, tokenizer, LoopLimits.from_rollout(cfg.rollout), sampling).run(tasks)

    passed: dict[str, list[float]] = defaultdict(list)
    think: dict[str, list[int]] = defaultdict(list)
    for t in trajectories:
        success = 0.0 if t.episode.failed else t.episode.signals.get("success", 0.0)
        passed[t.episode.domain].append(success)
        passed["all"].append(success)
        think[t.episode.tier].append(t.episode.think_tokens)
    return EvalSummary(
        trajectories=trajectories,
        pass_rate={d: sum(v) / len(v) for d, v in passed.items()},
        think_tokens={tier: sum(v) / len(v) for tier, v in think.items()},
    )


def print_summary(summary: EvalSummary, console: Console, title: str) -> None:
    """A table of pass rates per domain."""
    table = Table(title=title)
    table.add_column("domain")
    table.add_column("episodes", justify="right")
    table.add_column("pass rate", justify="right")
    counts: dict[str, int] = defaultdict(int)
    for t in summary.trajectories:
        counts[t.episode.domain] += 1
    for domain in sorted(d for d in summary.pass_rate if d != "all") + ["all"]:
        n = len(summary.trajectories) if domain == "all" else counts[domain]
        table.add_row(domain, str(n), f"{summary.pass_rate[domain]:.2f}")
    console.print(table)
