"""CAD domain: parametric parts described in text, built by a CSG program over manifold3d, scored by exact volumetric IoU.

Importing this package is cheap: `register()` only adds specs; geometry is imported when an env is made.
"""
from __future__ import annotations

# family -> what the part is; every family comes in the three difficulties below.
FAMILIES = {
    "plate": "a plate with a grid of through-holes, or corner holes around a bore and bolt circle",
    "bracket": "an L-bracket with holes in base and upright, gussets and a slot when hard",
    "pocket": "a block with a pocket, or a row of compartments with drain holes",
    "channel": "a U- or lipped C-channel, or a four-slot T-slot bar, extruded along x",
    "star": "a gear-like star plate with a bore, lightening holes, hub and keyway",
    "flange": "a flange: disc, bore and bolt circle, with hub, counterbores and recess",
    "shaft": "a stepped shaft with centre hole, or bore, keyway and cross hole",
    "stack": "a coaxial washer stack, or washers and spacers with a flat and dowel holes",
    "nut": "a hex nut blank, a nut with washer face, or a castle nut",
    "elbow": "a 90-degree pipe bend, with straight legs, with bolted end flanges",
}
# family -> what the part is; these come only at the long-horizon difficulty, one feature per drawing note.
LONG_FAMILIES = {
    "fixture": "a fixture plate whose six to nine features (holes, counterbores, pockets, slots, bosses, chamfers) "
               "are drawing notes read one at a time",
}
DIFFICULTIES = {
    "easy": ("low", "every dimension and coordinate given"),
    "medium": ("high", "dimensions given relationally"),
    "hard": ("max", "more features, fewer coordinates"),
}


def register() -> None:
    """Add every cad/<family>-v0:<difficulty> spec, and the long-horizon cad/<family>-v0:long ones, to the registry."""
    from jointrl.envs.base import EnvSpec
    from jointrl.envs.registry import register as add

    for family, what in FAMILIES.items():
        for difficulty, (tier, detail) in DIFFICULTIES.items():
            add(EnvSpec(id=f"cad/{family}-v0:{difficulty}", entry_point="jointrl.envs.cad.env:CadEnv",
                        kwargs={"family": family}, default_tier=tier,
                        description=f"CSG program for {what} ({detail}); success = IoU >= 0.99 with matching topology "
                                    f"and every feature in place"))
    for family, what in LONG_FAMILIES.items():
        # Reading each note and applying it in its own run takes two turns per note.
        add(EnvSpec(id=f"cad/{family}-v0:long", entry_point="jointrl.envs.cad.env:DrawingCadEnv",
                    kwargs={"family": family}, default_tier="max", max_turns=40,
                    description=f"CSG program for {what}; success = IoU >= 0.99 with matching topology and every "
                                f"feature in place"))
