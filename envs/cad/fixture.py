"""The long-horizon family: a fixture plate whose features are given one per drawing note, read through a tool.

The prompt gives only the stock block and the number of notes; each note (a hole, a counterbored hole, a
blind hole, a pocket, a slot, a boss, or the corner chamfers) lies in its own cell of a grid on the top
face, so the features never meet and each can be built, checked and scored on its own. The reference
solution reads a note, applies it to the part saved by the previous run, and saves again.
"""
from __future__ import annotations

import random

from jointrl.envs.cad.kit.csg import box, cylinder, prism, translate
from jointrl.envs.cad.part import Feature, Part, add, cut, num, point, program

KINDS = ("hole", "counterbored_hole", "blind_hole", "pocket", "slot", "boss")
WORK_FILE = "fixture.npz"


def _cell_feature(rng: random.Random, kind: str, c: tuple[float, float], cell: int, t: int, n: int):
    """One cell's features, its note, the program lines that apply it, and its parameters."""
    x, y = c
    at = f"centred at (x, y) = {point(x, y)}"
    if kind == "hole":
        d = rng.randint(4, cell // 2)
        return ([cut(f"hole_{n}", translate(cylinder(t + 2, d / 2), (x, y, -1)))],
                f"a vertical through-hole of diameter {d}, {at}.",
                [f"part = difference(part, translate(cylinder({t + 2}, {num(d / 2)}), ({num(x)}, {num(y)}, -1)))"], {"d": d})
    if kind == "counterbored_hole":
        d = rng.randint(4, cell // 3 + 2)
        big, depth = d + 2 * rng.randint(2, 4), rng.randint(2, t // 2)
        return ([cut(f"hole_{n}", translate(cylinder(t + 2, d / 2), (x, y, -1))),
                 cut(f"counterbore_{n}", translate(cylinder(depth + 1, big / 2), (x, y, t - depth)))],
                f"a vertical through-hole of diameter {d}, {at}, counterbored from the top face to diameter {big}, "
                f"{depth} mm deep.",
                [f"part = difference(part, translate(cylinder({t + 2}, {num(d / 2)}), ({num(x)}, {num(y)}, -1)),",
                 f"                  translate(cylinder({depth + 1}, {num(big / 2)}), ({num(x)}, {num(y)}, {t - depth})))"],
                {"d": d, "big": big, "depth": depth})
    if kind == "blind_hole":
        d, depth = rng.randint(4, cell // 2), rng.randint(3, t - 3)
        return ([cut(f"blind_hole_{n}", translate(cylinder(depth + 1, d / 2), (x, y, t - depth)))],
                f"a blind hole of diameter {d} drilled {depth} mm deep from the top face with a flat bottom, {at}.",
                ["# The cutter starts at the hole's bottom and overshoots the top face.",
                 f"part = difference(part, translate(cylinder({depth + 1}, {num(d / 2)}), ({num(x)}, {num(y)}, {t - depth})))"],
                {"d": d, "depth": depth})
    if kind == "pocket":
        a, b, depth = rng.randint(8, cell - 8), rng.randint(8, cell - 8), rng.randint(2, t - 3)
        corner = (x - a / 2, y - b / 2, t - depth)
        return ([cut(f"pocket_{n}", translate(box((a, b, depth + 1)), corner))],
                f"a rectangular pocket {a} mm along x by {b} mm along y, {depth} mm deep from the top face, {at}.",
                [f"part = difference(part, translate(box(({a}, {b}, {depth + 1})), {point(*corner)}))"],
                {"a": a, "b": b, "depth": depth})
    if kind == "slot":
        w = rng.randint(4, 8)
        length, along = rng.randint(6, cell - w - 6), rng.choice("xy")
        dx, dy = (length / 2, 0) if along == "x" else (0, length / 2)
        size = (length, w, t + 2) if along == "x" else (w, length, t + 2)
        corner = (x - size[0] / 2, y - size[1] / 2, -1)
        ends = [(x - dx, y - dy), (x + dx, y + dy)]
        return ([cut(f"slot_{n}", translate(box(size), corner), [translate(cylinder(t + 2, w / 2), (ex, ey, -1)) for ex, ey in ends])],
                f"a vertical through-slot with semicircular ends, {w} mm wide, running along {along} with {length} mm "
                f"between the centres of its end semicircles, {at}.",
                [f"slot = union(translate(box({point(*size)}), {point(*corner)}),",
                 f"             [translate(cylinder({t + 2}, {num(w / 2)}), (ex, ey, -1)) for ex, ey in [{point(*ends[0])}, {point(*ends[1])}]])",
                 "part = difference(part, slot)"],
                {"w": w, "length": length, "along": along})
    assert kind == "boss", kind
    d, height = rng.randint(8, cell - 6), rng.randint(3, 10)
    return ([add(f"boss_{n}", translate(cylinder(height, d / 2), (x, y, t)))],
            f"a round boss of diameter {d} rising {height} mm above the top face, {at}.",
            [f"part = union(part, translate(cylinder({height}, {num(d / 2)}), ({num(x)}, {num(y)}, {t})))"],
            {"d": d, "height": height})


def _corners(length: int, width: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    # Each block corner with the directions pointing into the block from it.
    return [((0, 0), (1, 1)), ((length, 0), (-1, 1)), ((length, width), (-1, -1)), ((0, width), (1, -1))]


def _chamfer_triangle(c: int, corner, into) -> list[tuple[int, int]]:
    # A 45-degree cutter whose hypotenuse is c from the corner along both faces; its legs overshoot the faces.
    (cx, cy), (sx, sy) = corner, into
    return [(cx - sx, cy - sy), (cx + sx * (c + 1), cy - sy), (cx - sx, cy + sy * (c + 1))]


def fixture(rng: random.Random) -> Part:
    """A fixture plate with one feature per grid cell (six or eight) and sometimes chamfered corners, one note each."""
    nx, cell, margin, t = rng.choice([3, 4]), rng.randint(26, 40), rng.randint(6, 12), rng.randint(8, 16)
    length, width = 2 * margin + nx * cell, 2 * margin + 2 * cell
    features: list[Feature] = [add("block", box((length, width, t)))]
    notes, steps, params = [], [], {"nx": nx, "cell": cell, "margin": margin, "t": t, "cells": []}
    for j in range(2):
        for i in range(nx):
            kind = rng.choice(KINDS)
            centre = (margin + (i + 0.5) * cell, margin + (j + 0.5) * cell)
            made, note, lines, drawn = _cell_feature(rng, kind, centre, cell, t, len(notes) + 1)
            features += made
            notes.append(note[0].upper() + note[1:])
            steps.append(lines)
            params["cells"].append({"kind": kind, **drawn})
    if rng.random() < 0.5:
        c = rng.randint(3, margin - 1)
        corners = _corners(length, width)
        features += [cut(f"chamfer_{i + 1}", translate(prism(_chamfer_triangle(c, *corner), t + 2), (0, 0, -1)))
                     for i, corner in enumerate(corners)]
        params["chamfer"] = c
        notes.append(f"All four vertical edges of the block (its corners seen from above) are chamfered at 45 degrees, "
                     f"{c} mm along each adjoining face.")
        steps.append(["# A triangular prism at each corner; its legs overshoot both faces, its hypotenuse is the chamfer.",
                      f"for (cx, cy), (sx, sy) in {corners}:",
                      f"    triangle = [(cx - sx, cy - sy), (cx + sx * {c + 1}, cy - sy), (cx - sx, cy + sy * {c + 1})]",
                      f"    part = difference(part, translate(prism(triangle, {t + 2}), (0, 0, -1)))"])
    notes = [f"Note {i + 1}: {note}" for i, note in enumerate(notes)]
    text = (f"Model a fixture plate from a drawing. The stock is a block occupying 0 <= x <= {length}, "
            f"0 <= y <= {width}, 0 <= z <= {t}. The drawing has {len(notes)} numbered notes, each adding or removing "
            f"material (holes, pockets, slots, bosses, chamfers); read them with read_note(number), numbers 1 to "
            f"{len(notes)}. The part is correct only with every note applied.")
    start = f"part = box(({length}, {width}, {t}))"
    whole = program("\n".join([start, *(line for lines in steps for line in lines), "save(part)"]))
    # Step by step: each run continues from the solid the previous run kept in the work file.
    keep = [f"save(part, {WORK_FILE!r})", "save(part)"]
    stock = program("\n".join([start, *keep]))
    step_programs = tuple(program("\n".join([f"part = load({WORK_FILE!r})", *lines, *keep])) for lines in steps)
    return Part("fixture", text, whole, tuple(features), params, notes=tuple(notes), steps=(stock, *step_programs))
