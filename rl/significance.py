"""Paired confidence intervals for the change in held-out pass rate between two policies on the same tasks.

Two evaluations of the same held-out tasks (env id, seed, tier) are compared task by task: each task's
pass rate (the mean over its samples) under policy A and under policy B. The change is the mean over tasks
of B - A, and its 95% interval comes from a paired bootstrap that resamples tasks with replacement, so
that the easy-or-hard-ness each task shares between the two policies cancels out of the spread. A change
is significant when its interval excludes 0.

Several runs of the same comparison (cold starts from different seeds, each with its own RL arms) are pooled by
a hierarchical bootstrap: resample the runs, then each drawn run's tasks. The change is the mean over runs of each
run's mean change, and the interval then carries the spread between runs as well as between tasks.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
from rich.console import Console
from rich.table import Table

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
    return compare_runs([(a, b)], group_of, resamples=resamples, level=level, seed=seed)


def compare_runs(runs: list[tuple[EvalSummary, EvalSummary]], group_of: Callable[[Episode], str] = family_of, *,
                 resamples: int = RESAMPLES, level: float = LEVEL, seed: int = 0) -> list[Change]:
    """Per group and "all", B's paired change from A pooled over runs (pairs of evaluations), hierarchical bootstrap.

    Every run must cover the same groups. With one run this is the paired bootstrap over its tasks.
    """
    if not runs:
        raise ValueError("compare_runs needs at least one pair of evaluations")
    paired = [_paired_rates(a, b, group_of) for a, b in runs]
    groups = sorted(paired[0])
    for rates in paired[1:]:
        if sorted(rates) != groups:
            raise ValueError(f"the runs cover different groups: {groups} vs {sorted(rates)}")
    episodes = [(_episodes(a, group_of), _episodes(b, group_of)) for a, b in runs]
    for rates, (episodes_a, episodes_b) in zip(paired, episodes):
        rates["all"] = tuple(np.concatenate([rates[g][side] for g in groups]) for side in (0, 1))
        episodes_a["all"], episodes_b["all"] = sum(episodes_a.values()), sum(episodes_b.values())
    changes = []
    for group in [*groups, "all"]:
        pairs = [rates[group] for rates in paired]
        counts = [(ea[group], eb[group]) for ea, eb in episodes]
        low, high = pooled_interval(pairs, resamples, level, seed)
        changes.append(Change(group, sum(len(va) for va, _ in pairs), sum(n for n, _ in counts),
                              sum(n for _, n in counts), float(np.mean([va.mean() for va, _ in pairs])),
                              float(np.mean([vb.mean() for _, vb in pairs])),
                              float(np.mean([(vb - va).mean() for va, vb in pairs])), low, high))
    return changes


def pooled_interval(pairs: list[tuple[np.ndarray, np.ndarray]], resamples: int = RESAMPLES, level: float = LEVEL,
                    seed: int = 0) -> tuple[float, float]:
    """The percentile interval of the mean over runs of mean(b - a), resampling runs, then each drawn run's pairs.

    One run is `paired_interval`. With few runs the spread between them is estimated from few draws (three
    cold starts give a coarse interval); that is the honest price of claiming more than one cold start's result.
    """
    if len(pairs) == 1:
        return paired_interval(*pairs[0], resamples, level, seed)
    diffs = [np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64) for a, b in pairs]
    if any(d.size == 0 for d in diffs):
        raise ValueError("a pooled interval needs at least one pair in every run")
    rng = np.random.default_rng(seed)
    k = len(diffs)
    drawn = rng.integers(0, k, size=(resamples, k))  # [resamples, k] which run fills each slot
    means = np.zeros((resamples, k))  # [resamples, k] the mean change of each slot's resample of its run's tasks
    for slot in range(k):
        for run, diff in enumerate(diffs):
            # Each slot resamples its run's tasks afresh: a run drawn twice is two draws, not one counted twice.
            rows = np.flatnonzero(drawn[:, slot] == run)
            means[rows, slot] = diff[rng.integers(0, diff.size, size=(rows.size, diff.size))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means.mean(axis=1), [tail, 1 - tail])
    return float(low), float(high)


def _paired_rates(a: EvalSummary, b: EvalSummary,
                  group_of: Callable[[Episode], str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """group -> (A's, B's) task pass rates, aligned task by task; refuses evaluations of different tasks."""
    rates_a, rates_b = task_pass_rates(a, group_of), task_pass_rates(b, group_of)
    if sorted(rates_a) != sorted(rates_b):
        raise ValueError(f"the evaluations cover different groups: {sorted(rates_a)} vs {sorted(rates_b)}")
    paired = {}
    for group in sorted(rates_a):
        tasks = sorted(rates_a[group])
        if tasks != sorted(rates_b[group]):
            missing = sorted(set(rates_a[group]) ^ set(rates_b[group]))[:3]
            raise ValueError(f"group {group!r}: the evaluations played different tasks (e.g. {missing})")
        paired[group] = (np.array([rates_a[group][t] for t in tasks]), np.array([rates_b[group][t] for t in tasks]))
    return paired


def _episodes(summary: EvalSummary, group_of: Callable[[Episode], str]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for trajectory in summary.trajectories:
        counts[group_of(trajectory.episode)] += 1
    return counts


def print_comparison(before: EvalSummary, after: EvalSummary, console: Console, *, title: str,
                     names: tuple[str, str] = ("SFT", "RL")) -> list[Change]:
    """Print the pass rate of `before` and `after` per family, per domain of several families and overall, with
    paired 95% CIs; return those changes."""
    table = Table(title=title)
    for name in ("", "tasks", "episodes", *names, "change", "95% CI", "significant"):
        table.add_column(name, justify="left" if name == "" else "right")
    *families, overall = compare(before, after, family_of)
    # A domain row only where it adds something: a domain of one family would repeat that family's row.
    domains = [c for c in compare(before, after, domain_of)[:-1]
               if sum(f.group.startswith(c.group + "/") for f in families) > 1]
    for section in (families, domains, [overall]):
        for i, change in enumerate(section):
            verdict = ("[green]up[/]" if change.change > 0 else "[red]down[/]") if change.significant else "no"
            table.add_row(change.group, str(change.tasks), str(change.episodes_a), f"{change.a:.3f}", f"{change.b:.3f}",
                          f"{change.change:+.3f}", f"[{change.low:+.3f}, {change.high:+.3f}]", verdict,
                          end_section=i == len(section) - 1)
    console.print(table)
    return [*families, *domains, overall]
