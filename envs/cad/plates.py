"""Part families cut from flat stock: plates with hole patterns, L-brackets, and boxes with pockets."""
from __future__ import annotations

import math
import random

from jointrl.envs.cad.kit.csg import box, cylinder, prism, translate
from jointrl.envs.cad.part import Part, add, cut, listing, num, point, points, polar, program, sample


def plate(rng: random.Random, difficulty: str) -> Part:
    """A plate with a grid of through-holes (easy, medium) or corner holes plus a bore and bolt circle (hard)."""
    if difficulty == "hard":
        return _plate_circle(rng)
    nx, ny = rng.randint(2, 5), rng.randint(2, 4)
    d = rng.randint(4, 10)
    e = rng.randint(d // 2 + 4, 16)
    px, py = rng.randint(d + 4, 36), rng.randint(d + 4, 32)
    t = rng.randint(3, 10)
    w, depth = 2 * e + (nx - 1) * px, 2 * e + (ny - 1) * py
    xs, ys = [e + i * px for i in range(nx)], [e + j * py for j in range(ny)]
    params = {"nx": nx, "ny": ny, "d": d, "e": e, "px": px, "py": py, "t": t}
    features = [add("plate", box((w, depth, t)))]
    features += [cut(f"hole_{i + 1}", translate(cylinder(t + 2, d / 2), (x, y, -1)))
                 for i, (x, y) in enumerate((x, y) for y in ys for x in xs)]
    if difficulty == "easy":
        centres = listing([point(x, y) for y in ys for x in xs])
        text = (f"Model a flat plate occupying 0 <= x <= {w}, 0 <= y <= {depth}, 0 <= z <= {t}. "
                f"It has {nx * ny} vertical through-holes of diameter {d}, centred at (x, y) = {centres}.")
    else:
        text = (f"Model a rectangular plate {w} mm long (x), {depth} mm wide (y) and {t} mm thick, lying on z = 0 "
                f"with one corner at the origin and the plate in +x, +y, +z. It has a grid of {nx} x {ny} (x by y) "
                f"vertical through-holes of diameter {d}: the outermost holes' centres are {e} mm from the nearest "
                f"edges, and the holes are evenly spaced in both directions.")
    code = program(f"""
plate = box(({w}, {depth}, {t}))
holes = []
for y in {ys}:
    for x in {xs}:
        # Cutters overshoot both faces so no face is shared with the plate.
        holes.append(translate(cylinder({t + 2}, {num(d / 2)}), (x, y, -1)))
part = difference(plate, holes)
save(part)
""")
    return Part("plate", text, code, tuple(features), params)


def _plate_circle(rng: random.Random) -> Part:
    def draw():
        p = {"bore": rng.randrange(12, 41, 2), "d2": rng.randint(4, 8), "k": rng.randint(3, 8),
             "d1": rng.randint(4, 9), "e": rng.randint(5, 10), "t": rng.randint(4, 10)}
        p["pcd"] = p["bore"] + p["d2"] + 2 * rng.randint(3, 10)
        p["depth"] = 5 * math.ceil((p["pcd"] + p["d2"] + 12) / 5) + 5 * rng.randint(0, 3)
        p["w"] = p["depth"] + 5 * rng.randint(1, 8)
        p["a0"] = rng.randrange(0, math.ceil(360 / p["k"]), 5)
        return p

    def sound(p):
        corner = math.hypot(p["w"] / 2 - p["e"], p["depth"] / 2 - p["e"])
        chord = p["pcd"] * math.sin(math.pi / p["k"])
        return corner - p["d1"] / 2 >= p["pcd"] / 2 + p["d2"] / 2 + 3 and chord >= p["d2"] + 3

    p = sample(draw, sound)
    w, depth, t, e, k = p["w"], p["depth"], p["t"], p["e"], p["k"]
    cx, cy = w / 2 - e, depth / 2 - e
    corners = [(sx * cx, sy * cy) for sx, sy in [(1, 1), (-1, 1), (-1, -1), (1, -1)]]
    circle = [polar(p["pcd"] / 2, p["a0"] + i * 360 / k) for i in range(k)]
    # A centred box spans -t/2..t/2 in z; the part sits on z = 0.
    features = [add("plate", translate(box((w, depth, t), center=True), (0, 0, t / 2))),
                cut("bore", translate(cylinder(t + 2, p["bore"] / 2), (0, 0, -1)))]
    features += [cut(f"corner_hole_{i + 1}", translate(cylinder(t + 2, p["d1"] / 2), (x, y, -1))) for i, (x, y) in enumerate(corners)]
    features += [cut(f"bolt_hole_{i + 1}", translate(cylinder(t + 2, p["d2"] / 2), (x, y, -1))) for i, (x, y) in enumerate(circle)]
    text = (f"Model a rectangular mounting plate {w} x {depth} x {t} mm (x by y by z), centred on the origin in x and "
            f"y with its bottom face on z = 0. It has: a central vertical through-bore of diameter {p['bore']}; "
            f"{k} through-holes of diameter {p['d2']} evenly spaced on a circle of diameter {p['pcd']} about the "
            f"centre, the first at {num(p['a0'])} degrees from the +x axis (counter-clockwise seen from above); and "
            f"a through-hole of diameter {p['d1']} near each corner, its centre {e} mm in from both adjacent edges.")
    code = program(f"""
plate = translate(box(({w}, {depth}, {t}), center=True), (0, 0, {num(t / 2)}))
cutters = [translate(cylinder({t + 2}, {num(p['bore'] / 2)}), (0, 0, -1))]
for sx, sy in [(1, 1), (-1, 1), (-1, -1), (1, -1)]:
    cutters.append(translate(cylinder({t + 2}, {num(p['d1'] / 2)}), (sx * {num(cx)}, sy * {num(cy)}, -1)))
for i in range({k}):
    a = math.radians({num(p['a0'])} + i * 360 / {k})
    cutters.append(translate(cylinder({t + 2}, {num(p['d2'] / 2)}), ({num(p['pcd'] / 2)} * math.cos(a), {num(p['pcd'] / 2)} * math.sin(a), -1)))
part = difference(plate, cutters)
save(part)
""")
    return Part("plate", text, code, tuple(features), p)


def bracket(rng: random.Random, difficulty: str) -> Part:
    """An L-bracket: base and upright with holes; hard adds corner gussets and a slot in place of the base holes."""
    def draw():
        p = {"l": rng.randrange(50, 121, 5), "w": rng.randrange(26, 61, 2), "t": rng.randint(4, 10),
             "h": rng.randrange(35, 91, 5), "db": rng.randint(4, 10), "du": rng.randint(4, 8),
             "f": rng.randint(8, 18), "pitch": rng.randrange(12, 41), "top": rng.randint(8, 18),
             "g": rng.randint(3, 6), "leg": rng.randrange(12, 31), "ws": rng.randint(5, 10), "ls": rng.randrange(10, 31)}
        p["s"] = rng.randrange(p["du"] + 4, max(p["du"] + 5, p["w"] - p["du"] - 2 * p["g"] - 3), 2)
        return p

    def sound(p):
        return (p["s"] <= p["w"] - p["du"] - 2 * p["g"] - 4 and p["l"] - p["f"] - p["pitch"] >= p["t"] + p["db"] / 2 + 3 and p["leg"] <= min(p["l"], p["h"]) - p["t"] - 10
                and p["ls"] + p["ws"] + 4 <= p["l"] - p["t"] and p["top"] + p["du"] / 2 + 3 <= p["h"] - p["t"] - p["leg"]
                and p["f"] >= p["db"] / 2 + 3 and p["pitch"] >= p["db"] + 3 and p["top"] >= p["du"] / 2 + 3)

    p = sample(draw, sound)
    l, w, t, h = p["l"], p["w"], p["t"], p["h"]
    base_holes = [(l - p["f"], w / 2), (l - p["f"] - p["pitch"], w / 2)]
    up_z = h - p["top"]
    up_holes = [(w / 2 - p["s"] / 2, up_z), (w / 2 + p["s"] / 2, up_z)]
    features = [add("base", box((l, w, t))), add("upright", box((t, w, h)))]
    features += [cut(f"upright_hole_{i + 1}", translate(cylinder(t + 2, p["du"] / 2, axis="x"), (-1, y, z)))
                 for i, (y, z) in enumerate(up_holes)]
    frame = (f"Model an L-bracket. Its base plate occupies 0 <= x <= {l}, 0 <= y <= {w}, 0 <= z <= {t}; its upright "
             f"plate occupies 0 <= x <= {t}, 0 <= y <= {w}, 0 <= z <= {h}.")
    if difficulty == "easy":
        text = (frame + f" The base has vertical through-holes of diameter {p['db']} centred at (x, y) = "
                f"{listing([point(*c) for c in base_holes])}. The upright has horizontal through-holes along x of "
                f"diameter {p['du']} centred at (y, z) = {listing([point(*c) for c in up_holes])}.")
    else:
        upright = (f" The upright has two horizontal through-holes (along x) of diameter {p['du']}, their centres "
                   f"{p['top']} mm below its top edge, {p['s']} mm apart and symmetric about the bracket's centre "
                   f"plane y = {num(w / 2)}.")
        if difficulty == "medium":
            text = (frame + f" The base has two vertical through-holes of diameter {p['db']} on its centre line: the "
                    f"first {p['f']} mm from the free end (x = {l}), the second {p['pitch']} mm further towards the "
                    f"upright." + upright)
        else:
            text = (frame + f" The base has a through-slot of width {p['ws']} with semicircular ends on the centre "
                    f"line, running along x, centred lengthwise between the upright's inner face and the free end, "
                    f"with {p['ls']} mm between the centres of its end semicircles." + upright + f" Two triangular "
                    f"gussets {p['g']} mm thick, flush with the side faces y = 0 and y = {w}, fill the inside corner: "
                    f"each is a right triangle with legs of {p['leg']} mm along the base's top face and up the "
                    f"upright's inner face.")
    if difficulty == "hard":
        xs, ls, ws, g, leg = (t + l) / 2, p["ls"], p["ws"], p["g"], p["leg"]
        # Axis-y prisms take (z, x) points: the triangle's right angle sits in the inside corner.
        gusset = prism([(t, t), (t + leg, t), (t, t + leg)], g, axis="y")
        features += [add("gusset_1", gusset), add("gusset_2", translate(gusset, (0, w - g, 0)))]
        features.append(cut("slot", translate(box((ls, ws, t + 2)), (xs - ls / 2, w / 2 - ws / 2, -1)),
                            [translate(cylinder(t + 2, ws / 2), (x, w / 2, -1)) for x in (xs - ls / 2, xs + ls / 2)]))
        base_code = f"""
# The slot: a box between the two end-circle centres plus a cylinder at each end.
slot_x = ({t} + {l}) / 2
cutters.append(translate(box(({ls}, {ws}, {t + 2})), (slot_x - {num(ls / 2)}, {num(w / 2 - ws / 2)}, -1)))
for x in (slot_x - {num(ls / 2)}, slot_x + {num(ls / 2)}):
    cutters.append(translate(cylinder({t + 2}, {num(ws / 2)}), (x, {num(w / 2)}, -1)))
# Axis-y prisms take (z, x) points; the right angle sits in the inside corner.
gusset = prism([({t}, {t}), ({t + leg}, {t}), ({t}, {t + leg})], {g}, axis="y")
body = union(body, gusset, translate(gusset, (0, {w - g}, 0)))
"""
    else:
        features += [cut(f"base_hole_{i + 1}", translate(cylinder(t + 2, p["db"] / 2), (x, y, -1)))
                     for i, (x, y) in enumerate(base_holes)]
        base_code = f"""
for x, y in {points(base_holes)}:
    cutters.append(translate(cylinder({t + 2}, {num(p['db'] / 2)}), (x, y, -1)))
"""
    code = program(f"""
body = union(box(({l}, {w}, {t})), box(({t}, {w}, {h})))
cutters = []
for y, z in {points(up_holes)}:
    # Horizontal holes: cylinders along x, overshooting both faces of the upright.
    cutters.append(translate(cylinder({t + 2}, {num(p['du'] / 2)}, axis="x"), (-1, y, z)))
{base_code.strip()}
part = difference(body, cutters)
save(part)
""")
    return Part("bracket", text, code, tuple(features), p)


def pocket(rng: random.Random, difficulty: str) -> Part:
    """A block with a pocket: explicit (easy), by wall thickness (medium), or compartments with drain holes (hard)."""
    l, w, h = rng.randrange(50, 121, 2), rng.randrange(30, 81, 2), rng.randint(15, 40)
    wall, floor = rng.randint(3, 8), rng.randint(3, 8)
    frame = f"Model a block occupying 0 <= x <= {l}, 0 <= y <= {w}, 0 <= z <= {h}"
    if difficulty == "easy":
        x0, x1 = rng.randint(4, 20), l - rng.randint(4, 20)
        y0, y1 = rng.randint(4, 12), w - rng.randint(4, 12)
        params = {"l": l, "w": w, "h": h, "floor": floor, "x0": x0, "x1": x1, "y0": y0, "y1": y1}
        features = (add("block", box((l, w, h))), cut("pocket", translate(box((x1 - x0, y1 - y0, h - floor + 1)), (x0, y0, floor))))
        text = (frame + f" with a rectangular pocket cut down from the top face: the pocket occupies "
                f"{x0} <= x <= {x1}, {y0} <= y <= {y1}, {floor} <= z <= {h}.")
        # The program restates the text's numbers in its order and lets Python take the differences.
        code = program(f"""
block = box(({l}, {w}, {h}))
x0, x1, y0, y1, z0, z1 = {x0}, {x1}, {y0}, {y1}, {floor}, {h}
# The cutter rises 1 mm above the top face so the pocket opens cleanly.
pocket = translate(box((x1 - x0, y1 - y0, z1 + 1 - z0)), (x0, y0, z0))
part = difference(block, pocket)
save(part)
""")
        return Part("pocket", text, code, features, params)
    n = 1 if difficulty == "medium" else rng.randint(2, 4)
    rib, drain = rng.randint(2, 6), rng.randint(4, 10)
    # Fewer compartments where the block is too short for them (two always fit: l >= 50, walls and rib <= 22).
    while n > 2 and (l - 2 * wall - (n - 1) * rib) / n < 14:
        n -= 1
    inner = (l - 2 * wall - (n - 1) * rib) / n
    # Narrow compartments get a drain that still leaves floor around it.
    drain = min(drain, math.floor(inner) - 4, w - 2 * wall - 4)
    params = {"l": l, "w": w, "h": h, "wall": wall, "floor": floor, "n": n}
    params.update({"rib": rib, "drain": drain} if n > 1 else {})
    starts = [wall + i * (inner + rib) for i in range(n)]
    features = [add("block", box((l, w, h)))]
    features += [cut(f"compartment_{i + 1}" if n > 1 else "pocket", translate(box((inner, w - 2 * wall, h - floor + 1)), (x, wall, floor)))
                 for i, x in enumerate(starts)]
    if n > 1:
        features += [cut(f"drain_{i + 1}", translate(cylinder(floor + 2, drain / 2), (x + inner / 2, w / 2, -1))) for i, x in enumerate(starts)]
    if n == 1:
        text = (frame + f", hollowed from the top into an open box: a single rectangular pocket leaves side walls "
                f"{wall} mm thick all round and a floor {floor} mm thick.")
    else:
        text = (frame + f", hollowed from the top into {n} equal open compartments in a row along x: the outer walls "
                f"are {wall} mm thick, the compartments are separated by ribs {rib} mm thick running across y, and "
                f"the floor is {floor} mm thick. Each compartment has a vertical drain hole of diameter {drain} "
                f"through the floor at the centre of the compartment.")
    if n == 1:
        code = program(f"""
wall, floor = {wall}, {floor}
# The cutter rises 1 mm above the top face so the pocket opens cleanly.
pocket = translate(box(({l} - 2 * wall, {w} - 2 * wall, {h} - floor + 1)), (wall, wall, floor))
part = difference(box(({l}, {w}, {h})), pocket)
save(part)
""")
    else:
        code = program(f"""
wall, floor, rib, n = {wall}, {floor}, {rib}, {n}
inner = ({l} - 2 * wall - (n - 1) * rib) / n
cutters = []
for i in range(n):
    x = wall + i * (inner + rib)
    cutters.append(translate(box((inner, {w} - 2 * wall, {h} - floor + 1)), (x, wall, floor)))
    cutters.append(translate(cylinder(floor + 2, {num(drain / 2)}), (x + inner / 2, {num(w / 2)}, -1)))
part = difference(box(({l}, {w}, {h})), cutters)
save(part)
""")
    return Part("pocket", text, code, tuple(features), params)
