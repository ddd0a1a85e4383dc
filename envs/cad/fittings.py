"""Part families of hardware and pipework: hex nuts (plain, with a washer face, castellated) and pipe elbows."""
from __future__ import annotations

import math
import random

from jointrl.envs.cad.kit.csg import box, circle_points, cylinder, regular_prism, revolve, rotate, translate
from jointrl.envs.cad.part import Part, add, cut, listing, num, point, polar, program, sample


def nut(rng: random.Random, difficulty: str) -> Part:
    """A hex prism with a bore; medium stands it on a washer face, hard makes it a castle nut with a slotted crown."""
    # Across flats 8..46 mm, a bore of about half of it and a height of about 0.8 of it, each drawn freely.
    s = rng.randrange(16, 93) / 2
    bore = rng.randint(max(3, round(0.4 * s)), round(0.65 * s))
    h = rng.randint(round(1.2 * s), round(1.8 * s)) / 2
    radius = s / math.sqrt(3)  # hexagon circumradius from the across-flats size
    hexagon = add("hex_body", regular_prism(6, radius, h))
    params = {"s": s, "bore": bore, "h": h}
    if difficulty == "easy":
        features = (hexagon, cut("bore", translate(cylinder(h + 2, bore / 2), (0, 0, -1))))
        corners = [polar(radius, 60 * i) for i in range(6)]
        text = (f"Model a hexagonal nut blank from z = 0 to z = {num(h)}: a prism whose cross-section is the regular "
                f"hexagon with vertices (x, y) = {listing([point(*c) for c in corners])} ({num(s)} mm across the flats), "
                f"with a through-bore of diameter {bore} on the z axis.")
        code = program(f"""
# A regular hexagon {num(s)} mm across flats has circumradius {num(s)} / sqrt(3); regular_prism puts a vertex on +x.
body = regular_prism(6, {num(s)} / math.sqrt(3), {num(h)})
part = difference(body, translate(cylinder({num(h + 2)}, {num(bore / 2)}), (0, 0, -1)))
save(part)
""")
        return Part("nut", text, code, features, params)
    if difficulty == "medium":
        face = rng.choice([1, 1.5, 2, 2.5, 3])
        features = (add("washer_face", cylinder(face, s / 2)), add("hex_body", translate(regular_prism(6, radius, h), (0, 0, face))),
                    cut("bore", translate(cylinder(face + h + 2, bore / 2), (0, 0, -1))))
        text = (f"Model a hex nut with a washer face, standing on z = 0 and centred on the z axis. The washer face is "
                f"a round disc {num(face)} mm thick whose diameter equals the nut's across-flats size; the hexagonal "
                f"body sits directly on it, {num(s)} mm across flats and {num(h)} mm tall, with two of its flats parallel to the "
                f"x axis. A through-bore of diameter {bore} runs through both.")
        code = program(f"""
s, h, face = {num(s)}, {num(h)}, {num(face)}
washer = cylinder(face, s / 2)
# Flats parallel to x means vertices on the x axis, which is where regular_prism puts one.
hexagon = translate(regular_prism(6, s / math.sqrt(3), h), (0, 0, face))
part = difference(union(washer, hexagon), translate(cylinder(face + h + 2, {num(bore / 2)}), (0, 0, -1)))
save(part)
""")
        return Part("nut", text, code, features, {**params, "face": face})

    crown_d = s - rng.choice([1, 2])
    # The crown keeps a wall of at least 1.5 mm round the bore.
    bore = params["bore"] = min(bore, crown_d - 3)
    crown_h = max(3, round(0.4 * s) + rng.randint(-1, 1))
    slot_w = max(2, round(s / 6) + rng.randint(-1, 1))
    slot_d = crown_h - 1
    top = h + crown_h
    # Each slot is its own feature: a box from the axis out past the crown, turned to face a flat.
    half_slot = translate(box(((crown_d + 2) / 2, slot_w, slot_d + 1)), (0, -slot_w / 2, top - slot_d))
    features = (hexagon, add("crown", translate(cylinder(crown_h, crown_d / 2), (0, 0, h))),
                cut("bore", translate(cylinder(top + 2, bore / 2), (0, 0, -1))),
                *(cut(f"slot_{a}", rotate(half_slot, (0, 0, a))) for a in (30, 90, 150, 210, 270, 330)))
    params.update(crown_d=crown_d, crown_h=crown_h, slot_w=slot_w)
    text = (f"Model a castle nut standing on z = 0, centred on the z axis. Its hexagonal body is {num(s)} mm across flats "
            f"and {num(h)} mm tall, with two flats parallel to the x axis. On top sits a round crown of diameter {num(crown_d)}, "
            f"{crown_h} mm tall. Six radial slots, each {slot_w} mm wide and {slot_d} mm deep from the crown's top "
            f"face, cut through the crown's wall, centred on the directions 30, 90, 150, 210, 270 and 330 degrees "
            f"from +x (facing the middle of each flat). A through-bore of diameter {bore} runs through body and crown.")
    code = program(f"""
s, h, crown_d, crown_h, slot_w, slot_d = {num(s)}, {num(h)}, {num(crown_d)}, {crown_h}, {slot_w}, {slot_d}
top = h + crown_h
body = union(regular_prism(6, s / math.sqrt(3), h), translate(cylinder(crown_h, crown_d / 2), (0, 0, h)))
# One box across the whole crown makes two opposite slots; three turns give all six.
slot = translate(box((crown_d + 2, slot_w, slot_d + 1)), (-(crown_d + 2) / 2, -slot_w / 2, top - slot_d))
cutters = [translate(cylinder(top + 2, {num(bore / 2)}), (0, 0, -1))]
cutters += [rotate(slot, (0, 0, a)) for a in (30, 90, 150)]
part = difference(body, cutters)
save(part)
""")
    return Part("nut", text, code, features, params)


def elbow(rng: random.Random, difficulty: str) -> Part:
    """A 90-degree pipe bend: the bend alone (easy), with straight legs (medium), and with bolted end flanges (hard)."""
    def draw():
        p = {"rb": rng.randrange(50, 161) / 2, "od": rng.randint(12, 40), "wall": rng.choice([1.5, 2, 2.5, 3, 3.5, 4]),
             "l1": rng.randrange(10, 51), "l2": rng.randrange(10, 51), "tf": rng.randint(3, 8),
             "dh": rng.randint(3, 6)}
        p["df"] = p["od"] + 2 * rng.randint(7, 14)
        p["q"] = (p["od"] / 2 + p["df"] / 2) / 2 / math.sqrt(2)
        return p

    def sound(p):
        ring = p["q"] * math.sqrt(2)
        return p["rb"] >= p["od"] / 2 + 8 and ring - p["dh"] / 2 >= p["od"] / 2 + 1.5 and ring + p["dh"] / 2 + 1.5 <= p["df"] / 2

    p = sample(draw, sound)
    rb, ro, ri = p["rb"], p["od"] / 2, p["od"] / 2 - p["wall"]
    frame = (f"a 90-degree pipe bend of outer diameter {p['od']} and wall thickness {num(p['wall'])}; the pipe's centreline "
             f"is the quarter circle of radius {num(rb)} about the z axis in the plane z = 0, from ({num(rb)}, 0, 0) to "
             f"(0, {num(rb)}, 0)")
    if difficulty == "easy":
        features = (add("bend", revolve(circle_points(ro, (rb, 0)), 90)), cut("passage", revolve(circle_points(ri, (rb, 0)), 90)))
        text = f"Model {frame}, the pipe ending square at both of those points."
        code = program(f"""
# The annular cross-section in the (r, z) plane, swept a quarter turn from +x towards +y.
outer = circle_points({num(ro)}, ({num(rb)}, 0))
inner = circle_points({num(ri)}, ({num(rb)}, 0))
part = revolve(outer, 90, holes=[inner])
save(part)
""")
        return Part("elbow", text, code, features, {k: p[k] for k in ("rb", "od", "wall")})

    l1, l2, tf, q, dh = p["l1"], p["l2"], p["tf"], p["q"], p["dh"]
    features = [add("bend", revolve(circle_points(ro, (rb, 0)), 90)),
                add("leg_1", translate(cylinder(l1, ro, axis="y"), (rb, -l1, 0))),
                add("leg_2", translate(cylinder(l2, ro, axis="x"), (-l2, rb, 0))),
                cut("passage", revolve(circle_points(ri, (rb, 0)), 90)),
                cut("leg_1_passage", translate(cylinder(l1 + 1, ri, axis="y"), (rb, -l1 - 1, 0))),
                cut("leg_2_passage", translate(cylinder(l2 + 1, ri, axis="x"), (-l2 - 1, rb, 0)))]
    used = ("rb", "od", "wall", "l1", "l2") + (("tf", "dh", "df") if difficulty == "hard" else ())
    text = (f"Model {frame}. Straight pipe of the same section continues from each end of the bend: {l1} mm along -y "
            f"from ({num(rb)}, 0, 0), and {l2} mm along -x from (0, {num(rb)}, 0); the pipe ends square.")
    lines = ["ro, ri, rb, l1, l2 = " + f"{num(ro)}, {num(ri)}, {num(rb)}, {l1}, {l2}",
             "# Solid bend and legs first; the bore is cut afterwards as one continuous passage.",
             "outer = [revolve(circle_points(ro, (rb, 0)), 90),",
             "         translate(cylinder(l1, ro, axis=\"y\"), (rb, -l1, 0)),",
             "         translate(cylinder(l2, ro, axis=\"x\"), (-l2, rb, 0))]",
             "cutters = [revolve(circle_points(ri, (rb, 0)), 90),",
             "           translate(cylinder(l1 + 1, ri, axis=\"y\"), (rb, -l1 - 1, 0)),",
             "           translate(cylinder(l2 + 1, ri, axis=\"x\"), (-l2 - 1, rb, 0))]"]
    if difficulty == "hard":
        df = p["df"]
        features += [add("flange_1", translate(cylinder(tf, df / 2, axis="y"), (rb, -l1, 0))),
                     add("flange_2", translate(cylinder(tf, df / 2, axis="x"), (-l2, rb, 0)))]
        corners = [(sa * q, sb * q) for sa, sb in [(1, 1), (-1, 1), (-1, -1), (1, -1)]]
        features += [cut(f"flange_1_hole_{i + 1}", translate(cylinder(tf + 2, dh / 2, axis="y"), (rb + b, -l1 - 1, a)))
                     for i, (a, b) in enumerate(corners)]
        features += [cut(f"flange_2_hole_{i + 1}", translate(cylinder(tf + 2, dh / 2, axis="x"), (-l2 - 1, rb + a, b)))
                     for i, (a, b) in enumerate(corners)]
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
    lines += ["part = difference(union(outer), cutters)", "save(part)"]
    return Part("elbow", text, program("\n".join(lines)), tuple(features), {k: p[k] for k in used})
