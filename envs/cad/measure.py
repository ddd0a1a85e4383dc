"""Measuring solids: volume, bounding box, topology, and exact volumetric IoU through manifold booleans."""
from __future__ import annotations

from dataclasses import dataclass

import manifold3d


@dataclass(frozen=True)
class Measurement:
    """The facts the `measure` tool reports about one solid."""

    volume: float  # mm^3
    bbox_min: tuple[float, float, float]
    bbox_max: tuple[float, float, float]
    components: int  # disconnected bodies
    genus: int  # through-holes (handles), summed over the bodies
    triangles: int

    def report(self) -> str:
        """A few lines for the model to read."""
        size = tuple(hi - lo for lo, hi in zip(self.bbox_min, self.bbox_max))
        return "\n".join([
            f"volume: {self.volume:.2f} mm^3",
            f"bounding box: min ({_xyz(self.bbox_min)}) max ({_xyz(self.bbox_max)}) size ({_xyz(size)})",
            f"bodies: {self.components}, genus (through-holes): {self.genus}",
            f"triangles: {self.triangles}",
        ])


def _xyz(v) -> str:
    return ", ".join(f"{c:.3f}" for c in v)


def measure(shape: manifold3d.Manifold) -> Measurement:
    """Measure a non-empty solid."""
    assert not shape.is_empty(), "measure() is only called on validated, non-empty solids"
    b = shape.bounding_box()
    # Manifold's genus is only per body; the sum over bodies is what a person counts as holes.
    bodies = shape.decompose()
    return Measurement(
        volume=shape.volume(),
        bbox_min=(b[0], b[1], b[2]),
        bbox_max=(b[3], b[4], b[5]),
        components=len(bodies),
        genus=sum(body.genus() for body in bodies),
        triangles=shape.num_tri(),
    )


def iou(a: manifold3d.Manifold, b: manifold3d.Manifold) -> float:
    """Volume of the intersection over volume of the union; 0 when both are empty."""
    inter = manifold3d.Manifold.batch_boolean([a, b], manifold3d.OpType.Intersect).volume()
    union = a.volume() + b.volume() - inter
    return 0.0 if union <= 0 else max(0.0, min(1.0, inter / union))
