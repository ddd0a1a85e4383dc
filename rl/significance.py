"""Paired confidence intervals for the change in held-out pass rate between two policies on the same tasks.

Two evaluations of the same held-out tasks (env id, seed, tier) are compared task by task: each task's
pass rate (the mean over its samples) under policy A and under policy B. The change is the mean over tasks
of B - A, and its 95% interval comes from a paired bootstrap that resamples tasks with replacement, so
that the easy-or-hard-ness each task shares between the two policies cancels out of the spread. A change
is significant when its interval excludes 0.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from jointrl.envs.episode import Episode
from jointrl.rl.evaluate import EvalSummary, passed

RESAMPLES = 10_000
LEVEL = 0.95


@dataclass(frozen=True)
class Change:
    """The paired change of one group's pass rate from policy A to policy B."""

    group: str
    tasks: int
    episodes_a: int
    episodes_b: int
    a: float  # pass rate of A over the shared tasks
    b: float
    change: float  # b - a
    low: float  # the interval's bounds
    high: float

    @property
    def significant(self) -> bool:
        """Whether the interval excludes 0."""
        return self.low > 0 or self.high < 0

    def to_json(self) -> dict:
        """A JSON-ready dict, the verdict included."""
        return {**asdict(self), "significant": self.significant}


def family_of(episode: Episode) -> str:
    """"domain/family": the unit a learning claim is made per."""
    return f"{episode.domain}/{episode.family}"


def domain_of(episode: Episode) -> str:
    """The episode's domain."""
    return episode.domain


def task_pass_rates(summary: EvalSummary, group_of: Callable[[Episode], str]) -> dict[str, dict[tuple, float]]:
    """group -> task (env id, seed, tier) -> the task's pass rate over its samples."""
    outcomes: dict[str, dict[tuple, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for trajectory in summary.trajectories:
        e = trajectory.episode
        outcomes[group_of(e)][(e.env_id, e.seed, e.tier)].append(passed(e))
    return {g: {task: sum(v) / len(v) for task, v in tasks.items()} for g, tasks in outcomes.items()}


def paired_interval(a: np.ndarray, b: np.ndarray, resamples: int = RESAMPLES, level: float = LEVEL,
                    seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of mean(b - a) over paired values, resampling the pairs."""
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if diff.size == 0:
        raise ValueError("a paired interval needs at least one pair")
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, diff.size, size=(resamples, diff.size))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def compare(a: EvalSummary, b: EvalSummary, group_of: Callable[[Episode], str] = family_of, *,
            resamples: int = RESAMPLES, level: float = LEVEL, seed: int = 0) -> list[Change]:
    """Per group and over all tasks ("all"), B's paired change from A on the tasks both played.

    Raises ValueError when a group's tasks differ between the two evaluations: a change measured on
    different tasks is not a paired one.
    """
    rates_a, rates_b = task_pass_rates(a, group_of), task_pass_rates(b, group_of)
    if sorted(rates_a) != sorted(rates_b):
        raise ValueError(f"the evaluations cover different groups: {sorted(rates_a)} vs {sorted(rates_b)}")
    episodes_a, episodes_b = _episodes(a, group_of), _episodes(b, group_of)
    changes, all_a, all_b = [], [], []
    for group in sorted(rates_a):
        tasks = sorted(rates_a[group])
        if tasks != sorted(rates_b[group]):
            missing = sorted(set(rates_a[group]) ^ set(rates_b[group]))[:3]
            raise ValueError(f"group {group!r}: the evaluations played different tasks (e.g. {missing})")
        va = np.array([rates_a[group][t] for t in tasks])
        vb = np.array([rates_b[group][t] for t in tasks])
        all_a.append(va)
        all_b.append(vb)
        changes.append(_change(group, va, vb, episodes_a[group], episodes_b[group], resamples, level, seed))
    va, vb = np.concatenate(all_a), np.concatenate(all_b)
    changes.append(_change("all", va, vb, sum(episodes_a.values()), sum(episodes_b.values()), resamples, level, seed))
    return changes


def _episodes(summary: EvalSummary, group_of: Callable[[Episode], str]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for trajectory in summary.trajectories:
        counts[group_of(trajectory.episode)] += 1
    return counts


def _change(group: str, a: np.ndarray, b: np.ndarray, episodes_a: int, episodes_b: int, resamples: int,
            level: float, seed: int) -> Change:
    low, high = paired_interval(a, b, resamples, level, seed)
    return Change(group, len(a), episodes_a, episodes_b, float(a.mean()), float(b.mean()), float((b - a).mean()),
                  low, high)
