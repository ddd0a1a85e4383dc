"""The reasoning domain: every usable reasoning-gym dataset as single-turn env ids `reasoning/<dataset>-v0:<difficulty>`.

Each dataset gets a `default` id (its reasoning-gym default config, thinking tier low) and, where its
curriculum has a knob to turn, a `hard` id (one curriculum level past the default, tier high; see
hardness.py). Registering reads only the shipped catalog, so it never imports reasoning-gym (about a second).
"""
from __future__ import annotations

ENTRY_POINT = "jointrl.envs.reasoning.adapter:ReasoningGymEnv"


def register() -> None:
    """Add the reasoning ids listed in catalog.py to the env registry."""
    from jointrl.envs import registry
    from jointrl.envs.reasoning.catalog import CATALOG

    for name, item in CATALOG.items():
        variants = [("default", {}, "low")]
        if item["hard"]:
            variants.append(("hard", item["hard"], "high"))
        for difficulty, config, tier in variants:
            registry.register(
                id=f"reasoning/{name}-v0:{difficulty}",
                entry_point=ENTRY_POINT,
                kwargs={"dataset": name, "config": dict(config)},
                default_tier=tier,
                max_turns=1,
                description=item["description"],
            )
