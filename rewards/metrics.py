"""Per-domain, per-tier and per-env statistics of one scored batch, named as the tracker logs them.

Names (domain, tier and reward names are lower_snake_case, so `/` separates levels unambiguously):
  reward/<domain>/{count, abstained, mean, std, normalized_mean, normalized_std}
  reward/<domain>/component/<reward>/{mean, abstained, share}
  signal/<domain>/<signal>                                mean of the env signal over episodes reporting it
  hack/<domain>/<name>                                    mean of the env's tamper signal `hack_<name>`
  hack/<domain>/any                                       share of the domain's episodes with any tamper signal
  tier/<tier>/{count, think_tokens, within_budget, reward_mean}
  env/<env_id>/reward_std                                 only for envs with two or more scored episodes
  reward/valid_fraction
Raw rewards are the weighted sums before normalisation; a component's `share` is its mean absolute weighted
contribution over the sum of all the domain's shares (only for domains scored by two or more terms).
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Sequence

from jointrl.envs.episode import HACK_PREFIX, Episode
from jointrl.rewards.normalize import moments


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def batch_metrics(
    episodes: Sequence[Episode],
    components: Sequence[dict[str, float | None]],
    weights: Sequence[dict[str, float]],
    raw: Sequence[float | None],
    rewards: Sequence[float],
) -> dict[str, float]:
    """Statistics of a scored batch for logging and for the alarms (see the module docstring for names)."""
    out: dict[str, float] = {}
    by_domain: dict[str, list[int]] = defaultdict(list)
    by_tier: dict[str, list[int]] = defaultdict(list)
    by_env: dict[str, list[int]] = defaultdict(list)
    for i, episode in enumerate(episodes):
        by_domain[episode.domain].append(i)
        by_tier[episode.tier].append(i)
        by_env[episode.env_id].append(i)

    for domain, idx in by_domain.items():
        out.update(_domain_metrics(f"reward/{domain}", idx, components, weights, raw, rewards))
        out.update(_signal_metrics(f"signal/{domain}", [episodes[i] for i in idx]))
        out.update(_hack_metrics(f"hack/{domain}", [episodes[i] for i in idx]))
    for tier, idx in by_tier.items():
        out.update(_tier_metrics(f"tier/{tier}", [episodes[i] for i in idx], [raw[i] for i in idx]))
    for env_id, idx in by_env.items():
        scored = [raw[i] for i in idx if raw[i] is not None]
        if len(scored) >= 2:
            out[f"env/{env_id}/reward_std"] = math.sqrt(moments(scored)[1])
    if episodes:
        out["reward/valid_fraction"] = sum(r is not None for r in raw) / len(raw)
    return out


def _domain_metrics(
    prefix: str,
    idx: list[int],
    components: Sequence[dict[str, float | None]],
    weights: Sequence[dict[str, float]],
    raw: Sequence[float | None],
    rewards: Sequence[float],
) -> dict[str, float]:
    out = {f"{prefix}/count": float(len(idx))}
    valid = [i for i in idx if raw[i] is not None]
    out[f"{prefix}/abstained"] = 1.0 - len(valid) / len(idx)
    if valid:
        (mean, var), (norm_mean, norm_var) = moments([raw[i] for i in valid]), moments([rewards[i] for i in valid])
        out |= {f"{prefix}/mean": mean, f"{prefix}/std": math.sqrt(var)}
        out |= {f"{prefix}/normalized_mean": norm_mean, f"{prefix}/normalized_std": math.sqrt(norm_var)}

    names = sorted({name for i in idx for name in components[i]})
    magnitude: dict[str, float] = {}
    for name in names:
        scored = [i for i in idx if name in components[i]]
        values = [components[i][name] for i in scored if components[i][name] is not None]
        out[f"{prefix}/component/{name}/abstained"] = 1.0 - len(values) / len(scored)
        if values:
            out[f"{prefix}/component/{name}/mean"] = _mean(values)
        # Abstentions count as zero contribution: they add nothing to the episode's reward.
        magnitude[name] = _mean([abs(weights[i][name] * (components[i][name] or 0.0)) for i in scored])
    total = sum(magnitude.values())
    if len(names) >= 2 and total > 0:
        out |= {f"{prefix}/component/{name}/share": magnitude[name] / total for name in names}
    return out


def _signal_metrics(prefix: str, episodes: list[Episode]) -> dict[str, float]:
    seen: dict[str, list[float]] = defaultdict(list)
    for episode in episodes:
        if not episode.failed:
            for key, value in episode.signals.items():
                seen[key].append(float(value))
    return {f"{prefix}/{key}": _mean(values) for key, values in seen.items()}


def _hack_metrics(prefix: str, episodes: list[Episode]) -> dict[str, float]:
    """Tamper signals (an env names them `hack_<name>`): each one's mean, and the share of episodes with any."""
    played = [e for e in episodes if not e.failed]
    names = sorted({k for e in played for k in e.signals if k.startswith(HACK_PREFIX)})
    if not names:
        return {}
    out = {f"{prefix}/{name[len(HACK_PREFIX):]}": _mean([float(e.signals.get(name, 0.0)) for e in played]) for name in names}
    out[f"{prefix}/any"] = _mean([float(any(e.signals.get(n, 0.0) > 0 for n in names)) for e in played])
    return out


def _tier_metrics(prefix: str, episodes: list[Episode], raw: list[float | None]) -> dict[str, float]:
    out = {f"{prefix}/count": float(len(episodes))}
    played = [e for e in episodes if not e.failed]
    if played:
        out[f"{prefix}/think_tokens"] = _mean([float(e.think_tokens) for e in played])
    budgeted = [e for e in played if e.think_budget]
    if budgeted:
        out[f"{prefix}/within_budget"] = _mean([float(e.think_tokens <= e.think_budget) for e in budgeted])
    scored = [r for r in raw if r is not None]
    if scored:
        out[f"{prefix}/reward_mean"] = _mean(scored)
    return out
