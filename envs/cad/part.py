"""A part family's output (task text, reference program, the named features that make the target) and shared text helpers."""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cached_property

import manifold3d

from jointrl.envs.cad.kit import KIT, csg

DIFFICULTIES = ("easy", "medium", "hard")


@dataclass(frozen=True)
class Feature:
    """One named feature of a part: material it adds (a disc, a hub, a gusset) or removes (a hole, a pocket)."""

    name: str
    solid: manifold3d.Manifold
    cut: bool = False


def add(name: str, *solids) -> Feature:
    """A feature that adds the union of `solids`."""
    return Feature(name, csg.union(*solids))


def cut(name: str, *solids) -> Feature:
    """A feature that removes the union of `solids`."""
    return Feature(name, csg.union(*solids), cut=True)


def build(features) -> manifold3d.Manifold:
    """The solid the features make: every added solid, then every cut taken away (empty when nothing is added)."""
    adds = [f.solid for f in features if not f.cut]
    cuts = [f.solid for f in features if f.cut]
    if not adds:
        return manifold3d.Manifold()
    return csg.difference(csg.union(adds), cuts) if cuts else csg.union(adds)


def _boxes_meet(a: manifold3d.Manifold, b: manifold3d.Manifold) -> bool:
    lo_a, hi_a = csg.bounding_box(a)
    lo_b, hi_b = csg.bounding_box(b)
    return all(lo_a[i] <= hi_b[i] and lo_b[i] <= hi_a[i] for i in range(3))


@dataclass(frozen=True, eq=False)
class Part:
    """One generated task: the text the model reads, a correct program for the demo, its features and parameters."""

    family: str
    text: str
    program: str
    features: tuple[Feature, ...]
    params: dict  # every number the part was drawn from: what a memorising policy would recall
    notes: tuple[str, ...] = ()  # drawing notes read through a tool, where the text leaves features to them
    steps: tuple[str, ...] = ()  # the reference program split into runs: the stock, then one per note

    def __post_init__(self):
        names = [f.name for f in self.features]
        assert len(set(names)) == len(names), f"feature names repeat in a {self.family}: {names}"

    @cached_property
    def target(self) -> manifold3d.Manifold:
        """The specified solid."""
        return build(self.features)

    @cached_property
    def regions(self) -> dict[str, manifold3d.Manifold]:
        """Per feature, the material it changes in the finished part: what it adds, or what it removes from the rest.

        A cut removes its solid's share of the added material that no other cut removes; an addition contributes
        what no other addition covers and no cut removes. Only features whose boxes meet the feature's can matter.
        """
        out = {}
        for feature in self.features:
            near = [f for f in self.features if f is not feature and _boxes_meet(f.solid, feature.solid)]
            adds = [f.solid for f in near if not f.cut]
            cuts = [f.solid for f in near if f.cut]
            if feature.cut:
                kept = csg.intersection(feature.solid, csg.union(adds)) if adds else manifold3d.Manifold()
                out[feature.name] = csg.difference(kept, cuts) if cuts and not kept.is_empty() else kept
            else:
                out[feature.name] = csg.difference(feature.solid, adds, cuts)
        return out

    def key(self) -> str:
        """The part's identity for overlap measurement: family and parameters."""
        return json.dumps({"family": self.family, "params": self.params}, sort_keys=True)


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
