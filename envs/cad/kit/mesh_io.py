"""The part file format (an .npz of vertices and triangles): writing it, and reading it back as untrusted data.

A part file holds two arrays, `vertices` (float, [V, 3], millimetres) and `triangles` (integer, [T, 3],
counter-clockwise seen from outside). The env reads files the model's program wrote, so `read` parses
them without pickle, bounds their size before decompressing, and turns every defect into a `MeshError`
that says what is wrong in words the model can act on.
"""
from __future__ import annotations

import io
import threading
import zipfile

import manifold3d
import numpy as np

MESH_FILE = "part.npz"
MAX_FILE_BYTES = 32 << 20
MAX_TRIANGLES = 400_000
MAX_COORDINATE = 10_000.0  # millimetres; far beyond any part here, and keeps volumes finite

# numpy parses each .npy header with ast.literal_eval, and CPython 3.11.7's AST construction is not thread-safe:
# four demo threads reading parts at once failed a cold start with "SystemError: AST constructor recursion depth
# mismatch". Reads take milliseconds, so one at a time costs nothing that shows.
_LOAD_LOCK = threading.Lock()


class MeshError(ValueError):
    """A part file that cannot be read as a closed, valid solid; the message explains why."""


def encode(shape: manifold3d.Manifold) -> bytes:
    """The part-file bytes of a solid."""
    mesh = shape.to_mesh64()
    buffer = io.BytesIO()
    np.savez_compressed(buffer, vertices=np.asarray(mesh.vert_properties[:, :3], dtype=np.float64), triangles=np.asarray(mesh.tri_verts, dtype=np.int64))
    return buffer.getvalue()


def write(path: str, shape: manifold3d.Manifold) -> None:
    """Write a solid to a part file."""
    with open(path, "wb") as f:
        f.write(encode(shape))


def _arrays(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    if len(data) > MAX_FILE_BYTES:
        raise MeshError(f"the part file is {len(data)} bytes; the limit is {MAX_FILE_BYTES}")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = {info.filename: info.file_size for info in archive.infolist()}
    except zipfile.BadZipFile:
        raise MeshError("the part file is not an .npz archive (write it with save(shape) or numpy.savez)") from None
    missing = {"vertices.npy", "triangles.npy"} - set(members)
    if missing:
        raise MeshError(f"the part file lacks the array(s) {sorted(m[:-4] for m in missing)}; it has {sorted(members)}")
    # The sizes in the zip directory bound what decompression may allocate.
    if sum(members.values()) > 4 * MAX_FILE_BYTES:
        raise MeshError("the arrays in the part file are too large once decompressed")
    try:
        with _LOAD_LOCK, np.load(io.BytesIO(data), allow_pickle=False) as npz:
            return np.asarray(npz["vertices"]), np.asarray(npz["triangles"])
    except (ValueError, OSError, zipfile.BadZipFile) as err:
        raise MeshError(f"the part file's arrays cannot be read: {err}") from None


def read(data: bytes) -> manifold3d.Manifold:
    """Parse and validate part-file bytes into a solid; any defect raises MeshError."""
    vertices, triangles = _arrays(data)
    if vertices.ndim != 2 or vertices.shape[1] != 3 or vertices.dtype.kind not in "fiu":
        raise MeshError(f"vertices must be a numeric [V, 3] array, got dtype {vertices.dtype} shape {vertices.shape}")
    if triangles.ndim != 2 or triangles.shape[1] != 3 or triangles.dtype.kind not in "iu":
        raise MeshError(f"triangles must be an integer [T, 3] array, got dtype {triangles.dtype} shape {triangles.shape}")
    if len(triangles) == 0:
        raise MeshError("the mesh has no triangles")
    if len(triangles) > MAX_TRIANGLES:
        raise MeshError(f"the mesh has {len(triangles)} triangles; the limit is {MAX_TRIANGLES}")
    vertices = vertices.astype(np.float64)
    if not np.isfinite(vertices).all() or np.abs(vertices).max() > MAX_COORDINATE:
        raise MeshError(f"vertex coordinates must be finite and within ±{MAX_COORDINATE:g} mm")
    if triangles.min() < 0 or triangles.max() >= len(vertices):
        raise MeshError(f"triangle indices must lie in [0, {len(vertices) - 1}]")
    mesh = manifold3d.Mesh64(vert_properties=np.array(vertices, order="C"), tri_verts=np.array(triangles, dtype=np.uint64, order="C"))
    # Files written vertex-per-corner (a triangle soup) are still closed solids once equal positions merge.
    mesh.merge()
    shape = manifold3d.Manifold(mesh)
    status = shape.status()
    if status != manifold3d.Error.NoError:
        raise MeshError(f"the mesh is not a closed 2-manifold solid ({status.name}): every edge must join exactly two triangles")
    if shape.is_empty() or shape.volume() <= 0:
        raise MeshError("the mesh encloses no volume (are the triangles wound inside out?)")
    return shape
