"""SWE domain: fix bugs injected into generated Python packages, graded by their restored tests.

`register()` only adds specs (no imports of the environment code): one id per family and difficulty.
"""
from __future__ import annotations

FAMILIES = {
    "strings": "string utilities (slugs, identifier case, edit distance, wrapping, word counts)",
    "intervals": "interval helpers (half-open intervals, merging, range arithmetic, scheduling, buckets)",
    "ledger": "bookkeeping (money in cents, a ledger, stock levels, pricing, reports)",
    "matrix": "matrix helpers (shapes, products, exact elimination, vectors, grids)",
    "durations": "dates and durations (parsing, calendar arithmetic, ISO dates, working days, clocks)",
    "tokenizer": "a tokenizer (expression lexer, words and sentences, vocabulary, RPN, byte-pair merges)",
    "caches": "containers (LRU cache, binary heap, stable priority queue, ring buffer, TTL cache)",
    "units": "unit converters (lengths, temperatures, data sizes, masses and recipes, speeds and paces)",
    "reports": "a CSV report builder (parsing, column types, grouping, table rendering, pivots)",
    "statemachine": "a state machine toolkit (event machine, automata, signal timing, wildcards, specs)",
}
DIFFICULTIES = {
    # difficulty: (what changes, default thinking tier, turn budget)
    "easy": ("one bug in a 2-module package; the issue names the file, function and failing test", "low", 20),
    "medium": ("one bug in a 3-module package; a vaguer issue and the failing tests withheld", "high", 30),
    "hard": ("two bugs in two modules of a 5-module package; vague issue, failing tests withheld", "max", 40),
    "long": ("two bugs in two (where possible interdependent) modules of a 5-module package plus a missing function "
             "specified by failing tests; vague issue, the bugs' failing tests withheld", "max", 60),
}


def register() -> None:
    """Register swe/<family>-v0:<difficulty> for every family and difficulty."""
    from jointrl.envs.base import EnvSpec
    from jointrl.envs.registry import register as add

    for family, about in FAMILIES.items():
        for difficulty, (what, tier, turns) in DIFFICULTIES.items():
            add(EnvSpec(id=f"swe/{family}-v0:{difficulty}", entry_point="jointrl.envs.swe.env:SweEnv",
                        kwargs={"family": family}, default_tier=tier, max_turns=turns,
                        description=f"Fix {about}: {what}."))
    # The real-code families (bugs mined from pinned open-source packages) live in realcode/.
    from jointrl.envs.swe import realcode

    realcode.register()
