"""Scoring a submitted solid against a part: overall IoU and topology, and each feature's own region.

IoU alone forgives a small feature left out (a counterbore, a gusset, a keyway is well under 1% of a
part), so every feature is checked where it acts: the material a cut feature removes must be empty in
the submitted solid, and the material an added feature contributes must be filled.
"""
from __future__ import annotations

import manifold3d

from jointrl.envs.cad.measure import iou, measure
from jointrl.envs.cad.part import Part
from jointrl.envs.cad.prompt import FEATURE_MATCH, IOU_THRESHOLD


def _volume_inside(solid: manifold3d.Manifold, region: manifold3d.Manifold) -> float:
    return manifold3d.Manifold.batch_boolean([solid, region], manifold3d.OpType.Intersect).volume()


def feature_scores(part: Part, solid: manifold3d.Manifold) -> dict[str, float]:
    """Per feature, the share of its region that the solid gets right (empty for a cut, filled for an addition)."""
    scores = {}
    for feature in part.features:
        region = part.regions[feature.name]
        total = region.volume()
        assert total > 0, f"feature {feature.name} of a {part.family} changes nothing"
        filled = _volume_inside(solid, region) / total
        scores[feature.name] = 1.0 - filled if feature.cut else filled
    return scores


def score(part: Part, solid: manifold3d.Manifold | None) -> dict[str, float]:
    """The signals of a submission: success needs the IoU, the same bodies and genus, and every feature in place."""
    if solid is None or solid.is_empty():
        return {"success": 0.0, "iou": 0.0, "volume_error": 1.0, "topology_match": 0.0, "features_fraction": 0.0}
    target, got = measure(part.target), measure(solid)
    overlap = iou(solid, part.target)
    same_topology = target.genus == got.genus and target.components == got.components
    features = {name: float(value >= FEATURE_MATCH) for name, value in feature_scores(part, solid).items()}
    fraction = sum(features.values()) / len(features)
    success = overlap >= IOU_THRESHOLD and same_topology and fraction == 1.0
    # Summary signals first: the per-feature ones come last, where a cap on the signal count would cut.
    return {"success": float(success), "iou": overlap, "volume_error": abs(got.volume - target.volume) / target.volume,
            "topology_match": float(same_topology), "features_fraction": fraction,
            **{f"feature/{name}": value for name, value in features.items()}}
