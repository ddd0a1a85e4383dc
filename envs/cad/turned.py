"""Part families turned about the z axis: flanges, stepped shafts, and washer stacks."""
from __future__ import annotations

import math
import random

from jointrl.envs.cad.kit.csg import box, cylinder, translate
from jointrl.envs.cad.part import Part, add, cut, listing, num, point, points, polar, program, sample


def flange(rng: random.Random, difficulty: str) -> Part:
    """A disc with a bore and bolt circle; medium adds a hub, hard also counterbores and a recess underneath."""
    def draw():
        p = {"od": rng.randrange(60, 161, 5), "t": rng.randint(6, 14), "bore": rng.randrange(16, 47, 2),
             "k": rng.randint(3, 8), "dh": rng.randint(5, 14), "hh": rng.randint(6, 20),
             "cbd": rng.choice([1.5, 2, 2.5, 3, 4]), "rd": rng.choice([1.5, 2, 2.5, 3])}
        p["hub"] = p["bore"] + 2 * rng.randint(5, 12)
        p["cb"] = p["dh"] + 2 * rng.randint(2, 4)
        p["pcd"] = 2 * rng.randint(p["bore"] // 2 + 4, max(p["bore"] // 2 + 4, p["od"] // 2 - 4)) if difficulty == "easy" else (p["hub"] + p["od"]) / 2
        p["recess"] = p["bore"] + 2 * rng.randint(3, 6)
        return p

    def sound(p):
        inner = p["bore"] / 2 if difficulty == "easy" else p["hub"] / 2
        widest = p["cb"] if difficulty == "hard" else p["dh"]
        return (p["pcd"] / 2 - widest / 2 >= inner + 2 and p["pcd"] / 2 + widest / 2 + 3 <= p["od"] / 2
                and p["pcd"] * math.sin(math.pi / p["k"]) >= widest + 3 and p["recess"] / 2 <= p["pcd"] / 2 - p["dh"] / 2 - 3)

    p = sample(draw, sound)
    od, t, bore, k, dh, pcd = p["od"], p["t"], p["bore"], p["k"], p["dh"], p["pcd"]
    a0 = 180 / k if difficulty == "hard" else 0
    hub_h = p["hh"] if difficulty != "easy" else 0
    angles = [a0 + i * 360 / k for i in range(k)]
    centres = [polar(pcd / 2, a) for a in angles]
    features = [add("disc", cylinder(t, od / 2))] + ([add("hub", translate(cylinder(hub_h, p["hub"] / 2), (0, 0, t)))] if hub_h else [])
    features.append(cut("bore", translate(cylinder(t + hub_h + 2, bore / 2), (0, 0, -1))))
    features += [cut(f"bolt_hole_{i + 1}", translate(cylinder(t + 2, dh / 2), (x, y, -1))) for i, (x, y) in enumerate(centres)]
    if difficulty == "hard":
        features += [cut(f"counterbore_{i + 1}", translate(cylinder(p["cbd"] + 1, p["cb"] / 2), (x, y, t - p["cbd"])))
                     for i, (x, y) in enumerate(centres)]
        features.append(cut("recess", translate(cylinder(p["rd"] + 1, p["recess"] / 2), (0, 0, -1))))
    used = {"easy": ("od", "t", "bore", "k", "dh", "pcd"), "medium": ("od", "t", "bore", "k", "dh", "hh", "hub"),
            "hard": ("od", "t", "bore", "k", "dh", "hh", "hub", "cb", "cbd", "recess", "rd")}[difficulty]

    if difficulty == "easy":
        text = (f"Model a flange: a disc of diameter {od} from z = 0 to z = {t}, centred on the z axis, with a "
                f"central through-bore of diameter {bore} and {k} through-holes of diameter {dh} on a circle of "
                f"diameter {pcd}, at angles {listing([num(a) for a in angles])} degrees counter-clockwise from +x, "
                f"i.e. centred at (x, y) = {listing([point(*c) for c in centres])}.")
    else:
        text = (f"Model a flange standing on z = 0, centred on the z axis: a disc of diameter {od} and thickness "
                f"{t}, with a coaxial hub of diameter {p['hub']} rising {hub_h} mm above the disc's top face. A "
                f"through-bore of diameter {bore} runs through disc and hub. {k} bolt holes of diameter {dh} pass "
                f"through the disc, evenly spaced on the circle midway between the hub's surface and the disc's rim, ")
        if difficulty == "medium":
            text += "one of them on the +x axis."
        else:
            text += (f"straddling the +x axis (the first is half a spacing counter-clockwise from it). Each bolt hole "
                     f"is counterbored from the disc's top face to diameter {p['cb']}, {num(p['cbd'])} mm deep. A coaxial "
                     f"recess of diameter {p['recess']} is cut {num(p['rd'])} mm deep into the bottom face.")
    lines = [f"t, hub_h = {t}, {hub_h}", f"body = cylinder(t, {num(od / 2)})"]
    if hub_h:
        lines.append(f"body = union(body, translate(cylinder(hub_h, {num(p['hub'] / 2)}), (0, 0, t)))")
    lines += [f"cutters = [translate(cylinder(t + hub_h + 2, {num(bore / 2)}), (0, 0, -1))]",
              f"for i in range({k}):",
              f"    a = math.radians({num(a0)} + i * 360 / {k})",
              f"    x, y = {num(pcd / 2)} * math.cos(a), {num(pcd / 2)} * math.sin(a)",
              f"    cutters.append(translate(cylinder(t + 2, {num(dh / 2)}), (x, y, -1)))"]
    if difficulty == "hard":
        lines += [f"    # The counterbore starts {num(p['cbd'])} mm below the disc's top and overshoots it.",
                  f"    cutters.append(translate(cylinder({num(p['cbd'] + 1)}, {num(p['cb'] / 2)}), (x, y, t - {num(p['cbd'])})))",
                  f"cutters.append(translate(cylinder({num(p['rd'] + 1)}, {num(p['recess'] / 2)}), (0, 0, -1)))"]
    lines += ["part = difference(body, cutters)", "save(part)"]
    return Part("flange", text, program("\n".join(lines)), tuple(features), {k: p[k] for k in used})


def shaft(rng: random.Random, difficulty: str) -> Part:
    """A stepped shaft: explicit steps (easy), a symmetric relational layout with a centre hole (medium), plus keyway, bore and cross hole (hard)."""
    if difficulty == "easy":
        n = rng.randint(3, 5)
        lengths = [rng.randrange(8, 41) for _ in range(n)]
        diameters = [rng.randrange(10, 51, 2)]
        while len(diameters) < n:
            diameters.append(rng.choice([d for d in range(10, 51, 2) if abs(d - diameters[-1]) >= 4]))
        zs = [sum(lengths[:i]) for i in range(n + 1)]
        features = tuple(add(f"section_{i + 1}", translate(cylinder(lengths[i], diameters[i] / 2), (0, 0, zs[i]))) for i in range(n))
        steps = listing([f"from z = {zs[i]} to z = {zs[i + 1]} diameter {diameters[i]}" for i in range(n)])
        text = f"Model a stepped shaft on the z axis made of coaxial cylinders: {steps}."
        # The program restates the text's numbers in its order and lets Python take the differences.
        code = program(f"""
sections = {points([(zs[i], zs[i + 1], diameters[i]) for i in range(n)])}  # (start z, end z, diameter)
part = union([translate(cylinder(end - z, d / 2), (0, 0, z)) for z, end, d in sections])
save(part)
""")
        return Part("shaft", text, code, features, {"lengths": lengths, "diameters": diameters})

    def draw():
        p = {"dj": rng.randrange(14, 31, 2), "lj": rng.randrange(12, 36), "lm": rng.randrange(18, 51),
             "ls": rng.randrange(10, 36), "dc": rng.randint(4, 10), "hc": rng.randint(8, 20),
             "db": rng.randint(4, 10), "kw": rng.randint(4, 10), "kd": rng.choice([2, 2.5, 3, 3.5, 4, 5]),
             "dx": rng.randint(3, 8)}
        p["ds"] = p["dj"] + 2 * rng.randint(2, 5)
        p["dm"] = p["ds"] + 2 * rng.randint(2, 5)
        p["kl"] = p["lm"] - rng.randint(4, 12)
        return p

    def sound(p):
        return (p["dc"] <= p["dj"] - 6 and p["dm"] / 2 - p["kd"] >= p["db"] / 2 + 2 and p["dx"] / 2 + 2 <= p["lj"] / 2
                and p["db"] <= p["dj"] - 8 and p["kl"] >= 10)

    p = sample(draw, sound)
    lj, ls, lm, dj, ds, dm = p["lj"], p["ls"], p["lm"], p["dj"], p["ds"], p["dm"]
    total = 2 * lj + 2 * ls + lm
    sections = [(0, lj, dj), (lj, ls, ds), (lj + ls, lm, dm), (lj + ls + lm, ls, ds), (total - lj, lj, dj)]
    features = [add(name, translate(cylinder(length, d / 2), (0, 0, z)))
                for name, (z, length, d) in zip(("journal_1", "shoulder_1", "collar", "shoulder_2", "journal_2"), sections)]
    text = (f"Model a stepped shaft standing on z = 0 along the z axis, {total} mm long overall and symmetric about "
            f"its mid-length: a middle collar of diameter {dm} and length {lm}; at both ends journals of diameter "
            f"{dj}, each {lj} mm long; and between each journal and the collar a shoulder of diameter {ds} filling "
            f"the remaining length.")
    lines = [f"total, lj, ls, lm = {total}, {lj}, {ls}, {lm}",
             f"sections = [(0, lj, {dj}), (lj, ls, {ds}), (lj + ls, lm, {dm}), (lj + ls + lm, ls, {ds}), (total - lj, lj, {dj})]",
             "body = union([translate(cylinder(length, d / 2), (0, 0, z)) for z, length, d in sections])"]
    if difficulty == "medium":
        features.append(cut("centre_hole", translate(cylinder(p["hc"] + 1, p["dc"] / 2), (0, 0, total - p["hc"]))))
        used = ("dj", "lj", "lm", "ls", "ds", "dm", "dc", "hc")
        text += f" A blind centre hole of diameter {p['dc']}, {p['hc']} mm deep, is drilled into the top end face on the axis."
        lines += ["# The blind hole's cutter starts at the hole's bottom and overshoots the top face.",
                  f"cutters = [translate(cylinder({p['hc'] + 1}, {num(p['dc'] / 2)}), (0, 0, total - {p['hc']}))]"]
    else:
        mid, kl, kw, kd = lj + ls + lm / 2, p["kl"], p["kw"], p["kd"]
        features += [cut("bore", translate(cylinder(total + 2, p["db"] / 2), (0, 0, -1))),
                     cut("keyway", translate(box((kd + 1, kw, kl)), (dm / 2 - kd, -kw / 2, mid - kl / 2))),
                     cut("cross_hole", translate(cylinder(dj + 2, p["dx"] / 2, axis="y"), (0, -dj / 2 - 1, lj / 2)))]
        used = ("dj", "lj", "lm", "ls", "ds", "dm", "db", "kw", "kd", "kl", "dx")
        text += (f" A through-bore of diameter {p['db']} runs along the whole axis. The collar has a keyway on its +x "
                 f"side: {kw} mm wide (centred on y = 0), {num(kd)} mm deep measured from the collar's surface, and "
                 f"{kl} mm long, centred on the collar's mid-length. A cross hole of diameter {p['dx']} passes "
                 f"through the bottom journal along y, through the axis, at the middle of the journal's length.")
        lines += [f"cutters = [translate(cylinder(total + 2, {num(p['db'] / 2)}), (0, 0, -1))]",
                  "# The keyway: a box sunk from the collar's +x surface, centred on the collar's mid-length.",
                  f"cutters.append(translate(box(({num(kd + 1)}, {kw}, {kl})), ({num(dm / 2 - kd)}, {num(-kw / 2)}, {num(mid - kl / 2)})))",
                  "# The cross hole runs along y through the axis at the bottom journal's mid-length.",
                  f"cutters.append(translate(cylinder({dj + 2}, {num(p['dx'] / 2)}, axis=\"y\"), (0, {num(-dj / 2 - 1)}, lj / 2)))"]
    lines += ["part = difference(body, cutters)", "save(part)"]
    return Part("shaft", text, program("\n".join(lines)), tuple(features), {k: p[k] for k in used})


def stack(rng: random.Random, difficulty: str) -> Part:
    """A coaxial washer stack: explicit (easy), a tapering stack (medium), or washers and spacers with a flat and dowel holes (hard)."""
    bore = rng.randrange(4, 17, 2)
    if difficulty == "hard":
        return _spacer_stack(rng, bore)
    if difficulty == "easy":
        n = rng.randint(3, 5)
        thick = [rng.choice([1.5, 2, 2.5, 3, 4, 5, 6]) for _ in range(n)]
        ods = [rng.randrange(bore + 10, 61, 2)]
        while len(ods) < n:
            ods.append(rng.choice([d for d in range(bore + 10, 61, 2) if abs(d - ods[-1]) >= 4]))
    else:
        n, t, step = rng.randint(3, 6), rng.choice([1.5, 2, 2.5, 3, 4, 5]), rng.randint(3, 12)
        thick = [t] * n
        top = bore + 2 * rng.randint(3, 8)
        ods = [top + step * (n - 1 - i) for i in range(n)]
    zs = [sum(thick[:i]) for i in range(n + 1)]
    features = [add(f"washer_{i + 1}", translate(cylinder(thick[i], ods[i] / 2), (0, 0, zs[i]))) for i in range(n)]
    features.append(cut("bore", translate(cylinder(zs[-1] + 2, bore / 2), (0, 0, -1))))
    if difficulty == "easy":
        layers = listing([f"z = {num(zs[i])} to {num(zs[i + 1])} with outer diameter {ods[i]}" for i in range(n)])
        text = (f"Model a stack of coaxial washers on the z axis, each directly on the one below: {layers}. "
                f"A through-bore of diameter {bore} runs through all of them on the axis.")
        # As the text gives them: each washer's bottom and top, then the bore; Python takes the differences.
        code = program(f"""
layers = {points([(zs[i], zs[i + 1], ods[i]) for i in range(n)])}  # (bottom z, top z, outer diameter)
washers = union([translate(cylinder(top - z, d / 2), (0, 0, z)) for z, top, d in layers])
bore = translate(cylinder({num(zs[-1])} + 2, {bore} / 2), (0, 0, -1))
part = difference(washers, bore)
save(part)
""")
    else:
        text = (f"Model a stack of {n} coaxial washers on the z axis, each {num(thick[0])} mm thick, the bottom one "
                f"standing on z = 0 and each resting directly on the one below. The bottom washer's outer diameter is "
                f"{ods[0]}, and each washer's outer diameter is {ods[0] - ods[1]} mm smaller than the one below it. "
                f"All share a through-bore of diameter {bore}.")
        code = program(f"""
layers = {[(zs[i], thick[i], ods[i]) for i in range(n)]}  # (bottom z, thickness, outer diameter)
washers = union([translate(cylinder(t, d / 2), (0, 0, z)) for z, t, d in layers])
part = difference(washers, translate(cylinder({num(zs[-1] + 2)}, {num(bore / 2)}), (0, 0, -1)))
save(part)
""")
    return Part("stack", text, code, tuple(features), {"bore": bore, "thick": thick, "ods": ods})


def _spacer_stack(rng: random.Random, bore: int) -> Part:
    def draw():
        p = {"nb": rng.randint(2, 4), "tb": rng.choice([1.5, 2, 2.5, 3, 4]), "ts": rng.randint(3, 10),
             "ods": rng.randrange(bore + 12, bore + 31, 2), "dd": rng.choice([2, 2.5, 3, 4, 5])}
        p["odb"] = p["ods"] + 2 * rng.randint(4, 12)
        p["ring"] = (bore / 2 + p["ods"] / 2) / 2
        p["flat"] = rng.randrange(math.ceil(p["ods"] / 2) + 1, p["odb"] // 2 - 2)
        return p

    p = sample(draw, lambda p: p["ring"] - p["dd"] / 2 >= bore / 2 + 1.5 and p["ring"] + p["dd"] / 2 + 1.5 <= p["ods"] / 2)
    nb, tb, ts, odb, ods, flat = p["nb"], p["tb"], p["ts"], p["odb"], p["ods"], p["flat"]
    layers, z = [], 0
    for i in range(2 * nb - 1):
        t, d = (tb, odb) if i % 2 == 0 else (ts, ods)
        layers.append((z, t, d))
        z += t
    height = z
    features = [add(f"{'washer' if i % 2 == 0 else 'spacer'}_{i // 2 + 1}", translate(cylinder(t, d / 2), (0, 0, z)))
                for i, (z, t, d) in enumerate(layers)]
    features += [cut("bore", translate(cylinder(height + 2, bore / 2), (0, 0, -1))),
                 cut("flat", translate(box((odb / 2 - flat + 1, odb + 2, height + 2)), (flat, -odb / 2 - 1, -1)))]
    features += [cut(f"dowel_hole_{i + 1}", translate(cylinder(height + 2, p["dd"] / 2), (0, y, -1)))
                 for i, y in enumerate((p["ring"], -p["ring"]))]
    text = (f"Model a spacer stack on the z axis standing on z = 0: {nb} washers of outer diameter {odb}, {num(tb)} mm "
            f"thick, alternating with {nb - 1} spacers of outer diameter {ods}, {ts} mm thick, starting and ending "
            f"with a washer, each piece resting directly on the one below. A through-bore of diameter {bore} runs "
            f"along the axis. An anti-rotation flat at x = {flat} removes everything beyond it (x > {flat}) over the "
            f"whole height. Two dowel holes of diameter {num(p['dd'])} run through the whole stack on the y axis, on both "
            f"sides of the bore, each centred midway between the bore's edge and the spacers' rim.")
    code = program(f"""
layers = []
z = 0
for i in range({2 * nb - 1}):
    # Washers on even layers, spacers between them.
    t, d = ({tb}, {odb}) if i % 2 == 0 else ({ts}, {ods})
    layers.append(translate(cylinder(t, d / 2), (0, 0, z)))
    z += t
cutters = [translate(cylinder(z + 2, {num(bore / 2)}), (0, 0, -1))]
# The flat: a box covering everything beyond x = {flat}.
cutters.append(translate(box(({num(odb / 2 - flat + 1)}, {odb + 2}, z + 2)), ({flat}, {num(-odb / 2 - 1)}, -1)))
ring = ({num(bore / 2)} + {num(ods / 2)}) / 2
for y in (ring, -ring):
    cutters.append(translate(cylinder(z + 2, {num(p['dd'] / 2)}), (0, y, -1)))
part = difference(union(layers), cutters)
save(part)
""")
    return Part("stack", text, code, tuple(features), {"bore": bore, **p})
