"""Part families of hardware and pipework: hex nuts (plain, with a washer face, castellated) and pipe elbows."""
from __future__ import annotations

import math
import random

from jointrl.envs.cad.kit.csg import box, circle_points, cylinder, difference, regular_prism, revolve, rotate, translate, union
from jointrl.envs.cad.part import Part, listing, num, point, polar, program, sample

# Across-flats sizes of common metric nuts, with a bore a little over half of it.
_NUTS = [(10, 6), (13, 8), (16, 10), (17, 10), (19, 12), (24, 16), (30, 20)]


def nut(rng: random.Random, difficulty: str) -> Part:
    """A hex prism with a bore; medium stands it on a washer face, hard makes it a castle nut with a slotted crown."""
    s, bore = rng.choice(_NUTS)
    h = round(0.8 * s)
    radius = s / math.sqrt(3)  # hexagon circumradius from the across-flats size
    if difficulty == "easy":
        target = difference(regular_prism(6, radius, h), translate(cylinder(h + 2, bore / 2), (0, 0, -1)))
        corners = [polar(radius, 60 * i) for i in range(6)]
        text = (f"Model a hexagonal nut blank from z = 0 to z = {h}: a prism whose cross-section is the regular "
                f"hexagon with vertices (x, y) = {listing([point(*c) for c in corners])} ({s} mm across the flats), "
                f"with a through-bore of diameter {bore} on the z axis.")
        code = program(f"""
# A regular hexagon {s} mm across flats has circumradius {s} / sqrt(3); regular_prism puts a vertex on +x.
body = regular_prism(6, {s} / math.sqrt(3), {h})
part = difference(body, translate(cylinder({h + 2}, {num(bore / 2)}), (0, 0, -1)))
save(part)
""")
        return Part("nut", text, code, target)
    if difficulty == "medium":
        face = rng.choice([1, 1.5, 2])
        body = union(cylinder(face, s / 2), translate(regular_prism(6, radius, h), (0, 0, face)))
        target = difference(body, translate(cylinder(face + h + 2, bore / 2), (0, 0, -1)))
        text = (f"Model a hex nut with a washer face, standing on z = 0 and centred on the z axis. The washer face is "
                f"a round disc {num(face)} mm thick whose diameter equals the nut's across-flats size; the hexagonal "
                f"body sits directly on it, {s} mm across flats and {h} mm tall, with two of its flats parallel to the "
                f"x axis. A through-bore of diameter {bore} runs through both.")
        code = program(f"""
s, h, face = {s}, {h}, {num(face)}
washer = cylinder(face, s / 2)
# Flats parallel to x means vertices on the x axis, which is where regular_prism puts one.
hexagon = translate(regular_prism(6, s / math.sqrt(3), h), (0, 0, face))
part = difference(union(washer, hexagon), translate(cylinder(face + h + 2, {num(bore / 2)}), (0, 0, -1)))
save(part)
""")
        return Part("nut", text, code, target)

    crown_d = s - rng.choice([1, 2])
    crown_h = max(3, round(0.4 * s))
    slot_w = max(2, round(s / 6))
    slot_d = crown_h - 1
    top = h + crown_h
    body = union(regular_prism(6, radius, h), translate(cylinder(crown_h, crown_d / 2), (0, 0, h)))
    slot = translate(box((crown_d + 2, slot_w, slot_d + 1)), (-(crown_d + 2) / 2, -slot_w / 2, top - slot_d))
    cutters = [translate(cylinder(top + 2, bore / 2), (0, 0, -1))] + [rotate(slot, (0, 0, a)) for a in (30, 90, 150)]
    target = difference(body, cutters)
    text = (f"Model a castle nut standing on z = 0, centred on the z axis. Its hexagonal body is {s} mm across flats "
            f"and {h} mm tall, with two flats parallel to the x axis. On top sits a round crown of diameter {crown_d}, "
            f"{crown_h} mm tall. Six radial slots, each {slot_w} mm wide and {slot_d} mm deep from the crown's top "
            f"face, cut through the crown's wall, centred on the directions 30, 90, 150, 210, 270 and 330 degrees "
            f"from +x (facing the middle of each flat). A through-bore of diameter {bore} runs through body and crown.")
    code = program(f"""
s, h, crown_d, crown_h, slot_w, slot_d = {s}, {h}, {crown_d}, {crown_h}, {slot_w}, {slot_d}
top = h + crown_h
body = union(regular_prism(6, s / math.sqrt(3), h), translate(cylinder(crown_h, crown_d / 2), (0, 0, h)))
# One box across the whole crown makes two opposite slots; three turns give all six.
slot = translate(box((crown_d + 2, slot_w, slot_d + 1)), (-(crown_d + 2) / 2, -slot_w / 2, top - slot_d))
cutters = [translate(cylinder(top + 2, {num(bore / 2)}), (0, 0, -1))]
cutters += [rotate(slot, (0, 0, a)) for a in (30, 90, 150)]
part = difference(body, cutters)
save(part)
""")
    return Part("nut", text, code, target)


def elbow(rng: random.Random, difficulty: str) -> Part:
    """A 90-degree pipe bend: the bend alone (easy), with straight legs (medium), and with bolted end flanges (hard)."""
    def draw():
        p = {"rb": rng.choice([30, 35, 40, 50]), "od": rng.choice([16, 20, 24]), "wall": rng.choice([2, 3]),
             "l1": rng.randrange(15, 41, 5), "l2": rng.randrange(15, 41, 5), "tf": rng.choice([4, 5, 6]),
             "dh": rng.choice([3, 4, 5])}
        p["df"] = p["od"] + rng.choice([16, 20, 24])
        p["q"] = (p["od"] / 2 + p["df"] / 2) / 2 / math.sqrt(2)
        return p

    def sound(p):
        ring = p["q"] * math.sqrt(2)
        return p["rb"] >= p["od"] / 2 + 8 and ring - p["dh"] / 2 >= p["od"] / 2 + 1.5 and ring + p["dh"] / 2 + 1.5 <= p["df"] / 2

    p = sample(draw, sound)
    rb, ro, ri = p["rb"], p["od"] / 2, p["od"] / 2 - p["wall"]
    frame = (f"a 90-degree pipe bend of outer diameter {p['od']} and wall thickness {p['wall']}; the pipe's centreline "
             f"is the quarter circle of radius {rb} about the z axis in the plane z = 0, from ({rb}, 0, 0) to "
             f"(0, {rb}, 0)")
    if difficulty == "easy":
        target = revolve(circle_points(ro, (rb, 0)), 90, holes=[circle_points(ri, (rb, 0))])
        text = f"Model {frame}, the pipe ending square at both of those points."
        code = program(f"""
# The annular cross-section in the (r, z) plane, swept a quarter turn from +x towards +y.
outer = circle_points({num(ro)}, ({rb}, 0))
inner = circle_points({num(ri)}, ({rb}, 0))
part = revolve(outer, 90, holes=[inner])
save(part)
""")
        return Part("elbow", text, code, target)

    l1, l2, tf, q, dh = p["l1"], p["l2"], p["tf"], p["q"], p["dh"]
    outer = [revolve(circle_points(ro, (rb, 0)), 90),
             translate(cylinder(l1, ro, axis="y"), (rb, -l1, 0)), translate(cylinder(l2, ro, axis="x"), (-l2, rb, 0))]
    cutters = [revolve(circle_points(ri, (rb, 0)), 90),
               translate(cylinder(l1 + 1, ri, axis="y"), (rb, -l1 - 1, 0)), translate(cylinder(l2 + 1, ri, axis="x"), (-l2 - 1, rb, 0))]
    text = (f"Model {frame}. Straight pipe of the same section continues from each end of the bend: {l1} mm along -y "
            f"from ({rb}, 0, 0), and {l2} mm along -x from (0, {rb}, 0); the pipe ends square.")
    lines = ["ro, ri, rb, l1, l2 = " + f"{num(ro)}, {num(ri)}, {rb}, {l1}, {l2}",
             "# Solid bend and legs first; the bore is cut afterwards as one continuous passage.",
             "outer = [revolve(circle_points(ro, (rb, 0)), 90),",
             "         translate(cylinder(l1, ro, axis=\"y\"), (rb, -l1, 0)),",
             "         translate(cylinder(l2, ro, axis=\"x\"), (-l2, rb, 0))]",
             "cutters = [revolve(circle_points(ri, (rb, 0)), 90),",
             "           translate(cylinder(l1 + 1, ri, axis=\"y\"), (rb, -l1 - 1, 0)),",
             "           translate(cylinder(l2 + 1, ri, axis=\"x\"), (-l2 - 1, rb, 0))]"]
    if difficulty == "hard":
        df = p["df"]
        outer += [translate(cylinder(tf, df / 2, axis="y"), (rb, -l1, 0)), translate(cylinder(tf, df / 2, axis="x"), (-l2, rb, 0))]
        corners = [(sa * q, sb * q) for sa, sb in [(1, 1), (-1, 1), (-1, -1), (1, -1)]]
        cutters += [translate(cylinder(tf + 2, dh / 2, axis="y"), (rb + b, -l1 - 1, a)) for a, b in corners]
        cutters += [translate(cylinder(tf + 2, dh / 2, axis="x"), (-l2 - 1, rb + a, b)) for a, b in corners]
        text += (f" Each pipe end carries a flange flush with it: a disc of diameter {df}, {tf} mm thick, "
                 f"perpendicular to the pipe and coaxial with it, extending back along the pipe from the end. Each "
                 f"flange has four bolt holes of diameter {dh} parallel to the pipe, through the flange, evenly spaced "
                 f"on the circle midway between the pipe's outer surface and the flange's rim, at 45 degrees to the "
                 f"z axis (so that no hole lies in the plane z = 0).")
        lines += [f"df, tf, dh = {df}, {tf}, {dh}",
                  "outer.append(translate(cylinder(tf, df / 2, axis=\"y\"), (rb, -l1, 0)))",
                  "outer.append(translate(cylinder(tf, df / 2, axis=\"x\"), (-l2, rb, 0)))",
                  "# Bolt holes sit on the circle midway between pipe and rim, on the diagonals: offsets of +-q both ways.",
                  "q = (ro + df / 2) / 2 / math.sqrt(2)",
                  "for a, b in [(q, q), (-q, q), (-q, -q), (q, -q)]:",
                  "    cutters.append(translate(cylinder(tf + 2, dh / 2, axis=\"y\"), (rb + b, -l1 - 1, a)))",
                  "    cutters.append(translate(cylinder(tf + 2, dh / 2, axis=\"x\"), (-l2 - 1, rb + a, b)))"]
    target = difference(union(outer), cutters)
    lines += ["part = difference(union(outer), cutters)", "save(part)"]
    return Part("elbow", text, program("\n".join(lines)), target)
