"""The algorithm's stage of one RL step: the mixed rewards become sequence advantages, then the filters pick what trains.

Metric names: `filter/...` (the share of the batch each filter dropped, and what was kept) and
`advantage/...` (mean and mean absolute value over the kept sequences).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from jointrl.rewards.mixer import MixedBatch
from jointrl.rl.algorithms.advantages import overlong_keep, zero_variance_groups
from jointrl.rl.algorithms.table import ALGORITHMS, sequence_advantages
from jointrl.rl.config.training import AlgorithmConfig
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
