"""The office domain: questions over a fictional organisation's generated xlsx, docx and pdf reports.

`register()` only adds specs (ids `office/<family>-v0:<difficulty>`); the env and its document
libraries load when an env is made.
"""
from __future__ import annotations

# Family -> what it asks; the env maps each to its question builder.
FAMILIES = {
    "lookup": "look up one figure",
    "yoy-growth": "year-over-year change in percent",
    "aggregate": "sum or average over a range",
    "argmax": "the region with the largest value",
    "ranking": "the region at a position in a ranking",
    "rate-join": "a per-unit rate times a quantity from another place",
    "currency": "currency conversion with a rate from the KPI review",
    "margin": "a margin as a percentage of revenue",
    "threshold-count": "how many region-product-year figures meet a threshold",
    "budget-variance": "actual minus budget or plan",
}
# The long tier's families, registered at difficulty "long" only.
LONG_FAMILIES = {
    "segment-overhead": "a segment's overhead gathered page by page from 30-page documents, minding units and notes",
}
LONG = ("30+ page documents, one page per region and topic, units and notes to respect, 10+ reads", "high", 40)
# Difficulty -> (what it takes, default thinking tier, turn limit).
DIFFICULTIES = {
    "easy": ("one file, one lookup", "low", 12),
    "medium": ("two files or a two-step computation", "low", 16),
    "hard": ("all three formats, distractor tables and years, several steps", "high", 24),
}


def register() -> None:
    """Register every office family at every difficulty, and the long families at difficulty long."""
    from jointrl.envs.base import EnvSpec
    from jointrl.envs.registry import register as add

    for family, asks in FAMILIES.items():
        for difficulty, (takes, tier, turns) in DIFFICULTIES.items():
            add(EnvSpec(
                id=f"office/{family}-v0:{difficulty}",
                entry_point="jointrl.envs.office.env:OfficeEnv",
                kwargs={"family": family},
                default_tier=tier,
                max_turns=turns,
                description=f"office reports (xlsx, docx, pdf): {asks}; {takes}",
            ))
    takes, tier, turns = LONG
    for family, asks in LONG_FAMILIES.items():
        add(EnvSpec(
            id=f"office/{family}-v0:long",
            entry_point="jointrl.envs.office.env:OfficeEnv",
            kwargs={"family": family},
            default_tier=tier,
            max_turns=turns,
            description=f"office reports (xlsx, docx, pdf): {asks}; {takes}",
        ))
