"""The rewards section: weighted reward terms per domain or env glob, and their normalisation."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

import jointrl.rewards.registry as reward_registry
from jointrl.rewards.alarms import AlarmConfig
from jointrl.rl.config.section import Loc, Section, fail_at, raise_at


class RewardTerm(Section):
    """One weighted reward function applied to a domain's episodes."""

    name: str = Field(..., min_length=1, description="Registered reward function name (see `jointrl.rewards.names()`).")
    weight: float = Field(
        1.0, allow_inf_nan=False, description="Multiplier of this term in the scalar reward (negative = penalty)."
    )
    params: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments passed to the reward function.")

    @model_validator(mode="after")
    def _registered(self) -> RewardTerm:
        if self.name not in reward_registry.names():
            fail_at("RewardTerm", ("name",), reward_registry.unknown_message(self.name), self.name)
        problems = [
            (("params", key) if key is not None else ("params",), message, self.params.get(key, self.params))
            for key, message in reward_registry.param_problems(self.name, self.params)
        ]
        raise_at("RewardTerm", problems)
        return self


class RewardsConfig(Section):
    """How episodes are scored: weighted reward terms per domain, and how scores are normalised into one batch."""

    domains: dict[str, list[RewardTerm]] = Field(
        default_factory=dict, description="Reward terms per domain name, e.g. {swe: [{name: resolved, weight: 1.0}]}."
    )
    envs: dict[str, list[RewardTerm]] = Field(
        default_factory=dict,
        description="Reward terms per env-id glob, e.g. {'cad/*:hard': [...]}; the first glob matching an "
        "episode's env id takes precedence over its domain's terms.",
    )
    default: list[RewardTerm] = Field(
        default_factory=lambda: [RewardTerm(name="correctness")],
        min_length=1,
        description="Reward terms for episodes that neither `envs` nor `domains` covers.",
    )
    normalization: Literal["none", "group", "domain", "batch"] = Field(
        "group",
        description="none = raw scores; group = per prompt group (this is GRPO's advantage: the algorithm must not "
        "standardise again); domain = running mean/std per domain and tier; batch = over the whole batch.",
    )
    decay: float = Field(
        0.9,
        ge=0,
        le=1,
        description="domain normalisation: weight the running mean/std keep on their history each step "
        "(1 = all history alike, 0 = this step only).",
    )
    by_tier: bool = Field(True, description="domain normalisation: separate running mean/std per tier within a domain.")
    alarms: AlarmConfig = Field(default_factory=AlarmConfig, description="Reward-hacking and stagnation alarms.")

    @staticmethod
    def _list_problems(where: Loc, terms: list[RewardTerm]) -> list[tuple[Loc, str, Any]]:
        """An empty list, or a reward listed twice (its components would share one metric name), at their keys."""
        if not terms:
            return [(where, "a reward list needs at least one term", [])]
        names = [term.name for term in terms]
        return [
            ((*where, i, "name"), f"reward {name!r} is listed more than once in this list", name)
            for i, name in enumerate(names)
            if name in names[:i]
        ]

    @field_validator("domains", "envs")
    @classmethod
    def _lists(cls, value: dict[str, list[RewardTerm]]) -> dict[str, list[RewardTerm]]:
        raise_at("RewardsConfig", [p for key, terms in value.items() for p in cls._list_problems((key,), terms)])
        return value

    @field_validator("default")
    @classmethod
    def _default_list(cls, value: list[RewardTerm]) -> list[RewardTerm]:
        raise_at("RewardsConfig", cls._list_problems((), value))
        return value
