"""Shaping rewards: format validity, tool-error and overlong penalties, and thinking efficiency per tier.

Penalties return values in [-1, 0] and are meant to get a positive weight in a recipe, so that every term's
sign reads off its name. Each reward abstains (None) when the episode lacks what it measures.
"""
from __future__ import annotations

from typing import Any

from jointrl.envs.base import TIERS
from jointrl.envs.episode import Episode
from jointrl.rewards.correctness import unit_signal
from jointrl.rewards.registry import register

# Signals by which envs report that the final answer parses in the form the task asks for, first found wins.
ANSWER_FORMAT_SIGNALS = ("format_ok", "answer_parsed")


def _error_rate(episode: Episode) -> float | None:
    """Failed tool calls over calls made (0 when none were made); None when the env did not count them."""
    if "tool_calls" not in episode.signals or "tool_errors" not in episode.signals:
        return None
    errors, calls = float(episode.signals["tool_errors"]), float(episode.signals["tool_calls"])
    # An error can be counted without a dispatched call (a result flagged as failed after the fact), so the
    # rate is taken over the larger count to stay within [0, 1].
    return errors / max(calls, errors) if errors > 0 else 0.0


def _in_tiers(episode: Episode, tiers: list[str] | None) -> bool:
    return tiers is None or episode.tier in tiers


def _check_tiers(params: dict[str, Any]) -> list[str]:
    tiers = params["tiers"]
    if tiers is None:
        return []
    unknown = [t for t in tiers if t not in TIERS]
    if unknown or not tiers:
        return [f"tiers must be a non-empty list drawn from {list(TIERS)}, got {list(tiers)}"]
    return []


def _check_overlong(params: dict[str, Any]) -> list[str]:
    max_tokens, window = params["max_tokens"], params["window"]
    if max_tokens <= 0 or not 0 < window <= max_tokens:
        return [f"needs 0 < window <= max_tokens, got window={window}, max_tokens={max_tokens}"]
    return []


def _check_within(params: dict[str, Any]) -> list[str]:
    problems = _check_tiers(params)
    if not 0.0 < params["fraction"] <= 1.0:
        problems.append(f"fraction must be in (0, 1], got {params['fraction']}")
    return problems


@register("format")
def format_validity(episode: Episode) -> float | None:
    """Half for a parseable final answer (`format_ok`/`answer_parsed`, else non-blank), half for valid tool calls.

    >>> ep = Episode("terminal/grep-v1:easy", "terminal", "grep", "easy", seed=0, tier="low", final_answer="42",
    ...              signals={"tool_calls": 4.0, "tool_errors": 1.0})
    >>> format_validity(ep)  # 0.5 * 1 + 0.5 * (1 - 1/4)
    0.875
    """
    rate = _error_rate(episode)
    if rate is None:
        return None
    reported = [unit_signal(episode, key) for key in ANSWER_FORMAT_SIGNALS if key in episode.signals]
    if reported:
        answer = reported[0]
    else:
        answer = 1.0 if episode.final_answer and episode.final_answer.strip() else 0.0
    return 0.5 * answer + 0.5 * (1.0 - rate)


@register()
def tool_error_penalty(episode: Episode) -> float | None:
    """Minus the fraction of tool calls that failed (unknown tool, bad JSON, schema violation, tool error).

    >>> ep = Episode("swe/fix-v1:easy", "swe", "fix", "easy", seed=0, tier="high",
    ...              signals={"tool_calls": 8.0, "tool_errors": 2.0})
    >>> tool_error_penalty(ep)
    -0.25
    """
    rate = _error_rate(episode)
    if rate is None:
        return None
    return -rate if rate > 0 else 0.0


@register(check=_check_overlong)
def overlong_penalty(episode: Episode, max_tokens: int, window: int) -> float | None:
    """DAPO's soft overlong penalty: 0 up to max_tokens - window, then linear to -1 at max_tokens; -1 if truncated.

    >>> ep = Episode("reasoning/sum-v1:easy", "reasoning", "sum", "easy", seed=0, tier="low",
    ...              think_tokens=600, answer_tokens=300)
    >>> overlong_penalty(ep, max_tokens=1000, window=200)  # (800 - 900) / 200
    -0.5
    """
    if episode.truncated:
        return -1.0
    length = episode.think_tokens + episode.answer_tokens
    return max(-1.0, min(0.0, (max_tokens - window - length) / window))


@register(check=_check_tiers)
def think_budget_penalty(episode: Episode, tiers: list[str] | None = None) -> float | None:
    """Minus the thinking overshoot beyond the tier's budget, as a fraction of the budget, floored at -1.

    >>> ep = Episode("cad/bracket-v1:easy", "cad", "bracket", "easy", seed=0, tier="low",
    ...              think_tokens=150, think_budget=100)
    >>> think_budget_penalty(ep), think_budget_penalty(ep, tiers=["high", "max"]) is None
    (-0.5, True)
    """
    if not _in_tiers(episode, tiers) or not episode.think_budget:
        return None
    budget = episode.think_budget
    return max(-1.0, min(0.0, (budget - episode.think_tokens) / budget))


@register(check=_check_within)
def correct_within_budget(episode: Episode, fraction: float = 1.0, tiers: list[str] | None = None) -> float | None:
    """1.0 for a solved task that thought at most `fraction` of the tier's budget, else 0.0.

    >>> ep = Episode("reasoning/sum-v1:easy", "reasoning", "sum", "easy", seed=0, tier="high", signals={"success": 1.0},
    ...              think_tokens=300, think_budget=400)
    >>> correct_within_budget(ep), correct_within_budget(ep, fraction=0.5)
    (1.0, 0.0)
    """
    success = unit_signal(episode, "success")
    if success is None or not _in_tiers(episode, tiers) or not episode.think_budget:
        return None
    # Generation forces </think> at the budget, so with fraction 1 this rewards only solving within it;
    # fraction < 1 is what asks a tier for headroom.
    return 1.0 if success >= 1.0 and episode.think_tokens <= fraction * episode.think_budget else 0.0
