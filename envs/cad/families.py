"""The catalogue of part families, and the one seeded entry point that turns (family, difficulty, seed) into a Part."""
from __future__ import annotations

import random

from jointrl.envs.cad import fittings, fixture, plates, profiles, turned
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


# Families that come only at the long-horizon difficulty, their features given by drawing notes.
LONG = "long"
LONG_FAMILIES = {"fixture": fixture.fixture}


def check(family: str, difficulty: str) -> None:
    """Raise a ValueError naming the problem unless (family, difficulty) is a known part family at a difficulty it has."""
    if family in LONG_FAMILIES:
        if difficulty != LONG:
            raise ValueError(f"cad/{family} comes only at difficulty {LONG!r}, got {difficulty!r}")
        return
    if family not in FAMILIES:
        raise ValueError(f"unknown CAD part family {family!r}; known: {', '.join(sorted([*FAMILIES, *LONG_FAMILIES]))}")
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"unknown difficulty {difficulty!r} for cad/{family}; expected one of {DIFFICULTIES}")


def make_part(family: str, difficulty: str, seed: int) -> Part:
    """The task for one seed; the same arguments always give the same part."""
    check(family, difficulty)
    # A string seed hashes the same in every process (unlike hash() of a tuple under PYTHONHASHSEED).
    rng = random.Random(f"cad/{family}-v0:{difficulty}/{seed}")
    return LONG_FAMILIES[family](rng) if family in LONG_FAMILIES else FAMILIES[family](rng, difficulty)
