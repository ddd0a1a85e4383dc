"""The CSG API that CAD programs import: solids, transforms and booleans over manifold3d, and `save`.

Units are millimetres and every solid is a `manifold3d.Manifold`, so a program may also call manifold3d
directly. Circles are 32-gons with a vertex on the first in-plane axis; targets are built with the same
resolution, so keeping the defaults makes a correct program match its target exactly.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import manifold3d
import numpy as np

from . import mesh_io

__all__ = ["box", "cylinder", "sphere", "circle_points", "prism", "regular_prism", "revolve", "translate", "rotate",
           "mirror", "union", "difference", "intersection", "volume", "bounding_box", "save", "load"]

Shape = manifold3d.Manifold
SEGMENTS = 32
MESH_FILE = mesh_io.MESH_FILE

# Column permutations that carry the solid built along z onto each axis while keeping the frame
# right-handed: the in-plane coordinates (a, b) become (x, y) for z, (y, z) for x and (z, x) for y.
_AXES = {
    "z": ((1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0)),
    "x": ((0, 0, 1, 0), (1, 0, 0, 0), (0, 1, 0, 0)),
    "y": ((0, 1, 0, 0), (0, 0, 1, 0), (1, 0, 0, 0)),
}


def _positive(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number of millimetres, got {value!r}")
    return value


def _vector(name: str, value: Sequence[float], size: int = 3) -> tuple[float, ...]:
    try:
        out = tuple(float(v) for v in value)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of {size} numbers, got {value!r}") from None
    if len(out) != size or not all(math.isfinite(v) for v in out):
        raise ValueError(f"{name} must be {size} finite numbers, got {value!r}")
    return out


def _along(shape: Shape, axis: str) -> Shape:
    if axis not in _AXES:
        raise ValueError(f"axis must be 'x', 'y' or 'z', got {axis!r}")
    return shape if axis == "z" else shape.transform(_AXES[axis])


def _shapes(args: Iterable) -> list[Shape]:
    # union(a, b) and union([a, b]) both read naturally, so accept shapes and lists of shapes alike.
    out: list[Shape] = []
    for item in args:
        if isinstance(item, Shape):
            out.append(item)
        elif isinstance(item, Iterable) and not isinstance(item, (str, bytes)):
            out.extend(_shapes(item))
        else:
            raise TypeError(f"expected a solid (manifold3d.Manifold) or a list of solids, got {type(item).__name__}")
    return out


def _section(points: Sequence[Sequence[float]], holes: Sequence[Sequence[Sequence[float]]]) -> manifold3d.CrossSection:
    contours = [np.asarray(c, dtype=np.float64) for c in [points, *holes]]
    for contour in contours:
        if contour.ndim != 2 or contour.shape[1] != 2 or len(contour) < 3 or not np.isfinite(contour).all():
            raise ValueError("a polygon must be a list of at least 3 finite (a, b) points")
    # Even-odd filling makes each hole a hole whichever way its points run.
    section = manifold3d.CrossSection(contours, manifold3d.FillRule.EvenOdd)
    if section.is_empty():
        raise ValueError("the polygon encloses no area")
    return section


def box(size: Sequence[float], center: bool = False) -> Shape:
    """A box of size (x, y, z) with one corner at the origin, or centred on it when `center`."""
    sx, sy, sz = (_positive("box size", v) for v in _vector("size", size))
    return Shape.cube((sx, sy, sz), center)


def cylinder(height: float, radius: float, top_radius: float | None = None, center: bool = False, axis: str = "z") -> Shape:
    """A cylinder (a cone when `top_radius` differs) from 0 to `height` along `axis`, centred on that axis."""
    height = _positive("height", height)
    radius = _positive("radius", radius)
    top = radius if top_radius is None else float(top_radius)
    if not math.isfinite(top) or top < 0:
        raise ValueError(f"top_radius must be zero or positive, got {top_radius!r}")
    return _along(Shape.cylinder(height, radius, top, SEGMENTS, center), axis)


def sphere(radius: float) -> Shape:
    """A sphere centred on the origin."""
    return Shape.sphere(_positive("radius", radius), SEGMENTS)


def circle_points(radius: float, center: Sequence[float] = (0.0, 0.0)) -> list[tuple[float, float]]:
    """The 32 points of a circle in a plane, counter-clockwise, the first at angle 0."""
    radius = _positive("radius", radius)
    ca, cb = _vector("center", center, 2)
    return [(ca + radius * math.cos(2 * math.pi * i / SEGMENTS), cb + radius * math.sin(2 * math.pi * i / SEGMENTS)) for i in range(SEGMENTS)]


def prism(points: Sequence[Sequence[float]], height: float, axis: str = "z", holes: Sequence = ()) -> Shape:
    """Extrude a polygon (with optional polygonal holes) from 0 to `height` along `axis`.

    The points are in-plane coordinates (a, b): (x, y) for axis z, (y, z) for axis x, (z, x) for axis y.
    """
    return _along(Shape.extrude(_section(points, holes), _positive("height", height)), axis)


def regular_prism(sides: int, circumradius: float, height: float, axis: str = "z") -> Shape:
    """A regular polygon prism centred on `axis`, with a vertex on the first in-plane axis."""
    if not isinstance(sides, int) or sides < 3:
        raise ValueError(f"sides must be an integer of at least 3, got {sides!r}")
    radius = _positive("circumradius", circumradius)
    points = [(radius * math.cos(2 * math.pi * i / sides), radius * math.sin(2 * math.pi * i / sides)) for i in range(sides)]
    return prism(points, height, axis)


def revolve(profile: Sequence[Sequence[float]], degrees: float = 360.0, holes: Sequence = ()) -> Shape:
    """Revolve a profile of (r, z) points (r >= 0) about the z axis, sweeping from +x towards +y."""
    degrees = float(degrees)
    if not 0 < degrees <= 360:
        raise ValueError(f"degrees must be in (0, 360], got {degrees!r}")
    segments = max(1, math.ceil(SEGMENTS * degrees / 360 - 1e-9))
    return Shape.revolve(_section(profile, holes), segments, degrees)


def translate(shape: Shape, offset: Sequence[float]) -> Shape:
    """Move a solid by (dx, dy, dz)."""
    return shape.translate(_vector("offset", offset))


def rotate(shape: Shape, degrees: Sequence[float]) -> Shape:
    """Rotate a solid about the origin by (rx, ry, rz) degrees: about x first, then y, then z."""
    return shape.rotate(_vector("degrees", degrees))


def mirror(shape: Shape, normal: Sequence[float]) -> Shape:
    """Reflect a solid through the plane through the origin with the given normal."""
    normal = _vector("normal", normal)
    if not any(normal):
        raise ValueError("mirror normal must not be the zero vector")
    return shape.mirror(normal)


def union(*shapes) -> Shape:
    """Everything inside any of the solids (arguments may be solids or lists of solids)."""
    parts = _shapes(shapes)
    if not parts:
        raise ValueError("union needs at least one solid")
    return Shape.batch_boolean(parts, manifold3d.OpType.Add)


def difference(base: Shape, *cutters) -> Shape:
    """`base` with every cutter removed (cutters may be solids or lists of solids)."""
    parts = _shapes([base, *cutters])
    return Shape.batch_boolean(parts, manifold3d.OpType.Subtract)


def intersection(*shapes) -> Shape:
    """What lies inside all of the solids."""
    parts = _shapes(shapes)
    if not parts:
        raise ValueError("intersection needs at least one solid")
    return Shape.batch_boolean(parts, manifold3d.OpType.Intersect)


def volume(shape: Shape) -> float:
    """Volume of a solid in cubic millimetres."""
    return shape.volume()


def bounding_box(shape: Shape) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """((xmin, ymin, zmin), (xmax, ymax, zmax)) of a solid."""
    b = shape.bounding_box()
    return (b[0], b[1], b[2]), (b[3], b[4], b[5])


def save(shape: Shape, path: str = MESH_FILE) -> None:
    """Write the solid to `path` (by default part.npz, the part the env reads) and print a summary."""
    if not isinstance(shape, Shape):
        raise TypeError(f"save expects a solid (manifold3d.Manifold), got {type(shape).__name__}")
    if shape.is_empty():
        raise ValueError("refusing to save an empty solid (did a difference remove everything?)")
    mesh_io.write(path, shape)
    print(f"saved {path}: {shape.num_tri()} triangles, volume {shape.volume():.2f} mm^3")


def load(path: str) -> Shape:
    """Read a solid an earlier run saved with save(shape, path), to carry work from one run to the next."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise ValueError(f"no saved solid at {path!r}; save(shape, {path!r}) in an earlier run writes one") from None
    return mesh_io.read(data)
