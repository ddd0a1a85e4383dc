"""The table of SWE families by name."""
from __future__ import annotations

from jointrl.envs.swe.family import Family
from jointrl.envs.swe.themes import (caches, durations, intervals, ledger, matrix, reports, statemachine, strings,
                                     tokenizer, units)

FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (strings.FAMILY, intervals.FAMILY, ledger.FAMILY, matrix.FAMILY, durations.FAMILY,
                   tokenizer.FAMILY, caches.FAMILY, units.FAMILY, reports.FAMILY, statemachine.FAMILY)
}
