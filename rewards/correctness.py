"""Correctness rewards: whether, or how far, an episode solved its task, read from the env's verified signals.

Every one abstains (None) when the env did not report the signal it reads, and raises when a signal that
must lie in [0, 1] does not (an env bug that would silently rescale a domain).
"""
from __future__ import annotations

from typing import Any

from jointrl.envs.episode import Episode
from jointrl.rewards.registry import register


def unit_signal(episode: Episode, key: str) -> float | None:
    """The episode's signal `key`, checked to lie in [0, 1]; None when the env did not report it."""
    if key not in episode.signals:
        return None
    value = float(episode.signals[key])
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{episode.env_id}: signal {key!r} = {value} is outside [0, 1]")
    return value


def _unit_threshold(params: dict[str, Any]) -> list[str]:
    threshold = params["threshold"]
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        return [f"threshold must be in [0, 1], got {threshold}"]
    return []


@register()
def correctness(episode: Episode) -> float | None:
    """The env's `success` (1.0 = solved), which every env reports: the default reward of any domain.

    >>> ep = Episode("terminal/grep-v1:easy", "terminal", "grep", "easy", seed=0, tier="low", signals={"success": 1.0})
    >>> correctness(ep)
    1.0
    """
    return unit_signal(episode, "success")


@register()
def resolved(episode: Episode) -> float | None:
    """1.0 when the SWE verifier's fresh test run resolves the issue (`resolved`), else 0.0.

    >>> ep = Episode("swe/fix-v1:easy", "swe", "fix", "easy", seed=0, tier="high", signals={"resolved": 0.0})
    >>> resolved(ep)
    0.0
    """
    return unit_signal(episode, "resolved")


@register(check=_unit_threshold)
def iou(episode: Episode, threshold: float | None = None) -> float | None:
    """The CAD part's intersection-over-union with the target; with `threshold`, 1.0 at or above it, else 0.0.

    >>> ep = Episode("cad/bracket-v1:easy", "cad", "bracket", "easy", seed=0, tier="low", signals={"iou": 0.8})
    >>> iou(ep), iou(ep, threshold=0.75), iou(ep, threshold=0.9)
    (0.8, 1.0, 0.0)
    """
    value = unit_signal(episode, "iou")
    if value is None or threshold is None:
        return value
    return 1.0 if value >= threshold else 0.0


@register()
def answer_match(episode: Episode) -> float | None:
    """1.0 when the final answer matches the reference (`answer_correct`, e.g. browsing or reasoning), else 0.0.

    >>> ep = Episode("browse/wiki-v1:easy", "browse", "wiki", "easy", seed=0, tier="low", signals={"success": 1.0})
    >>> answer_match(ep) is None  # this env reports no answer_correct: abstain
    True
    """
    return unit_signal(episode, "answer_correct")


@register()
def state_check(episode: Episode) -> float | None:
    """1.0 when the final environment state passes the env's check (`state_ok`, e.g. terminal or office), else 0.0.

    >>> ep = Episode("office/sheet-v1:easy", "office", "sheet", "easy", seed=0, tier="low", signals={"state_ok": 1.0})
    >>> state_check(ep)
    1.0
    """
    return unit_signal(episode, "state_ok")


@register()
def partial_credit(episode: Episode, signal: str = "pass_fraction") -> float | None:
    """A named signal in [0, 1] taken as graded credit, e.g. the fraction of tests passed.

    >>> ep = Episode("swe/fix-v1:easy", "swe", "fix", "easy", seed=0, tier="high", signals={"pass_fraction": 0.75})
    >>> partial_credit(ep), partial_credit(ep, signal="iou") is None
    (0.75, True)
    """
    return unit_signal(episode, signal)
