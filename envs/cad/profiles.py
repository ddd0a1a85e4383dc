"""Part families extruded from a 2-D profile: channels and T-slot bars along x, and gear-like star plates."""
from __future__ import annotations

import math
import random

from jointrl.envs.cad.kit.csg import box, cylinder, prism, rotate, translate, union
from jointrl.envs.cad.part import Part, add, cut, listing, num, point, points, polar, program, sample


def channel(rng: random.Random, difficulty: str) -> Part:
    """A bar extruded along x: a U-channel from explicit vertices, a lipped C-channel, or a four-slot T-slot bar."""
    length = rng.randrange(60, 201, 5)
    if difficulty == "hard":
        return _tslot(rng, length)
    if difficulty == "easy":
        b, h, t, tb = rng.randrange(24, 81, 2), rng.randrange(16, 51, 2), rng.randint(2, 6), rng.randint(2, 6)
        profile = [(0, 0), (b, 0), (b, h), (b - t, h), (b - t, tb), (t, tb), (t, h), (0, h)]
        params = {"length": length, "b": b, "h": h, "t": t, "tb": tb}
        # The base and the two walls, each its own feature.
        features = (add("base", box((length, b, tb))), add("wall_1", box((length, t, h))),
                    add("wall_2", translate(box((length, t, h)), (0, b - t, 0))))
        text = (f"Model a straight U-channel extruded along x from x = 0 to x = {length}. Its cross-section in the "
                f"(y, z) plane is the polygon with vertices (y, z) = {listing([point(*v) for v in profile])}, "
                f"in that order.")
    else:
        p = sample(lambda: {"b": rng.randrange(24, 81, 2), "h": rng.randrange(16, 51, 2),
                            "t": rng.randint(2, 5), "c": rng.randint(4, 12)},
                   lambda p: p["b"] - 2 * (p["t"] + p["c"]) >= 6 and p["h"] - 2 * p["t"] >= 6)
        b, h, t, c = p["b"], p["h"], p["t"], p["c"]
        params = {"length": length, **p}
        features = (add("base", box((length, b, t))), add("wall_1", box((length, t, h))),
                    add("wall_2", translate(box((length, t, h)), (0, b - t, 0))),
                    add("lip_1", translate(box((length, t + c, t)), (0, 0, h - t))),
                    add("lip_2", translate(box((length, t + c, t)), (0, b - t - c, h - t))))
        profile = [(0, 0), (b, 0), (b, h), (b - t - c, h), (b - t - c, h - t), (b - t, h - t), (b - t, t), (t, t),
                   (t, h - t), (t + c, h - t), (t + c, h), (0, h)]
        text = (f"Model a straight lipped C-channel extruded along x from x = 0 to x = {length}. Its cross-section "
                f"fills 0 <= y <= {b}, 0 <= z <= {h} around an open interior: the base (along z = 0) and the two side "
                f"walls are {t} mm thick, and at the top of each side wall a lip {t} mm thick, flush with the top "
                f"face, reaches {c} mm inward from the wall's inner face, leaving the channel open between the lips.")
    code = program(f"""
# Axis-x prisms take (y, z) points and run from x = 0 to the given length.
profile = {points(profile)}
part = prism(profile, {length}, axis="x")
save(part)
""")
    return Part("channel", text, code, features, params)


def _tslot(rng: random.Random, length: int) -> Part:
    def draw():
        p = {"s": rng.randrange(24, 61, 2), "n": rng.randint(2, 5), "k": rng.randint(3, 7), "a": rng.randint(5, 10),
             "d": rng.randint(4, 12)}
        p["c"] = p["a"] + 2 * rng.randint(2, 6)
        return p

    def sound(p):
        # Cavities of neighbouring faces and the bore must all stay apart.
        core = p["s"] / 2 - p["n"] - p["k"]
        return p["c"] / 2 + 1.5 <= core and p["d"] / 2 + 1.5 <= core

    p = sample(draw, sound)
    s, n, k, a, c, d = p["s"], p["n"], p["k"], p["a"], p["c"], p["d"]
    half = s / 2
    slot = union(translate(box((length + 2, a, n + 1)), (-1, half - a / 2, s - n)),
                 translate(box((length + 2, c, k)), (-1, half - c / 2, s - n - k)))
    features = [add("bar", box((length, s, s))), cut("bore", translate(cylinder(length + 2, d / 2, axis="x"), (-1, half, half)))]
    features += [cut(f"slot_{i + 1}", translate(rotate(translate(slot, (0, -half, -half)), (90 * i, 0, 0)), (0, half, half)))
                 for i in range(4)]
    text = (f"Model a square T-slot bar occupying 0 <= x <= {length}, 0 <= y <= {s}, 0 <= z <= {s}. Each of its four "
            f"long faces has a T-slot running the full length, centred on the face: an opening {a} mm wide and {n} mm "
            f"deep, widening beneath it into a cavity {c} mm wide and {k} mm deep (centred on the opening). A "
            f"through-bore of diameter {d} runs along the bar's central axis.")
    code = program(f"""
length, s = {length}, {s}
bar = box((length, s, s))
# One T-slot in the top face: the narrow opening over the wider cavity, overshooting both ends.
opening = translate(box((length + 2, {a}, {n + 1})), (-1, {num(half - a / 2)}, {s - n}))
cavity = translate(box((length + 2, {c}, {k})), (-1, {num(half - c / 2)}, {s - n - k}))
slot = union(opening, cavity)
cutters = [translate(cylinder(length + 2, {num(d / 2)}, axis="x"), (-1, {num(half)}, {num(half)}))]
for i in range(4):
    # Turn the top slot about the bar's axis (y = z = {num(half)}) onto each face.
    centred = translate(slot, (0, -{num(half)}, -{num(half)}))
    cutters.append(translate(rotate(centred, (90 * i, 0, 0)), (0, {num(half)}, {num(half)})))
part = difference(bar, cutters)
save(part)
""")
    return Part("channel", text, code, tuple(features), {"length": length, **p})


def star(rng: random.Random, difficulty: str) -> Part:
    """A gear-like star prism with a bore; medium adds lightening holes, hard a hub boss and a keyway too."""
    def draw():
        p = {"n": rng.randint(5, 16), "tip": rng.randint(20, 45), "depth": rng.randint(3, 9),
             "h": rng.randint(4, 12), "bore": rng.randrange(6, 17, 2), "m": rng.randint(3, 8),
             "dl": rng.randint(4, 10), "hub": rng.randrange(16, 31, 2), "hh": rng.randint(3, 10),
             "kw": rng.randint(2, 5), "kd": rng.choice([1, 1.5, 2, 2.5, 3])}
        p["root"] = p["tip"] - p["depth"]
        p["rl"] = (p["bore"] / 2 + p["root"]) / 2
        return p

    def sound(p):
        inner = p["hub"] / 2 if difficulty == "hard" else p["bore"] / 2
        return (p["rl"] - p["dl"] / 2 >= inner + 2 and p["rl"] + p["dl"] / 2 <= p["root"] - 2
                and 2 * p["rl"] * math.sin(math.pi / p["m"]) >= p["dl"] + 2 and p["bore"] / 2 + p["kd"] <= p["hub"] / 2 - 2
                and p["kw"] <= p["bore"] - 2)

    p = sample(draw, sound)
    n, tip, root, h, bore, m = p["n"], p["tip"], p["root"], p["h"], p["bore"], p["m"]
    outline = [polar(tip if i % 2 == 0 else root, i * 180 / n) for i in range(2 * n)]
    hub_h = p["hh"] if difficulty == "hard" else 0
    features = [add("star", prism(outline, h))] + ([add("hub", translate(cylinder(hub_h, p["hub"] / 2), (0, 0, h)))] if hub_h else [])
    features.append(cut("bore", translate(cylinder(h + hub_h + 2, bore / 2), (0, 0, -1))))
    holes = [polar(p["rl"], (i + 0.5) * 360 / m) for i in range(m)] if difficulty != "easy" else []
    features += [cut(f"lightening_hole_{i + 1}", translate(cylinder(h + 2, p["dl"] / 2), (x, y, -1))) for i, (x, y) in enumerate(holes)]
    if difficulty == "hard":
        features.append(cut("keyway", translate(box((bore / 2 + p["kd"], p["kw"], h + hub_h + 2)), (0, -p["kw"] / 2, -1))))
    used = ("n", "tip", "depth", "h", "bore") + (("m", "dl") if holes else ()) + (("hub", "hh", "kw", "kd") if hub_h else ())

    if difficulty == "easy":
        tips = listing([num(i * 360 / n) for i in range(n)])
        roots = listing([num((i + 0.5) * 360 / n) for i in range(n)])
        text = (f"Model a gear-like star plate from z = 0 to z = {h}. Its outline is a polygon of {2 * n} vertices "
                f"alternating between tips at radius {tip} (at angles {tips} degrees) and roots at radius {root} (at "
                f"angles {roots} degrees), angles counter-clockwise from the +x axis, joined by straight edges. A "
                f"vertical through-bore of diameter {bore} is centred on the z axis.")
    else:
        text = (f"Model a gear-like star plate {h} mm thick standing on z = 0 and centred on the z axis. It has {n} "
                f"pointed teeth: the tips lie on a circle of diameter {2 * tip}, the roots between them are "
                f"{p['depth']} mm further in, midway in angle between neighbouring tips, with straight flanks from "
                f"tip to root, and one tip points along +x. A through-bore of diameter {bore} is centred on the axis. "
                f"{m} lightening holes of diameter {p['dl']} go through the plate, evenly spaced on the circle midway "
                f"between the bore's edge and the root circle, the first half a spacing counter-clockwise from +x.")
        if difficulty == "hard":
            text += (f" A round hub of diameter {p['hub']} rises {hub_h} mm from the top face, coaxial with the bore, "
                     f"and the bore runs through it too. A keyway {p['kw']} mm wide, centred on the +x direction, "
                     f"is cut into the bore's wall along its full length, reaching {num(p['kd'])} mm beyond the "
                     f"bore's radius.")
    lines = [f"n, tip, root, h = {n}, {tip}, {root}, {h}",
             "outline = []",
             "for i in range(2 * n):",
             "    r = tip if i % 2 == 0 else root",
             "    a = math.radians(i * 180 / n)",
             "    outline.append((r * math.cos(a), r * math.sin(a)))",
             "body = prism(outline, h)"]
    if hub_h:
        lines.append(f"body = union(body, translate(cylinder({hub_h}, {num(p['hub'] / 2)}), (0, 0, h)))")
    lines.append(f"cutters = [translate(cylinder(h + {hub_h + 2}, {num(bore / 2)}), (0, 0, -1))]")
    if holes:
        lines += ["# Lightening holes sit midway between the bore's edge and the root circle.",
                  f"ring = ({num(bore / 2)} + root) / 2",
                  f"for i in range({m}):",
                  f"    a = math.radians((i + 0.5) * 360 / {m})",
                  f"    cutters.append(translate(cylinder(h + 2, {num(p['dl'] / 2)}), (ring * math.cos(a), ring * math.sin(a), -1)))"]
    if difficulty == "hard":
        lines += ["# The keyway: a box from the axis out past the bore on the +x side.",
                  f"cutters.append(translate(box(({num(bore / 2 + p['kd'])}, {p['kw']}, h + {hub_h + 2})), (0, {num(-p['kw'] / 2)}, -1)))"]
    lines += ["part = difference(body, cutters)", "save(part)"]
    return Part("star", text, program("\n".join(lines)), tuple(features), {k: p[k] for k in used})
