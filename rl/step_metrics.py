"""What one RL step reports beyond rewards and the learner: advantages and filters, episodes, staleness, speed.

Names follow the tracker's grouping: `pass_rate/<domain>`, `reward/mean`, `episode/...`, `filter/...`, `advantage/...`,
`staleness/...`, `perf/...`. Reward metrics (`reward/...`, `tier/...`) come from the reward mixer and
learner metrics (`loss/...`, `policy/...`, `mismatch/...`, `learner/...`) from the learner.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import torch

from jointrl.rewards.mixer import MixedBatch
from jointrl.rl.advantages import overlong_keep, zero_variance_groups
from jointrl.rl.algorithms import ALGORITHMS, sequence_advantages
from jointrl.rl.config import AlgorithmConfig
from jointrl.rl.evaluate import passed
from jointrl.rl.trajectory import Trajectory


@dataclass
class Advantages:
    """Per-trajectory advantages and which trajectories the learner trains on."""

    values: list[float]  # [N] sequence advantage (0 for critic algorithms: GAE runs on the learner)
    keep: list[bool]  # [N] False = masked out (no reward, a zero-variance group, cut off by a limit)
    metrics: dict[str, float]


def advantages_and_filters(cfg: AlgorithmConfig, trajectories: list[Trajectory], mixed: MixedBatch) -> Advantages:
    """The algorithm's sequence advantages from the mixed rewards, then the recipe's filters."""
    n = len(trajectories)
    rewards = torch.tensor(mixed.rewards, dtype=torch.float64)  # [N]
    group_ids = torch.tensor([t.episode.group_id for t in trajectories], dtype=torch.long)  # [N]
    valid = torch.tensor(mixed.valid, dtype=torch.bool) & torch.tensor([len(t.tokens) > 1 for t in trajectories])
    keep = valid.clone()
    metrics: dict[str, float] = {}
    if cfg.dynamic_sampling:
        raw = torch.tensor([r if r is not None else 0.0 for r in mixed.raw], dtype=torch.float64)
        varied = zero_variance_groups(raw, group_ids, valid)
        metrics["filter/zero_variance_dropped"] = float((valid & ~varied).sum()) / max(n, 1)
        keep &= varied
    if cfg.overlong_filter:
        fits = overlong_keep(torch.tensor([t.episode.truncated for t in trajectories], dtype=torch.bool))
        metrics["filter/overlong_dropped"] = float((keep & ~fits).sum()) / max(n, 1)
        keep &= fits
    if ALGORITHMS[cfg.name].critic:
        values = torch.zeros(n, dtype=torch.float64)
    else:
        values = sequence_advantages(cfg.name, rewards, group_ids, valid).to(torch.float64)
    values = torch.where(keep, values, 0.0)
    metrics["filter/kept"] = float(keep.sum()) / max(n, 1)
    if bool(keep.any()):
        metrics["advantage/mean"] = float(values[keep].mean())
        metrics["advantage/abs_mean"] = float(values[keep].abs().mean())
    return Advantages(values.tolist(), keep.tolist(), metrics)


def reward_summary(mixed: MixedBatch) -> dict[str, float]:
    """The mean raw (unnormalised) reward over the episodes that have one."""
    raw = [r for r in mixed.raw if r is not None]
    return {"reward/mean": sum(raw) / len(raw)} if raw else {}


def episode_metrics(trajectories: list[Trajectory]) -> dict[str, float]:
    """Success per domain, turns, truncation, failures, tool errors and lengths of a batch."""
    success: dict[str, list[float]] = defaultdict(list)
    for t in trajectories:
        value = float(passed(t.episode))
        success[t.episode.domain].append(value)
        success["all"].append(value)
    n = max(len(trajectories), 1)
    metrics = {f"pass_rate/{domain}": sum(v) / len(v) for domain, v in success.items()}
    metrics |= {
        "episode/turns": sum(t.episode.turns for t in trajectories) / n,
        "episode/truncated": sum(t.episode.truncated for t in trajectories) / n,
        "episode/failed": sum(t.episode.failed for t in trajectories) / n,
        "episode/tool_errors": sum(t.episode.signals.get("tool_errors", 0.0) for t in trajectories) / n,
        "episode/tokens": sum(len(t.tokens) for t in trajectories) / n,
        "episode/sampled_tokens": sum(float(t.loss_mask.sum()) for t in trajectories) / n,
    }
    return metrics


def staleness_metrics(trajectories: list[Trajectory], learner_version: int) -> dict[str, float]:
    """How many versions behind the learner the sampled tokens of a batch were (0 in synchronous mode)."""
    lags = [learner_version - t.policy_version[t.loss_mask > 0] for t in trajectories if t.loss_mask.sum() > 0]
    if not lags:
        return {}
    lag = torch.cat(lags).float()
    return {"staleness/mean": float(lag.mean()), "staleness/max": float(lag.max())}


def failed_episodes(trajectories: list[Trajectory]) -> list[str]:
    """One line per failed episode (env id, seed, error), for the console."""
    return [f"{t.episode.env_id} seed {t.episode.seed}: {t.episode.error}" for t in trajectories if t.episode.failed]
