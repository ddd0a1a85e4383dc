"""Real-code swe families: bugs mined from pinned open-source packages (SWE-smith style), one family per package.

`jointrl envs prepare swe` fetches and unpacks the pinned sdists (sources.py, prepare.py); mining
(tracing.py, cases.py, mine.py) wrote the committed manifest (manifest.py, bugs.json); episodes build a task
(task.py, issue.py) and are graded on the host (grade.py) by the environment in env.py.

`register()` only adds specs, from the pinned list, so ids are listed before anything is prepared.
"""
from __future__ import annotations

DIFFICULTIES = {
    # difficulty: (what changes, default thinking tier, turn budget)
    "easy": ("the issue names the failing test, its output and the function", "low", 20),
    "hard": ("the issue describes only a misbehaving call of the package", "high", 30),
    "long": ("three bugs in three functions, one symptom reported for each", "max", 40),
}


def register() -> None:
    """Register swe/<package>-v0:<difficulty> for every pinned package and difficulty."""
    from jointrl.envs.base import EnvSpec
    from jointrl.envs.registry import register as add
    from jointrl.envs.swe.realcode.sources import SOURCES

    for pin in SOURCES:
        for difficulty, (what, tier, turns) in DIFFICULTIES.items():
            if (difficulty == "long" and not pin.long) or (difficulty == "hard" and not pin.hard):
                continue
            add(EnvSpec(id=f"swe/{pin.family}-v0:{difficulty}", entry_point="jointrl.envs.swe.realcode.env:RealCodeEnv",
                        kwargs={"family": pin.family}, default_tier=tier, max_turns=turns,
                        description=f"Fix a bug mined from {pin.name} {pin.version} ({pin.topic}): {what}."))
