"""The browse domain: multi-hop questions over a generated offline web, answered with search, open and find.

`register()` only adds specs (no imports of the generator, pages or bm25s), so listing envs stays cheap.
"""
from __future__ import annotations

ENTRY_POINT = "jointrl.envs.browse.env:BrowseEnv"
DIFFICULTIES = ("easy", "medium", "hard")
# Family → what its question asks; with LONG_FAMILIES, kept in step with questions.FAMILIES (a test checks they agree).
FAMILIES = {
    "lookup": "a fact of an entity named directly or through a chain of links",
    "chain": "the entity at the end of a chain of links ('who founded the company that makes X')",
    "compare": "which of two entities is older, larger or longer",
    "difference": "the difference between two years or figures on two pages",
    "age": "years from a person's birth (or their birthplace's founding) to what they founded, made or recorded",
    "count": "how many entries of a list page there are, or meet a threshold",
    "ordinal": "which entry of a list came first, second or most recently",
    "aggregate": "the total of a figure over every entry of a list",
    "intersection": "the one entity that is on a list and meets a threshold",
}
# Families of the long tier only: many hops fanning out from a list, among near-duplicate and outdated pages.
LONG_FAMILIES = {
    "trail": "the combined population of the birthplaces of the people behind every entry of a list",
}
# Harder questions need longer reading, so they default to a larger thinking budget.
TIERS = {"easy": "low", "medium": "high", "hard": "high", "long": "high"}
MAX_TURNS = {"easy": 16, "medium": 24, "hard": 40, "long": 64}


def register() -> None:
    """Register browse/<family>-v0:<difficulty> for every family and difficulty, and the long tier's families."""
    from jointrl.envs.registry import register as add

    tiers = [(family, asks, difficulty) for family, asks in FAMILIES.items() for difficulty in DIFFICULTIES]
    tiers += [(family, asks, "long") for family, asks in LONG_FAMILIES.items()]
    for family, asks, difficulty in tiers:
        add(
            id=f"browse/{family}-v0:{difficulty}",
            entry_point=ENTRY_POINT,
            kwargs={"family": family},
            default_tier=TIERS[difficulty],
            max_turns=MAX_TURNS[difficulty],
            description=f"Browse a generated web to find {asks}.",
        )
