"""The text-level record of one played episode: what rewards and metrics see (no tensors)."""
from __future__ import annotations

from dataclasses import dataclass, field

# A signal named hack_<name> says the episode did something only a reward hacker does (0 or 1): the
# reward mixer logs it as hack/<domain>/<name> and the tampering alarm watches it.
HACK_PREFIX = "hack_"


@dataclass
class Episode:
    """One episode of one environment, from reset to final answer (or truncation / failure)."""

    # Which task.
    env_id: str  # "domain/family-vN:difficulty"
    domain: str
    family: str
    difficulty: str
    seed: int
    tier: str  # thinking tier: "low" | "high" | "max"
    group_id: int = 0  # episodes of one prompt share a group (GRPO compares within it)

    # What happened.
    messages: list[dict] = field(default_factory=list)  # OpenAI-format conversation, initial prompt included
    tools: list[dict] = field(default_factory=list)  # JSON-schema function specs offered
    signals: dict[str, float] = field(default_factory=dict)  # the env's verifiable facts (success, tool_errors, ...)
    final_answer: str | None = None  # content of the last assistant message when it made no tool call

    # Budgets and outcome.
    think_tokens: int = 0  # reasoning tokens generated over all turns
    answer_tokens: int = 0  # non-reasoning tokens generated over all turns
    think_budget: int | None = None  # the tier's thinking budget, when one applied
    turns: int = 0  # assistant turns taken
    truncated: bool = False  # stopped by max turns / max tokens before a final answer
    failed: bool = False  # the env or worker failed; `error` says why and rewards abstain
    error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase: generate, tools, verify
