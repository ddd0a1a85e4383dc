"""What one RL step reports beyond rewards, advantages and the learner: episodes, staleness, failures.

Names follow the tracker's grouping: `pass_rate/<domain>`, `reward/mean`, `episode/...`, `staleness/...`.
Advantage and filter metrics (`filter/...`, `advantage/...`) come from jointrl.rl.algorithms.step, reward
metrics (`reward/...`, `tier/...`) from the reward mixer and learner metrics (`loss/...`, `policy/...`,
`mismatch/...`, `learner/...`) from the learner.
"""
from __future__ import annotations

from collections import defaultdict

import torch

from jointrl.rewards.mixer import MixedBatch
from jointrl.rl.evaluate import passed
from jointrl.rl.trajectory import Trajectory


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
