"""The opening messages of a CAD episode: the system message (conventions, the CSG API, tools, scoring) and the task."""
from __future__ import annotations

import inspect

from jointrl.envs.cad.kit import csg, mesh_io

IOU_THRESHOLD = 0.99
# The share of a feature's region that must match: a hole of the wrong size or place, or a counterbore of
# half the depth, falls below it, while a finer tessellation of the same feature stays above.
FEATURE_MATCH = 0.9


def _signature(name: str) -> str:
    params = []
    for p in inspect.signature(getattr(csg, name)).parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            params.append(f"*{p.name}")
        elif p.default is p.empty:
            params.append(p.name)
        else:
            params.append(f"{p.name}={p.default!r}")
    return f"{name}({', '.join(params)})"


def api_reference() -> str:
    """One line per public CSG function: its call signature and what it does, from the code itself."""
    return "\n".join(f"- {_signature(name)}: {inspect.getdoc(getattr(csg, name)).splitlines()[0]}" for name in csg.__all__)


def system_message() -> str:
    """What every CAD episode's system message says."""
    return f"""You model mechanical parts as exact solids by writing Python programs against a small CSG (constructive solid geometry) API, then hand the result in.

Conventions: units are millimetres; axes are right-handed with z up; angles are in degrees, counter-clockwise about +z seen from above unless the task says otherwise.

The API: `from cadkit import box, cylinder, ...`. Every solid is a manifold3d.Manifold (so manifold3d may be used directly too); `import math` is available as usual.
{api_reference()}
Circles are {csg.SEGMENTS}-gons with a vertex on the first in-plane axis, and targets are built at that resolution, so keep the defaults. Cutters that open a face should overshoot it (e.g. start a through-hole at z = -1 and make it 2 mm longer than the material) so no face is shared.

Saving: the program must end by calling save(part) with the finished solid; that writes {mesh_io.MESH_FILE} in the working directory (arrays `vertices` [V, 3] float and `triangles` [T, 3] int, counter-clockwise seen from outside). Writing that file yourself with numpy.savez works as well. To carry a solid from one run to the next, save(part, "name.npz") in one run and part = load("name.npz") in a later one. The mesh must be closed and watertight (every edge shared by exactly two triangles).

Tools:
- run_program(code): runs your complete program in a fresh Python process (nothing carries over between runs except files) and reports its output and whether it saved a valid part.
- measure(): volume, bounding box, number of bodies and genus (through-holes) of the last saved part.
- submit(): hands in the last saved part and ends the episode.

Scoring: the submitted part is compared with the specified one by volumetric IoU (intersection volume / union volume). It is correct when the IoU is at least {IOU_THRESHOLD}, it has the same number of bodies and the same genus as the specified part, and every feature the task describes is in place: at least {FEATURE_MATCH:.0%} of the material each cut feature (hole, counterbore, recess, keyway, slot, pocket, flat) removes is absent from your part, and at least {FEATURE_MATCH:.0%} of the material each added feature (disc, hub, boss, gusset, flange, lip) contributes is present."""


def user_message(task: str) -> str:
    """The task text with what to do about it."""
    return f"{task}\n\nWrite a program that builds this part and saves it, check the result, then submit it."
