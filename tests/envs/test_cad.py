"""CAD domain: the CSG API, part files, IoU, generated parts checked against their own descriptions, feature scoring.

Expected volumes come from formulas over numbers parsed out of the task text (a 32-gon of radius r has
area 16 r^2 sin(pi/16)), and expected solids are built with manifold3d directly, not through the code
under test.
"""
import io
import json
import math
import re

import manifold3d
import numpy as np
import pytest

from jointrl.envs import registry
from jointrl.envs.cad import FAMILIES, LONG_FAMILIES
from jointrl.envs.cad.kit import csg, mesh_io
from jointrl.envs.cad.families import FAMILIES as GENERATORS, LONG_FAMILIES as LONG_GENERATORS, make_part
from jointrl.envs.cad.measure import iou, measure
from jointrl.envs.cad.part import DIFFICULTIES
from jointrl.envs.cad.prompt import FEATURE_MATCH, IOU_THRESHOLD
from jointrl.envs.cad.verify import score

M = manifold3d.Manifold
SEEDS = range(6)


def gon(r: float) -> float:
    """Area of the 32-gon inscribed in a circle of radius r."""
    return 16 * r * r * math.sin(2 * math.pi / 32)


def nums(pattern: str, text: str) -> list[float]:
    match = re.search(pattern, text)
    assert match, (pattern, text)
    return [float(g) for g in match.groups()]


def pairs(text: str) -> list[tuple[float, float]]:
    return [(float(a), float(b)) for a, b in re.findall(r"\((-?[\d.]+), (-?[\d.]+)\)", text)]


def rod(height: float, r: float, x: float, y: float) -> M:
    return M.cylinder(height + 2, r, -1.0, 32).translate((x, y, -1))


# The CSG API.

def test_primitives_have_their_analytic_volumes():
    assert csg.volume(csg.box((3, 4, 5))) == pytest.approx(60)
    assert csg.volume(csg.cylinder(10, 2)) == pytest.approx(gon(2) * 10)
    assert csg.volume(csg.cylinder(10, 2)) == pytest.approx(math.pi * 4 * 10, rel=7e-3)
    hexagon = csg.regular_prism(6, 5, 2)
    assert csg.volume(hexagon) == pytest.approx(3 * math.sqrt(3) / 2 * 25 * 2)
    assert csg.bounding_box(hexagon)[1][0] == pytest.approx(5)  # a vertex on +x


def test_axes_map_in_plane_coordinates_right_handed():
    (lo, hi) = csg.bounding_box(csg.cylinder(7, 1, axis="x"))
    assert lo == pytest.approx((0, -1, -1)) and hi == pytest.approx((7, 1, 1))
    # Axis-y prisms take (z, x) points: a thin strip along a, from 0 to 4 in z, 1 thick in x.
    lo, hi = csg.bounding_box(csg.prism([(0, 0), (4, 0), (4, 1), (0, 1)], 3, axis="y"))
    assert lo == pytest.approx((0, 0, 0)) and hi == pytest.approx((1, 3, 4))
    lo, hi = csg.bounding_box(csg.prism([(0, 0), (4, 0), (4, 1), (0, 1)], 3, axis="x"))
    assert lo == pytest.approx((0, 0, 0)) and hi == pytest.approx((3, 4, 1))


def test_rotate_is_about_x_then_z_and_revolve_sweeps_towards_y():
    # (a, b, c) -> x turn -> (a, -c, b) -> z turn -> (c, a, b): a box 1 x 2 x 3 becomes 3 x 1 x 2.
    lo, hi = csg.bounding_box(csg.rotate(csg.box((1, 2, 3)), (90, 0, 90)))
    assert np.subtract(hi, lo) == pytest.approx((3, 1, 2))
    quarter = csg.revolve([(1, 0), (2, 0), (2, 1), (1, 1)], 90)
    lo, hi = csg.bounding_box(quarter)
    assert lo == pytest.approx((0, 0, 0), abs=1e-9) and hi == pytest.approx((2, 2, 1))


def test_polygon_holes_and_orientation():
    square = [(0, 0), (10, 0), (10, 10), (0, 10)]
    assert csg.volume(csg.prism(square[::-1], 2)) == pytest.approx(200)  # clockwise still fills
    framed = csg.prism(square, 2, holes=[[(2, 2), (8, 2), (8, 8), (2, 8)]])
    assert csg.volume(framed) == pytest.approx(200 - 72)
    assert measure(framed).genus == 1


def test_booleans_accept_lists_and_bad_input_is_named():
    parts = [csg.translate(csg.box((1, 1, 1)), (2 * i, 0, 0)) for i in range(3)]
    assert csg.volume(csg.union(parts)) == pytest.approx(3)
    assert csg.volume(csg.difference(csg.box((6, 1, 1)), parts)) == pytest.approx(3)
    assert csg.volume(csg.intersection(csg.box((2, 2, 2)), csg.translate(csg.box((2, 2, 2)), (1, 1, 1)))) == pytest.approx(1)
    with pytest.raises(ValueError, match="box size"):
        csg.box((1, -2, 3))
    with pytest.raises(ValueError, match="axis"):
        csg.cylinder(1, 1, axis="w")
    with pytest.raises(TypeError, match="expected a solid"):
        csg.union(csg.box((1, 1, 1)), 3)


# Part files.

def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def test_part_file_round_trip_and_triangle_soup():
    shape = csg.difference(csg.box((4, 4, 2)), csg.translate(csg.cylinder(4, 1), (2, 2, -1)))
    back = mesh_io.read(mesh_io.encode(shape))
    assert iou(back, shape) == pytest.approx(1, abs=1e-12)
    mesh = shape.to_mesh64()
    soup = np.asarray(mesh.vert_properties)[np.asarray(mesh.tri_verts).reshape(-1)]
    merged = mesh_io.read(_npz(vertices=soup, triangles=np.arange(len(soup)).reshape(-1, 3)))
    assert merged.volume() == pytest.approx(shape.volume())


@pytest.mark.parametrize("defect, message", [
    ("open", "not a closed"), ("inside_out", "inside out"), ("nan", "finite"), ("index", "indices"),
    ("missing", "lacks"), ("not_zip", "not an .npz"), ("objects", "cannot be read"), ("shape", r"\[V, 3\]"),
])
def test_defective_part_files_are_rejected_with_a_reason(defect, message):
    mesh = csg.box((1, 2, 3)).to_mesh64()
    v, t = np.asarray(mesh.vert_properties[:, :3]), np.asarray(mesh.tri_verts).astype(np.int64)
    data = {
        "open": lambda: _npz(vertices=v, triangles=t[:-1]),
        "inside_out": lambda: _npz(vertices=v, triangles=t[:, ::-1]),
        "nan": lambda: _npz(vertices=np.where(v == v.max(), np.nan, v), triangles=t),
        "index": lambda: _npz(vertices=v, triangles=t + 1),
        "missing": lambda: _npz(vertices=v),
        "not_zip": lambda: b"solid part\nendsolid",
        "objects": lambda: _npz(vertices=np.array([v], dtype=object), triangles=t),
        "shape": lambda: _npz(vertices=v[:, :2], triangles=t),
    }[defect]()
    with pytest.raises(mesh_io.MeshError, match=message):
        mesh_io.read(data)


# IoU and measurement.

def test_iou_against_hand_computed_overlaps():
    a = M.cube((2, 1, 1))
    assert iou(a, a) == pytest.approx(1)
    assert iou(a, a.translate((5, 0, 0))) == 0
    assert iou(a, a.translate((1, 0, 0))) == pytest.approx(1 / 3)  # overlap 1, union 3
    assert iou(M.cube((4, 4, 4)), M.cube((2, 2, 2)).translate((1, 1, 1))) == pytest.approx(8 / 64)


def test_measure_counts_bodies_and_holes():
    plate = M.batch_boolean([M.cube((30, 10, 2))] + [rod(2, 1.5, 5 + 10 * i, 5) for i in range(3)], manifold3d.OpType.Subtract)
    two = M.batch_boolean([plate, plate.translate((0, 20, 0))], manifold3d.OpType.Add)
    m = measure(two)
    assert (m.components, m.genus) == (2, 6)
    assert m.volume == pytest.approx(2 * (600 - 3 * gon(1.5) * 2))
    assert m.bbox_max == pytest.approx((30, 30, 2))


# Generated parts agree with their descriptions.

@pytest.mark.parametrize("difficulty", ["easy", "medium"])
@pytest.mark.parametrize("seed", SEEDS)
def test_plate_volume_is_block_minus_holes(seed, difficulty):
    part = make_part("plate", difficulty, seed)
    if difficulty == "easy":
        w, d, t = nums(r"0 <= x <= ([\d.]+), 0 <= y <= ([\d.]+), 0 <= z <= ([\d.]+)", part.text)
        (dia,) = nums(r"diameter ([\d.]+)", part.text)
        centres = pairs(part.text.split("(x, y) =")[1])
    else:
        w, d, t = nums(r"([\d.]+) mm long \(x\), ([\d.]+) mm wide \(y\) and ([\d.]+) mm thick", part.text)
        nx, ny, dia, e = nums(r"grid of (\d+) x (\d+) .* diameter ([\d.]+): .* are ([\d.]+) mm from", part.text)
        centres = [(e + i * (w - 2 * e) / (nx - 1), e + j * (d - 2 * e) / (ny - 1)) for i in range(int(nx)) for j in range(int(ny))]
    n, r = len(centres), dia / 2
    assert part.target.volume() == pytest.approx(w * d * t - n * gon(r) * t, rel=1e-9)
    assert part.target.volume() == pytest.approx(w * d * t - n * math.pi * r * r * t, rel=5e-3)
    expected = M.batch_boolean([M.cube((w, d, t))] + [rod(t, r, x, y) for x, y in centres], manifold3d.OpType.Subtract)
    assert iou(part.target, expected) == pytest.approx(1, abs=1e-9)
    assert measure(part.target).genus == n


@pytest.mark.parametrize("seed", SEEDS)
def test_flange_easy_is_disc_minus_bore_and_bolt_holes(seed):
    part = make_part("flange", "easy", seed)
    od, t, bore, k, dh = nums(r"diameter ([\d.]+) from z = 0 to z = ([\d.]+).*diameter ([\d.]+) and (\d+) through-holes of diameter ([\d.]+)", part.text)
    centres = pairs(part.text.split("(x, y) =")[1])
    assert len(centres) == k
    assert part.target.volume() == pytest.approx((gon(od / 2) - gon(bore / 2) - k * gon(dh / 2)) * t, rel=1e-9)
    expected = M.batch_boolean([M.cylinder(t, od / 2, -1.0, 32), rod(t, bore / 2, 0, 0)] + [rod(t, dh / 2, x, y) for x, y in centres],
                               manifold3d.OpType.Subtract)
    # The text rounds coordinates to 0.001 mm, so the overlap is exact only to that.
    assert iou(part.target, expected) > 1 - 1e-4


@pytest.mark.parametrize("seed", SEEDS)
def test_stepped_shaft_and_washer_stack_volumes(seed):
    shaft = make_part("shaft", "easy", seed)
    steps = [tuple(map(float, s)) for s in re.findall(r"from z = ([\d.]+) to z = ([\d.]+) diameter ([\d.]+)", shaft.text)]
    assert shaft.target.volume() == pytest.approx(sum((z1 - z0) * gon(d / 2) for z0, z1, d in steps), rel=1e-9)
    assert measure(shaft.target).bbox_max[2] == pytest.approx(steps[-1][1])
    stack = make_part("stack", "easy", seed)
    layers = [tuple(map(float, s)) for s in re.findall(r"z = ([\d.]+) to ([\d.]+) with outer diameter ([\d.]+)", stack.text)]
    (bore,) = nums(r"through-bore of diameter ([\d.]+)", stack.text)
    height = layers[-1][1]
    assert stack.target.volume() == pytest.approx(sum((z1 - z0) * gon(d / 2) for z0, z1, d in layers) - gon(bore / 2) * height, rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_channel_easy_is_profile_area_times_length(seed):
    part = make_part("channel", "easy", seed)
    (length,) = nums(r"from x = 0 to x = ([\d.]+)", part.text)
    profile = np.array(pairs(part.text.split("(y, z) =")[1]))
    shoelace = 0.5 * abs(np.dot(profile[:, 0], np.roll(profile[:, 1], -1)) - np.dot(profile[:, 1], np.roll(profile[:, 0], -1)))
    assert part.target.volume() == pytest.approx(shoelace * length, rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_pocket_medium_and_nut_easy_volumes(seed):
    part = make_part("pocket", "medium", seed)
    l, w, h = nums(r"0 <= x <= ([\d.]+), 0 <= y <= ([\d.]+), 0 <= z <= ([\d.]+)", part.text)
    wall, floor = nums(r"walls ([\d.]+) mm thick all round and a floor ([\d.]+) mm thick", part.text)
    assert part.target.volume() == pytest.approx(l * w * h - (l - 2 * wall) * (w - 2 * wall) * (h - floor))
    nut = make_part("nut", "easy", seed)
    (h,) = nums(r"z = 0 to z = ([\d.]+)", nut.text)
    s, bore = nums(r"\(([\d.]+) mm across the flats\), with a through-bore of diameter ([\d.]+)", nut.text)
    hexagon = 3 * math.sqrt(3) / 2 * (s / math.sqrt(3)) ** 2
    assert nut.target.volume() == pytest.approx((hexagon - gon(bore / 2)) * h, rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_bracket_easy_is_two_plates_minus_holes(seed):
    part = make_part("bracket", "easy", seed)
    l, w, t, h = nums(r"0 <= x <= ([\d.]+), 0 <= y <= ([\d.]+), 0 <= z <= ([\d.]+); its upright plate occupies 0 <= x <= [\d.]+, "
                      r"0 <= y <= [\d.]+, 0 <= z <= ([\d.]+)", part.text)
    db, du = nums(r"diameter ([\d.]+) centred at \(x, y\).*diameter ([\d.]+) centred at \(y, z\)", part.text)
    base = pairs(part.text.split("(x, y) =")[1].split("The upright")[0])
    upright = pairs(part.text.split("(y, z) =")[1])
    solid = l * w * t + t * w * (h - t)
    assert part.target.volume() == pytest.approx(solid - t * (len(base) * gon(db / 2) + len(upright) * gon(du / 2)), rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_elbow_easy_follows_pappus(seed):
    part = make_part("elbow", "easy", seed)
    od, wall, rb = nums(r"outer diameter ([\d.]+) and wall thickness ([\d.]+);.*radius ([\d.]+)", part.text)
    ro, ri = od / 2, od / 2 - wall
    # Pappus: a quarter turn of the annulus about the axis at its centroid's radius; the sweep is 8 chords.
    assert part.target.volume() == pytest.approx((gon(ro) - gon(ri)) * math.pi / 2 * rb, rel=1e-2)
    assert measure(part.target).genus == 1


HOLES = {
    # family: through-holes the hard description calls for, counted from its text.
    "plate": lambda text: 1 + 4 + int(nums(r"; (\d+) through-holes", text)[0]),
    "flange": lambda text: 1 + int(nums(r"(\d+) bolt holes", text)[0]),
    "star": lambda text: 1 + int(nums(r"(\d+) lightening holes", text)[0]),
    "elbow": lambda text: 1 + 2 * 4,
    "shaft": lambda text: 1 + 2,  # the bore, and a cross hole through a bored journal crosses it twice
    "stack": lambda text: 1 + 2,
    "pocket": lambda text: int(nums(r"into (\d+) equal", text)[0]),
    "bracket": lambda text: 2 + 1,
    "channel": lambda text: 1,
    "nut": lambda text: 1,  # the castle slots are open at the top
}


def test_every_family_is_registered_at_every_difficulty():
    assert set(FAMILIES) == set(GENERATORS) == set(HOLES) and len(FAMILIES) >= 8
    assert set(LONG_FAMILIES) == set(LONG_GENERATORS)
    ids = registry.env_ids("cad/*")
    assert ids == sorted([f"cad/{f}-v0:{d}" for f in FAMILIES for d in DIFFICULTIES] + [f"cad/{f}-v0:long" for f in LONG_FAMILIES])
    for env_id in ids:
        spec = registry.spec(env_id)
        assert spec.kwargs["family"] in {**FAMILIES, **LONG_FAMILIES} and str(IOU_THRESHOLD) in spec.description
    with pytest.raises(ValueError, match="only at difficulty 'long'"):
        make_part("fixture", "easy", 0)
    with pytest.raises(ValueError, match="unknown CAD part family"):
        make_part("gearbox", "easy", 0)


@pytest.mark.parametrize("family", sorted(GENERATORS))
def test_parts_are_deterministic_distinct_and_hard_has_its_holes(family):
    for seed in SEEDS:
        a, b = make_part(family, "hard", seed), make_part(family, "hard", seed)
        assert (a.text, a.program) == (b.text, b.program) and iou(a.target, b.target) == pytest.approx(1)
        m = measure(a.target)
        assert m.components == 1 and m.genus == HOLES[family](a.text), (family, seed, a.text)
        texts = {make_part(family, d, seed).text for d in DIFFICULTIES}
        assert len(texts) == 3
    assert len({make_part(family, "medium", s).text for s in SEEDS}) >= 3


NUMBER = r"-?\d+(?:\.\d+)?"
DATA_LINE = {"channel": "profile = ", "shaft": "sections = ", "stack": "layers = ", "pocket": "x0, x1, y0, y1, z0, z1 = "}


@pytest.mark.parametrize("family", sorted(DATA_LINE))
def test_easy_programs_copy_the_texts_numbers_in_order(family):
    # A small policy learns a copy far sooner than arithmetic: the demo's data line must be a run of the text's numbers.
    for seed in range(30):
        part = make_part(family, "easy", seed)
        line = next(row for row in part.program.splitlines() if row.startswith(DATA_LINE[family]))
        copied = re.findall(NUMBER, line.split("=", 1)[1].split("#")[0])
        text = re.findall(NUMBER, part.text)
        assert any(text[i:i + len(copied)] == copied for i in range(len(text))), (family, seed, copied, part.text)

# The env, through the sandbox.

def _call(env, name, **arguments):
    return env.step({"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}})


@pytest.fixture
def plate_env():
    env = registry.make("cad/plate-v0:easy")
    env.reset(3)
    yield env
    env.close()


def test_a_part_missing_one_hole_fails_on_topology(plate_env):
    # Drop the last hole from the reference program: the IoU stays high but the genus is one short.
    code = plate_env.part.program.replace("part = difference(plate, holes)", "part = difference(plate, holes[:-1])")
    assert "holes[:-1]" in code
    assert "Saved a valid solid" in _call(plate_env, "run_program", code=code).content
    assert _call(plate_env, "submit").done
    signals = plate_env.signals()
    assert signals["iou"] > 0.95 and signals["topology_match"] == 0 and signals["success"] == 0


def test_a_shifted_part_fails_on_iou(plate_env):
    code = plate_env.part.program.replace("save(part)", "save(translate(part, (2, 0, 0)))")
    _call(plate_env, "run_program", code=code)
    _call(plate_env, "submit")
    signals = plate_env.signals()
    assert signals["topology_match"] == 1 and signals["iou"] < IOU_THRESHOLD and signals["success"] == 0


def test_crashes_invalid_files_and_stale_parts_are_reported(plate_env):
    crashed = _call(plate_env, "run_program", code="raise SystemExit('no luck')")
    assert "no luck" in crashed.content and "No part was saved" in crashed.content and crashed.error is None
    assert _call(plate_env, "measure").error is not None
    assert _call(plate_env, "submit").error is not None
    open_box = ("import numpy as np\nfrom cadkit import box\nm = box((1, 1, 1)).to_mesh64()\n"
                "np.savez('part.npz', vertices=m.vert_properties, triangles=m.tri_verts[:-1])")
    assert "not a valid solid" in _call(plate_env, "run_program", code=open_box).content
    assert "valid: no" in _call(plate_env, "measure").content and plate_env.signals()["valid"] == 0
    _call(plate_env, "run_program", code=plate_env.part.program)
    after = _call(plate_env, "run_program", code="print('x' * 100000)")
    assert len(after.content) < 5000 and "still the current one" in after.content
    assert "genus (through-holes)" in _call(plate_env, "measure").content
    assert _call(plate_env, "submit").done and plate_env.signals()["success"] == 1


def test_signals_score_the_submitted_solid_not_the_workspace(plate_env):
    _call(plate_env, "run_program", code=plate_env.part.program)
    _call(plate_env, "submit")
    _call(plate_env, "run_program", code="from cadkit import box, save\nsave(box((1, 1, 1)))")
    assert plate_env.signals()["success"] == 1 and plate_env.signals()["iou"] == pytest.approx(1)
    assert _call(plate_env, "submit").error is not None  # one submission per episode


def test_load_reads_back_what_save_wrote(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shape = csg.difference(csg.box((4, 4, 2)), csg.translate(csg.cylinder(4, 1), (2, 2, -1)))
    csg.save(shape, "kept.npz")
    assert iou(csg.load("kept.npz"), shape) == pytest.approx(1, abs=1e-12)
    with pytest.raises(ValueError, match="no saved solid"):
        csg.load("missing.npz")


# Every feature is checked where it acts.

IDS = [(family, difficulty) for family in sorted(GENERATORS) for difficulty in DIFFICULTIES] + [(f, "long") for f in LONG_GENERATORS]


def _without(part, left_out):
    """The part built with the kit from its features, leaving one out: an independent construction of the shortcut."""
    kept = [f for f in part.features if f is not left_out]
    adds = [f.solid for f in kept if not f.cut]
    cuts = [f.solid for f in kept if f.cut]
    return csg.difference(csg.union(adds), cuts) if adds else None


@pytest.mark.parametrize("family, difficulty", IDS)
def test_leaving_out_any_one_feature_fails_and_the_whole_part_passes(family, difficulty):
    part = make_part(family, difficulty, 0)
    assert score(part, part.target)["success"] == 1 and score(part, part.target)["features_fraction"] == 1
    for feature in part.features:
        shortcut = _without(part, feature)
        if shortcut is None or shortcut.is_empty():
            continue  # leaving out the only added solid leaves nothing to submit
        signals = score(part, shortcut)
        assert signals["success"] == 0 and signals[f"feature/{feature.name}"] == 0, (family, difficulty, feature.name)
        others = [v for k, v in signals.items() if k.startswith("feature/") and k != f"feature/{feature.name}"]
        assert all(v == 1 for v in others), (family, difficulty, feature.name, signals)


def test_a_missing_counterbore_keeps_iou_and_genus_but_fails():
    # The shortcut IoU and genus forgave: a flange with one counterbore left out, built from primitives directly.
    part = make_part("flange", "hard", 0)
    od, t, hub, hub_h, bore, k, dh = nums(r"disc of diameter ([\d.]+) and thickness ([\d.]+), with a coaxial hub of diameter "
                                          r"([\d.]+) rising ([\d.]+) mm.*bore of diameter ([\d.]+).* (\d+) bolt holes of "
                                          r"diameter ([\d.]+)", part.text)
    cb, cbd, recess, rd = nums(r"to diameter ([\d.]+), ([\d.]+) mm deep\. A coaxial recess of diameter ([\d.]+) is cut "
                               r"([\d.]+) mm deep", part.text)
    pcd = (hub + od) / 2
    centres = [(pcd / 2 * math.cos(math.radians(180 / k + i * 360 / k)), pcd / 2 * math.sin(math.radians(180 / k + i * 360 / k)))
               for i in range(int(k))]
    body = M.batch_boolean([M.cylinder(t, od / 2, -1.0, 32), M.cylinder(hub_h, hub / 2, -1.0, 32).translate((0, 0, t))],
                           manifold3d.OpType.Add)
    cutters = [rod(t + hub_h, bore / 2, 0, 0), M.cylinder(rd + 1, recess / 2, -1.0, 32).translate((0, 0, -1))]
    cutters += [rod(t, dh / 2, x, y) for x, y in centres]
    cutters += [M.cylinder(cbd + 1, cb / 2, -1.0, 32).translate((x, y, t - cbd)) for x, y in centres[1:]]
    shortcut = M.batch_boolean([body] + cutters, manifold3d.OpType.Subtract)
    signals = score(part, shortcut)
    assert signals["iou"] >= IOU_THRESHOLD and signals["topology_match"] == 1
    assert signals["feature/counterbore_1"] == 0 and signals["features_fraction"] == pytest.approx(1 - 1 / len(part.features))
    assert signals["success"] == 0
    whole = M.batch_boolean([body] + cutters + [M.cylinder(cbd + 1, cb / 2, -1.0, 32).translate((*centres[0], t - cbd))],
                            manifold3d.OpType.Subtract)
    assert score(part, whole)["success"] == 1


def test_a_hole_of_the_wrong_size_fails_its_feature_and_a_finer_one_passes():
    part = make_part("plate", "easy", 0)
    (w, d, t), (dia,) = nums(r"0 <= x <= ([\d.]+), 0 <= y <= ([\d.]+), 0 <= z <= ([\d.]+)", part.text), nums(r"diameter ([\d.]+)", part.text)
    centres = pairs(part.text.split("(x, y) =")[1])

    def plate(radii, segments=32):
        holes = [M.cylinder(t + 2, r, -1.0, segments).translate((x, y, -1)) for (x, y), r in zip(centres, radii)]
        return M.batch_boolean([M.cube((w, d, t))] + holes, manifold3d.OpType.Subtract)

    radii = [dia / 2] * len(centres)
    # A hole 0.8 times the size leaves 1 - 0.64 = 36% of its region filled: well under the match share.
    assert 1 - 0.64 < FEATURE_MATCH
    small = score(part, plate([0.8 * dia / 2] + radii[1:]))
    assert small["feature/hole_1"] == 0 and small["success"] == 0
    assert score(part, plate(radii, segments=64))["features_fraction"] == 1


# Held-out parts are new parts: neither their parameters nor their solids repeat train seeds.

@pytest.mark.parametrize("family, difficulty", IDS)
def test_held_out_parts_do_not_repeat_train_parts(family, difficulty):
    train = [make_part(family, difficulty, s) for s in range(40)]
    held = [make_part(family, difficulty, 1_000_000 + s) for s in range(40)]
    assert not {p.key() for p in train} & {p.key() for p in held}
    assert len({p.key() for p in train + held}) == 80
    # Replaying train seed i's part on held-out seed i: far from the target.
    for a, b in zip(train[:8], held[:8]):
        assert iou(a.target, b.target) < IOU_THRESHOLD


def test_nut_sizes_vary_beyond_a_short_table():
    sizes = {nums(r"([\d.]+) mm across the flats", make_part("nut", "easy", s).text)[0] for s in range(200)}
    assert len(sizes) >= 40


# The long-horizon tier: a drawing read note by note.

def test_fixture_notes_describe_every_feature():
    for seed in range(5):
        part = make_part("fixture", "long", seed)
        (count,) = nums(r"The drawing has (\d+) numbered notes", part.text)
        assert len(part.notes) == count >= 6 and len(part.steps) == count + 1
        assert all(note.startswith(f"Note {i + 1}: ") for i, note in enumerate(part.notes))
        # Every note's position or size appears in the note, not in the prompt.
        assert not any(note.split(": ", 1)[1] in part.text for note in part.notes)
        assert len(part.features) >= 7 and measure(part.target).components == 1


def test_fixture_demo_reads_every_note_and_builds_the_part_in_ten_or_more_calls():
    env = registry.make("cad/fixture-v0:long")
    try:
        env.reset(1_000_003)
        assert registry.spec("cad/fixture-v0:long").max_turns >= 2 * len(env.part.notes) + 4
        transcript = env.demo()
        calls = [m["tool_calls"][0]["function"] for m in transcript if m.get("tool_calls")]
        assert len(calls) >= 10
        read = sorted(json.loads(c["arguments"])["number"] for c in calls if c["name"] == "read_note")
        assert read == list(range(1, len(env.part.notes) + 1))
        signals = env.signals()
        assert signals["success"] == 1 and signals["features_fraction"] == 1
        assert _call(env, "read_note", number=len(env.part.notes) + 1).error is not None
    finally:
        env.close()


def test_fixture_part_missing_the_last_note_fails():
    env = registry.make("cad/fixture-v0:long")
    try:
        env.reset(5)
        # Every step but the last: the part as it stands before the last note is applied.
        for step in env.part.steps[:-1]:
            assert "Saved a valid solid" in _call(env, "run_program", code=step).content
        assert _call(env, "submit").done
        signals = env.signals()
        assert signals["success"] == 0 and signals["features_fraction"] < 1
    finally:
        env.close()
