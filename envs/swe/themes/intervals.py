"""The interval family: tests for half-open intervals, merging, range arithmetic, scheduling and buckets."""
from __future__ import annotations

import random

from jointrl.envs.swe.case import Case, call, expr, raises
from jointrl.envs.swe.family import Family, Module


def _pairs(rng: random.Random, n: int, span: int = 60, longest: int = 15) -> list[tuple[int, int]]:
    out = []
    for _ in range(n):
        start = rng.randint(0, span)
        out.append((start, start + rng.randint(1, longest)))
    return out


def interval_cases(rng: random.Random) -> list[Case]:
    a = rng.randint(0, 10)
    # At least one point strictly inside (a = 10, b = 11 would leave none to draw).
    b = rng.randint(max(11, a + 2), 20)
    inside = rng.randint(a + 1, b - 1)
    c = rng.randint(a + 1, b - 1)
    return [
        expr("length", f"Interval({a}, {b}).length()"),
        expr("contains", f"Interval({a}, {b}).contains({inside})"),
        expr("contains", f"Interval({a}, {b}).contains({b})"),
        expr("contains", f"Interval({a}, {b}).contains({a})"),
        expr("is_empty", f"[Interval({a}, {a}).is_empty(), Interval({a}, {b}).is_empty()]"),
        expr("overlaps", f"Interval({a}, {b}).overlaps(Interval({c}, {b + 5}))"),
        expr("overlaps", f"Interval({a}, {b}).overlaps(Interval({b}, {b + 5}))"),
        expr("intersection", f"Interval({a}, {b}).intersection(Interval({c}, {b + 7})).as_tuple()"),
        expr("intersection", f"Interval({a}, {c}).intersection(Interval({c}, {b}))"),
        expr("shift", f"Interval({a}, {b}).shift({rng.randint(-5, 5)}).as_tuple()"),
        expr("split", f"[part.as_tuple() for part in Interval({a}, {b}).split({inside})]"),
        expr("split_rejects", f"Interval({a}, {b}).split({b})", raises="ValueError"),
        expr("rejects", f"Interval({b}, {a})", raises="ValueError"),
    ]


def merge_cases(rng: random.Random) -> list[Case]:
    runs = _pairs(rng, 6)
    touching = [(0, 5), (5, 9), (12, 12), (20, 25)]
    lo, hi = rng.randint(0, 10), rng.randint(50, 80)
    return [
        call("merge", runs),
        call("merge", touching),
        call("merge", [(3, 9), (1, 4), (2, 3)]),
        call("total_length", runs),
        call("total_length", [(0, 10), (2, 5)]),
        call("gaps", runs, lo, hi),
        call("gaps", [(0, 10), (10, 20)], 0, 30),
        call("gaps", [(-5, 3), (40, 90)], 0, 50),
        call("coverage", runs, lo, hi),
        call("coverage", [(0, 5)], 0, 20),
        raises("ValueError", "coverage", runs, 5, 5),
    ]


def arith_cases(rng: random.Random) -> list[Case]:
    def pair():
        lo = rng.randint(-9, 9)
        return (lo, lo + rng.randint(1, 8))

    a, b, neg = pair(), pair(), (-rng.randint(2, 6), -1)
    return [
        call("add", a, b),
        call("sub", a, b),
        call("sub", (0, 1), (5, 9)),
        call("mul", a, b),
        call("mul", neg, (2, 5)),
        call("mul", (-2, 3), (-4, 1)),
        call("width", a),
        call("midpoint", b),
        call("hull", a, b, neg),
        raises("ValueError", "hull"),
        call("contains_zero", a),
        call("contains_zero", (0, 4)),
        call("contains_zero", neg),
        raises("ValueError", "add", (5, 1), a),
    ]


def schedule_cases(rng: random.Random) -> list[Case]:
    busy = sorted(_pairs(rng, 4, span=480, longest=90))
    day = (rng.choice((0, 30)), rng.choice((480, 540)))
    return [
        call("free_slots", busy, *day),
        call("free_slots", busy, *day, min_length=rng.randint(30, 60)),
        call("free_slots", [(0, 30), (30, 60)], 0, 90, min_length=30),
        call("first_fit", busy, rng.randint(20, 60), *day),
        call("first_fit", [(0, 100)], 20, 0, 100),
        call("first_fit", [(10, 20)], 10, 0, 40),
        call("max_overlap", busy),
        call("max_overlap", [(0, 10), (10, 20), (5, 15)]),
        call("max_overlap", [(0, 10), (2, 8), (4, 6)]),
        call("busiest", busy),
        call("busiest", [(30, 90), (100, 130)]),
        call("busiest", [(0, 30)], hour_length=rng.choice((10, 20))),
        call("busiest", []),
    ]


def points_cases(rng: random.Random) -> list[Case]:
    edges = sorted(rng.sample(range(0, 100, 5), 5))
    values = [rng.randint(-5, 105) for _ in range(12)] + [edges[0], edges[-1]]
    return [
        call("locate", edges[2], edges),
        call("locate", edges[2] - 1, edges),
        call("locate", edges[0] - 3, edges),
        call("locate", edges[-1], edges),
        call("bucketize", values, edges),
        call("bucketize", [0, 4, 5, 9, 10, 11], [0, 5, 10]),
        call("clamp", rng.randint(-20, 120), 0, 100),
        call("clamp", 100, 0, 100),
        raises("ValueError", "clamp", 5, 10, 0),
        call("even_edges", 0, rng.randint(5, 12), rng.randint(2, 4)),
        call("even_edges", -1, 1, 1),
        raises("ValueError", "even_edges", 0, 1, 0),
    ]


FAMILY = Family(
    name="intervals",
    topic="the interval helpers",
    package_names=("spans", "intervalkit", "rangeset"),
    modules=(
        Module("interval", interval_cases),
        Module("merge", merge_cases),
        Module("arith", arith_cases),
        Module("schedule", schedule_cases, requires=("merge",)),
        Module("points", points_cases),
    ),
)
