"""The envs section: the environment mix, its domain shares and schedule, and the train / held-out seeds."""
from __future__ import annotations

import math
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import Field, model_validator

from jointrl.envs import registry as env_registry
from jointrl.envs.base import HELD_OUT_START
from jointrl.rl.config.section import Loc, Section, fail_at, raise_at


class EnvMixEntry(Section):
    """One line of the environment mix: the env ids a glob selects, and how often they are drawn."""

    glob: str = Field(..., min_length=1, description="Glob over env ids 'domain/family-vN:difficulty', e.g. 'swe/*:hard'.")
    weight: float = Field(1.0, gt=0, allow_inf_nan=False, description="Relative sampling weight of the selected envs.")
    demos: int | None = Field(
        None, ge=0, description="Cold-start demonstrations per env id of this glob; unset = trainer.sft.demos_per_env.",
    )
    agent: str | None = Field(
        None, description="'module:function' of a black-box agent program that plays these envs through the OpenAI "
        "API (see rl/serve/blackbox.py); unset = the built-in agent loop.",
    )


class SeedRange(Section):
    """A half-open range of environment seeds [start, stop)."""

    start: int = Field(..., ge=0, description="First seed of the range.")
    stop: int = Field(..., gt=0, description="One past the last seed of the range.")

    @model_validator(mode="after")
    def _ordered(self) -> SeedRange:
        if self.stop <= self.start:
            fail_at("SeedRange", ("stop",), f"stop={self.stop} must be greater than start={self.start}", self.stop)
        return self


class LearnabilityConfig(Section):
    """Learnability-weighted mixing (envs.mix_schedule: learnability): see rl/rollout/learnability.py."""

    floor: float = Field(0.1, gt=0, le=1, description="Smallest factor an id's weight is scaled by, so none starves.")
    cap: float = Field(0.5, gt=0, le=1, description="Largest share of its domain's prompts one id may take (a domain "
                       "of n ids with n x cap <= 1 gets equal shares whatever the pass rates).")
    decay: float = Field(0.8, ge=0, lt=1, description="Per-step decay of the pass-rate counts (0 = last step only).")
    prior_episodes: float = Field(2.0, gt=0, description="Half-successes mixed into each id's pass rate (unseen = 0.5).")


class EnvsConfig(Section):
    """Which environments a run samples tasks from, and the seeds that keep training and evaluation apart."""

    mix: list[EnvMixEntry] = Field(
        default_factory=lambda: [EnvMixEntry(glob="*")],
        min_length=1,
        description="Weighted globs over registered env ids; the default draws from every registered env.",
    )
    domain_shares: dict[str, float] = Field(
        default_factory=dict,
        description="Fraction of each step's prompts per domain (summing to 1); empty = in proportion to the mix weights.",
    )
    mix_schedule: Literal["fixed", "learnability"] = Field(
        "fixed", description="fixed: ids drawn by their mix weights; learnability: weights also scaled by 4p(1-p) of "
        "each id's recent pass rate p, within its domain's share."
    )
    learnability: LearnabilityConfig = Field(
        default_factory=lambda: LearnabilityConfig(), description="How learnability mixing weighs ids."
    )
    train_seeds: SeedRange = Field(
        default_factory=lambda: SeedRange(start=0, stop=HELD_OUT_START),
        description=f"Seeds training episodes are drawn from; below {HELD_OUT_START}, where the held-out seeds start.",
    )
    eval_seeds: SeedRange = Field(
        default_factory=lambda: SeedRange(start=HELD_OUT_START, stop=HELD_OUT_START + 1000),
        description=f"Held-out seeds for evaluation: from {HELD_OUT_START} on, where envs draw their held-out tasks.",
    )

    @model_validator(mode="after")
    def _check(self) -> EnvsConfig:
        problems: list[tuple[Loc, str, Any]] = []
        # Envs split their task spaces at HELD_OUT_START, so seeds on the wrong side of it would train on
        # held-out tasks or evaluate on train ones even when the two ranges do not overlap (and with both
        # on their side, they cannot overlap).
        if self.train_seeds.stop > HELD_OUT_START:
            problems.append((("train_seeds", "stop"), f"train seeds must stay below {HELD_OUT_START} (the held-out "
                             f"seeds' start), got stop={self.train_seeds.stop}", self.train_seeds.stop))
        if self.eval_seeds.start < HELD_OUT_START:
            problems.append((("eval_seeds", "start"), f"eval seeds must start at or above {HELD_OUT_START} (below it "
                             f"are train tasks), got start={self.eval_seeds.start}", self.eval_seeds.start))
        # A glob that selects nothing would fail only when the first task is drawn, without file or line.
        for i, entry in enumerate(self.mix):
            if not env_registry.env_ids(entry.glob):
                problems.append((("mix", i, "glob"), env_registry.no_match_message(entry.glob), entry.glob))
        domain_globs = [entry.glob.split("/", 1)[0] for entry in self.mix]
        shares_ok = True
        for domain, share in self.domain_shares.items():
            if not (share > 0 and math.isfinite(share)):
                shares_ok = False
                problems.append((("domain_shares", domain), f"share must be a positive number, got {share!r}", share))
            elif not any(fnmatchcase(domain, pattern) for pattern in domain_globs):
                problems.append((("domain_shares", domain), f"no glob in envs.mix selects domain {domain!r}", share))
        total = sum(self.domain_shares.values())
        if self.domain_shares and shares_ok and abs(total - 1.0) > 1e-6:
            problems.append((("domain_shares",), f"shares must sum to 1, got {total:g}", self.domain_shares))
        raise_at("EnvsConfig", problems)
        return self
