"""The rollout section: workers, groups, thinking tiers, sampling, limits and weight transport."""
from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, model_validator

from jointrl.rl.config.section import Loc, Section, fail_at, raise_at


Tier = Literal["low", "high", "max"]


class TierBudgets(Section):
    """Thinking budget in tokens of each tier; `</think>` is forced once an episode's budget is spent."""

    low: int = Field(512, gt=0, description="Thinking tokens allowed in the low tier.")
    high: int = Field(4096, gt=0, description="Thinking tokens allowed in the high tier.")
    max: int = Field(16384, gt=0, description="Thinking tokens allowed in the max tier.")

    @model_validator(mode="after")
    def _ordered(self) -> TierBudgets:
        problems: list[tuple[Loc, str, Any]] = []
        if self.high < self.low:
            problems.append((("high",), f"high={self.high} is below low={self.low}", self.high))
        if self.max < self.high:
            problems.append((("max",), f"max={self.max} is below high={self.high}", self.max))
        raise_at("TierBudgets", problems)
        return self


class TierSelection(Section):
    """How each task's thinking tier is chosen."""

    mode: Literal["fixed", "ratios", "auto"] = Field(
        "fixed",
        description="fixed = by env glob (else the env's default tier); ratios = sampled by `ratios`; "
        "auto = by a complexity rule of the task.",
    )
    fixed: dict[str, Tier] = Field(
        default_factory=dict, description="Env-id glob -> tier, used in fixed mode; the first matching glob wins."
    )
    ratios: dict[Tier, float] = Field(
        default_factory=dict, description="Tier -> probability (summing to 1), used in ratios mode."
    )

    @model_validator(mode="after")
    def _check(self) -> TierSelection:
        problems: list[tuple[Loc, str, Any]] = []
        for tier, p in self.ratios.items():
            if not (p >= 0 and math.isfinite(p)):
                problems.append((("ratios", tier), f"probability must be >= 0, got {p!r}", p))
        if self.mode == "ratios" and not problems:
            total = sum(self.ratios.values())
            if abs(total - 1.0) > 1e-6:
                message = f"ratios mode needs tier probabilities summing to 1, got {total:g}"
                problems.append((("ratios",), message, self.ratios))
        raise_at("TierSelection", problems)
        return self


class RolloutConfig(Section):
    """Episode generation: workers, group size, thinking tiers, sampling and limits."""

    workers: int = Field(1, ge=1, description="Rollout worker actors, each with a policy copy and an env pool.")
    group_size: int = Field(8, ge=1, description="Samples per prompt (G); group-based advantages need G >= 2.")
    tiers: TierBudgets = Field(default_factory=TierBudgets, description="Thinking budget per tier.")
    tier_selection: TierSelection = Field(default_factory=TierSelection, description="How each task's tier is chosen.")
    max_turns: int = Field(8, ge=1, description="Assistant turns per episode before it is cut off.")
    max_new_tokens_per_turn: int = Field(1024, gt=0, description="Generated tokens allowed in one assistant turn.")
    max_new_tokens_per_episode: int = Field(4096, gt=0, description="Generated tokens allowed over a whole episode.")
    temperature: float = Field(1.0, ge=0, allow_inf_nan=False, description="Sampling temperature (0 = greedy).")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling mass (1 = off).")
    top_k: int = Field(0, ge=0, description="Sample among the k most likely tokens (0 = off).")
    max_staleness: int = Field(
        0, ge=0, description="Policy versions rollouts may lag the learner by (0 = synchronous; k > 0 = async)."
    )
    mxfp4_experts: bool = Field(False, description="Quantise routed experts to MXFP4 in the rollout policy copies.")
    partial: bool = Field(
        False, description="Async mode only (max_staleness >= 1): a batch closes once prompts_per_step whole prompt "
        "groups have finished; groups still running carry over to a later batch and take newer weights mid-episode, "
        "each token recording its version (never older than the trained step - max_staleness: a group about to "
        "expire makes its batch wait). A group carries for at most max_staleness steps, so this pays off from 2."
    )
    partial_spare_prompts: int = Field(
        1, ge=1, description="partial: prompt groups kept in flight beyond prompts_per_step, i.e. how many slow "
        "groups a batch can close without."
    )
    episode_timeout_s: float = Field(600.0, gt=0, description="Wall-clock seconds before an episode is marked failed.")
    max_rows: int = Field(32, ge=1, description="Sequences one worker's engine decodes at once (its cache rows).")
    weight_transport: Literal["object_store", "collective"] = Field(
        "object_store", description="How the learner ranks' weights reach the workers: object_store = each bucket "
        "through Ray's object store; collective = torch.distributed broadcasts from each rank to every worker (gloo, "
        "NCCL when every member has CUDA) over groups the driver's TCP store sets up once per run."
    )

    @model_validator(mode="after")
    def _check(self) -> RolloutConfig:
        if self.max_new_tokens_per_turn > self.max_new_tokens_per_episode:
            fail_at(
                "RolloutConfig",
                ("max_new_tokens_per_turn",),
                f"max_new_tokens_per_turn={self.max_new_tokens_per_turn} exceeds "
                f"max_new_tokens_per_episode={self.max_new_tokens_per_episode}",
                self.max_new_tokens_per_turn,
            )
        if self.partial and self.max_staleness < 1:
            fail_at(
                "RolloutConfig", ("partial",),
                "partial rollouts carry episodes into later steps, which needs async mode: set max_staleness >= 1",
                self.partial,
            )
        return self
