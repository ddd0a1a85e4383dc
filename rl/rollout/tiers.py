"""Thinking tiers: which tier each task is played in, and the token budget of each tier.

A recipe picks one of three modes (`rollout.tier_selection.mode`):

- `fixed`: the first glob of `rollout.tier_selection.fixed` (in recipe order) that matches the env id
  gives the tier; an env no glob matches keeps its spec's `default_tier`.
- `ratios`: the tier is drawn at random with the probabilities of `rollout.tier_selection.ratios`, from
  the caller's seeded RNG, so the draw is as deterministic as that RNG.
- `auto`: a rule of the env's difficulty only, `AUTO_TIERS`: easy -> low, default -> low (the
  reasoning-gym datasets' default configuration, their easiest), medium -> high, hard -> max. A
  difficulty outside the table (a plugin's own name) keeps the spec's `default_tier`.

The AgentLoop takes `{tier: thinking budget}`; `budgets(run_config)` builds it from `rollout.tiers`.
"""
from __future__ import annotations

import bisect
import fnmatch
import random
from typing import Mapping

from jointrl.envs import registry
from jointrl.envs.base import TIERS
from jointrl.rl.config.rollout import TierSelection
from jointrl.rl.config.run import RunConfig

AUTO_TIERS: dict[str, str] = {"easy": "low", "default": "low", "medium": "high", "hard": "max"}
MODES = ("fixed", "ratios", "auto")


def budgets(run_config: RunConfig) -> dict[str, int]:
    """The thinking budget in tokens of each tier, `{tier: budget}`, from `rollout.tiers`."""
    tiers = run_config.rollout.tiers
    return {tier: getattr(tiers, tier) for tier in TIERS}


def _check_tier(tier: str, where: str) -> None:
    if tier not in TIERS:
        raise ValueError(f"{where}: unknown tier {tier!r}; tiers are {', '.join(TIERS)}")


class TierSelector:
    """Chooses the thinking tier of a task from its env id (and, in ratios mode, a seeded RNG)."""

    def __init__(
        self,
        mode: str = "fixed",
        fixed: Mapping[str, str] | None = None,
        ratios: Mapping[str, float] | None = None,
    ):
        if mode not in MODES:
            raise ValueError(f"unknown tier selection mode {mode!r}; modes are {', '.join(MODES)}")
        self.mode = mode
        self.fixed = dict(fixed or {})
        self.ratios = dict(ratios or {})
        for glob, tier in self.fixed.items():
            _check_tier(tier, f"tier_selection.fixed[{glob!r}]")
        for tier, p in self.ratios.items():
            _check_tier(tier, "tier_selection.ratios")
            if not p >= 0:
                raise ValueError(f"tier_selection.ratios[{tier!r}]: probability must be >= 0, got {p!r}")
        if mode == "fixed":
            # A glob that selects nothing is almost surely a typo that would silently fall back to defaults.
            for glob in self.fixed:
                if not registry.env_ids(glob):
                    raise ValueError(f"tier_selection.fixed glob {glob!r} selects no registered env id")
        if mode == "ratios":
            # Walk the tiers in their canonical order, not the recipe's, so equal ratios give equal draws.
            self._tiers = [t for t in TIERS if self.ratios.get(t, 0.0) > 0]
            if not self._tiers:
                raise ValueError("tier_selection.ratios gives no tier a positive probability")
            total = 0.0
            self._cumulative = []
            for tier in self._tiers:
                total += self.ratios[tier]
                self._cumulative.append(total)

    @classmethod
    def from_config(cls, selection: TierSelection) -> TierSelector:
        """The selector a recipe's `rollout.tier_selection` describes."""
        return cls(mode=selection.mode, fixed=selection.fixed, ratios=selection.ratios)

    def possible(self, env_id: str) -> list[str]:
        """Every tier a task of `env_id` can be played in, in TIERS order (one but in ratios mode)."""
        if self.mode == "ratios":
            return list(self._tiers)
        return [self.choose(env_id, random.Random(0))]

    def choose(self, env_id: str, rng: random.Random) -> str:
        """The tier of one task of `env_id`; only ratios mode draws from `rng`."""
        if self.mode == "ratios":
            index = bisect.bisect_right(self._cumulative, rng.random() * self._cumulative[-1])
            return self._tiers[min(index, len(self._tiers) - 1)]
        env_spec = registry.spec(env_id)
        if self.mode == "fixed":
            for glob, tier in self.fixed.items():
                if fnmatch.fnmatchcase(env_id, glob):
                    return tier
            return env_spec.default_tier
        return AUTO_TIERS.get(env_spec.difficulty, env_spec.default_tier)
