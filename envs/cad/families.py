"""The catalogue of part families, and the one seeded entry point that turns (family, difficulty, seed) into a Part."""
from __future__ import annotations

import random

from jointrl.envs.cad import fittings, plates, profiles, turned
from jointrl.envs.cad.part import DIFFICULTIES, Part

FAMILIES = {
    "plate": plates.plate,
    "bracket": plates.bracket,
    "pocket": plates.pocket,
    "channel": profiles.channel,
    "star": profiles.star,
    "flange": turned.flange,
    "shaft": turned.shaft,
    "stack": turned.stack,
    "nut": fittings.nut,
    "elbow": fittings.elbow,
}


def make_part(family: str, difficulty: str, seed: int) -> Part:
    """The task for one seed; the same arguments always give the same part."""
    if family not in FAMILIES:
        raise ValueError(f"unknown CAD part family {family!r}; known: {', '.join(sorted(FAMILIES))}")
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"unknown difficulty {difficulty!r} for cad/{family}; expected one of {DIFFICULTIES}")
    # A string seed hashes the same in every process (unlike hash() of a tuple under PYTHONHASHSEED).
    return FAMILIES[family](random.Random(f"cad/{family}-v0:{difficulty}/{seed}"), difficulty)
