"""What a part family produces (the task text, the reference program, the target solid) and the text helpers families share."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import manifold3d

from jointrl.envs.cad.kit import KIT, csg

DIFFICULTIES = ("easy", "medium", "hard")


@dataclass(frozen=True)
class Part:
    """One generated task: the text the model reads, a correct program for the demo, and the target built on the host."""

    family: str
    text: str
    program: str
    target: manifold3d.Manifold


def num(x: float) -> str:
    """A dimension as a person writes it: up to three decimals, no trailing zeros."""
    text = f"{float(x):.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def point(*coordinates: float) -> str:
    """'(x, y, z)' with `num` formatting."""
    return "(" + ", ".join(num(c) for c in coordinates) + ")"


def points(pts) -> str:
    """A list of points as Python source."""
    return "[" + ", ".join(point(*p) for p in pts) + "]"


def polar(radius: float, degrees: float) -> tuple[float, float]:
    """The (a, b) point at `radius` and angle `degrees` counter-clockwise from the first axis."""
    angle = math.radians(degrees)
    return radius * math.cos(angle), radius * math.sin(angle)


def listing(items: list[str]) -> str:
    """'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def program(body: str) -> str:
    """A complete program: the import line for the API names `body` calls, then `body`."""
    used = [name for name in csg.__all__ if re.search(rf"\b{name}\(", body)]
    header = "import math\n" if "math." in body else ""
    header += f"from {KIT} import {', '.join(used)}\n\n" if used else "\n"
    return header + body.strip() + "\n"


def sample(draw, accept, tries: int = 1000) -> dict:
    """Draw parameter sets (from the caller's seeded rng) until one is geometrically sound."""
    for _ in range(tries):
        params = draw()
        if accept(params):
            return params
    raise RuntimeError(f"no sound parameters after {tries} draws; the family's ranges are inconsistent")
