"""Guard-rails on the reward: alarms over each step's reward metrics, reported as metrics and warnings.

`RewardAlarms.update(metrics)` is fed one step's metrics (named as in `jointrl.rewards.metrics`) and checks:
  dominance      a term's share of a domain's reward stays >= `dominance_share` for `dominance_patience`
                 steps, unless it is one of `dominance_exempt` (a task's own correctness measure may dominate;
                 a shaping term that does is being farmed, or drowns the task signal)
  think_drift    a tier's mean think tokens rose by > `think_rise` (relative) from one window of
                 `drift_window` steps to the next while its mean raw reward rose by < `reward_gain`
  verifier_gap   from one window of `gap_window` steps to the next, a domain's claimed signal (e.g. success)
                 rose, and by >= `gap_margin` more than the verifier's independent check (e.g. verified)
  zero_variance  an env's reward std stays <= `zero_variance_tol` for `zero_variance_patience` steps in which
                 it was scored twice or more: all its samples agree, so its groups teach nothing
  tampering      a domain's share of episodes with a tamper signal (`hack/<domain>/any`: edits to the test
                 runner or report, atexit hooks, several answers at once) stays >= `tamper_share` for
                 `tamper_patience` steps: the policy is learning to forge the reward, not the skill
Steps in which a subject has no metric neither advance nor reset its streak or window. Every alarm firing
this step is counted in `alarm/<kind>`; a warning (RewardAlarm) is issued when a subject starts firing, and
a kind listed in `stop_on` raises RewardAlarmError to stop the run. The state is saved with the checkpoint.
"""
from __future__ import annotations

import warnings
from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

KINDS = ("dominance", "think_drift", "verifier_gap", "zero_variance", "tampering")
CORRECTNESS_TERMS = ("correctness", "resolved", "iou", "answer_match", "state_check", "partial_credit")


class RewardAlarm(UserWarning):
    """The warning category of a reward alarm."""


class RewardAlarmError(RuntimeError):
    """Raised when an alarm whose kind is in AlarmConfig.stop_on fires."""


class AlarmConfig(BaseModel):
    """Thresholds and windows of the alarms (see the module docstring for each rule); a recipe's `rewards.alarms`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dominance_share: float = Field(0.9, description="A non-correctness term whose share of |total| exceeds this ...")
    dominance_patience: int = Field(10, description="... for this many consecutive steps fires the dominance alarm.")
    dominance_exempt: tuple[str, ...] = Field(CORRECTNESS_TERMS, description="Terms allowed to dominate their domain.")
    drift_window: int = Field(10, description="Steps compared for think-length drift.")
    think_rise: float = Field(0.25, description="Relative rise of think tokens over the window that counts as drift ...")
    reward_gain: float = Field(0.01, description="... unless the mean reward gained at least this much.")
    verifier_pairs: tuple[tuple[str, str], ...] = Field(
        (("success", "verified"),), description="(claimed signal, independent check) pairs the verifier-gap alarm compares."
    )
    gap_window: int = Field(10, description="Steps over which a reward signal and its verifier check are compared.")
    gap_margin: float = Field(0.05, description="Rise of a signal beyond its verifier's rise that fires the alarm.")
    zero_variance_patience: int = Field(20, description="Steps of zero reward variance in an env before it alarms.")
    zero_variance_tol: float = Field(1e-8, description="Reward std at or below which an env counts as zero-variance.")
    tamper_share: float = Field(0.05, description="Share of a domain's episodes with a tamper signal that counts ...")
    tamper_patience: int = Field(3, description="... for this many consecutive steps fires the tampering alarm.")
    stop_on: tuple[str, ...] = Field((), description="Alarm kinds that stop the run instead of only warning.")

    # Field validators (not one model check) so a recipe error points at the offending key's own line.
    @field_validator("dominance_patience", "drift_window", "gap_window", "zero_variance_patience", "tamper_patience")
    @classmethod
    def _at_least_one(cls, value: int, info: ValidationInfo) -> int:
        if value < 1:
            raise ValueError(f"alarm setting {info.field_name} must be >= 1, got {value}")
        return value

    @field_validator("dominance_share", "tamper_share")
    @classmethod
    def _share(cls, value: float, info: ValidationInfo) -> float:
        if not 0 < value <= 1:
            raise ValueError(f"alarm setting {info.field_name} must be in (0, 1], got {value}")
        return value

    @field_validator("think_rise", "gap_margin", "zero_variance_tol")
    @classmethod
    def _non_negative(cls, value: float, info: ValidationInfo) -> float:
        if value < 0:
            raise ValueError(f"alarm setting {info.field_name} must be >= 0, got {value}")
        return value

    @field_validator("stop_on")
    @classmethod
    def _known_kinds(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [kind for kind in value if kind not in KINDS]
        if unknown:
            raise ValueError(f"alarm setting stop_on names unknown kinds {unknown}; known: {', '.join(KINDS)}")
        return value


@dataclass(frozen=True)
class Alarm:
    """One alarm firing: its kind, what it concerns (a domain, tier or env), and a sentence for people."""

    kind: str
    subject: str
    message: str


@dataclass
class AlarmReport:
    """What one step's check found."""

    alarms: list[Alarm]  # every alarm firing at this step
    metrics: dict[str, float]  # alarm/<kind>: how many subjects fire, 0.0 when none


class RewardAlarms:
    """Stateful checks over the stream of per-step reward metrics."""

    def __init__(self, config: AlarmConfig | None = None):
        self.config = config or AlarmConfig()
        self.streaks: dict[str, dict[str, int]] = defaultdict(dict)  # kind -> subject -> consecutive steps
        self.series: dict[str, list[list[float]]] = defaultdict(list)  # subject -> last two windows of value pairs
        self.active: set[tuple[str, str]] = set()  # (kind, subject) firing at the previous step

    def update(self, metrics: Mapping[str, float]) -> AlarmReport:
        """Check one step's metrics; warn on alarms that start firing, raise for kinds in stop_on."""
        alarms = self._dominance(metrics) + self._think_drift(metrics) + self._verifier_gap(metrics)
        alarms += self._zero_variance(metrics) + self._tampering(metrics)
        firing = {(a.kind, a.subject) for a in alarms}
        for alarm in alarms:
            if (alarm.kind, alarm.subject) not in self.active:
                warnings.warn(f"reward alarm {alarm.kind}: {alarm.message}", RewardAlarm, stacklevel=2)
        self.active = firing
        counts = {f"alarm/{kind}": float(sum(a.kind == kind for a in alarms)) for kind in KINDS}
        stopping = [a.message for a in alarms if a.kind in self.config.stop_on]
        if stopping:
            raise RewardAlarmError("; ".join(stopping))
        return AlarmReport(alarms, counts)

    def _streak(self, kind: str, subject: str, bad: bool, patience: int) -> bool:
        """Advance (or reset) a subject's streak; whether it has reached `patience`."""
        streak = self.streaks[kind].get(subject, 0) + 1 if bad else 0
        self.streaks[kind][subject] = streak
        return streak >= patience

    def _windows(self, subject: str, point: tuple[float, float], window: int) -> tuple[tuple, tuple] | None:
        """Append a step's pair of values to a subject's series; once two windows are full, their means."""
        points = self.series[subject]
        points.append(list(point))
        del points[: -2 * window]
        if len(points) < 2 * window:
            return None

        def means(chunk: list[list[float]]) -> tuple[float, float]:
            return sum(p[0] for p in chunk) / window, sum(p[1] for p in chunk) / window

        return means(points[:window]), means(points[window:])

    def _dominance(self, metrics: Mapping[str, float]) -> list[Alarm]:
        cfg, alarms = self.config, []
        for key, share in metrics.items():
            parts = key.split("/")
            if len(parts) != 5 or parts[0] != "reward" or parts[2] != "component" or parts[4] != "share":
                continue
            domain, term = parts[1], parts[3]
            if term in cfg.dominance_exempt:
                continue
            if self._streak("dominance", f"{domain}/{term}", share >= cfg.dominance_share, cfg.dominance_patience):
                message = f"{term!r} is {share:.0%} of the {domain} reward for {cfg.dominance_patience}+ steps"
                alarms.append(Alarm("dominance", f"{domain}/{term}", message))
        return alarms

    def _think_drift(self, metrics: Mapping[str, float]) -> list[Alarm]:
        cfg, alarms = self.config, []
        for key in metrics:
            parts = key.split("/")
            if len(parts) != 3 or parts[0] != "tier" or parts[2] != "think_tokens":
                continue
            tier, reward_key = parts[1], f"tier/{parts[1]}/reward_mean"
            if reward_key not in metrics:
                continue
            windows = self._windows(f"think_drift/{tier}", (metrics[key], metrics[reward_key]), cfg.drift_window)
            if windows is None:
                continue
            (think_before, reward_before), (think_now, reward_now) = windows
            if think_now > think_before * (1 + cfg.think_rise) and reward_now - reward_before < cfg.reward_gain:
                message = (
                    f"tier {tier}: think tokens {think_before:.0f} -> {think_now:.0f} over {cfg.drift_window}-step "
                    f"windows while reward moved {reward_now - reward_before:+.3f}"
                )
                alarms.append(Alarm("think_drift", tier, message))
        return alarms

    def _verifier_gap(self, metrics: Mapping[str, float]) -> list[Alarm]:
        cfg, alarms = self.config, []
        for claimed, check in cfg.verifier_pairs:
            for key in metrics:
                parts = key.split("/")
                if len(parts) != 3 or parts[0] != "signal" or parts[2] != claimed:
                    continue
                domain = parts[1]
                check_key = f"signal/{domain}/{check}"
                if check_key not in metrics:
                    continue
                subject = f"{domain}/{claimed}/{check}"
                windows = self._windows(f"verifier_gap/{subject}", (metrics[key], metrics[check_key]), cfg.gap_window)
                if windows is None:
                    continue
                (claimed_before, check_before), (claimed_now, check_now) = windows
                rise, check_rise = claimed_now - claimed_before, check_now - check_before
                if rise > 0 and rise - check_rise >= cfg.gap_margin:
                    message = f"{domain}: {claimed} rose {rise:+.3f} but the independent {check} only {check_rise:+.3f}"
                    alarms.append(Alarm("verifier_gap", subject, message))
        return alarms

    def _zero_variance(self, metrics: Mapping[str, float]) -> list[Alarm]:
        cfg, alarms = self.config, []
        for key, std in metrics.items():
            if not (key.startswith("env/") and key.endswith("/reward_std")):
                continue
            env_id = key[len("env/") : -len("/reward_std")]
            if self._streak("zero_variance", env_id, std <= cfg.zero_variance_tol, cfg.zero_variance_patience):
                message = f"{env_id}: reward variance zero for {self.streaks['zero_variance'][env_id]} scored steps"
                alarms.append(Alarm("zero_variance", env_id, message))
        return alarms

    def _tampering(self, metrics: Mapping[str, float]) -> list[Alarm]:
        cfg, alarms = self.config, []
        for key, share in metrics.items():
            parts = key.split("/")
            if len(parts) != 3 or parts[0] != "hack" or parts[2] != "any":
                continue
            domain = parts[1]
            if self._streak("tampering", domain, share >= cfg.tamper_share, cfg.tamper_patience):
                message = (f"{domain}: {share:.0%} of episodes tampered with the verifier or answered several ways "
                           f"for {self.streaks['tampering'][domain]} steps")
                alarms.append(Alarm("tampering", domain, message))
        return alarms

    def state_dict(self) -> dict:
        """Plain, JSON-ready state: streaks, metric windows, and which alarms were firing."""
        return {
            "streaks": {kind: dict(s) for kind, s in self.streaks.items()},
            "series": {name: [list(p) for p in points] for name, points in self.series.items()},
            "active": sorted([kind, subject] for kind, subject in self.active),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore what state_dict saved."""
        self.streaks = defaultdict(dict, {kind: dict(s) for kind, s in state["streaks"].items()})
        self.series = defaultdict(list, {name: [list(p) for p in points] for name, points in state["series"].items()})
        self.active = {(kind, subject) for kind, subject in state["active"]}

