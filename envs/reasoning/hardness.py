"""The generic rule that makes a dataset's `hard` config: each numeric curriculum knob one level past the default.

reasoning-gym ships a curriculum per dataset: named knobs (config fields) with levels ordered from easy to
hard. `hard` moves every numeric knob to the first level beyond the dataset's default, so hard tasks are
one curriculum step harder than default ones:

- a range knob (`min_x`, `max_x`, levels ascending) becomes the curriculum's upper-bound segment
  [level k-1, level k], where level k is the first level above the default maximum (the top level when
  the default maximum already reaches it), never lower than the default minimum;
- a scalar knob with strictly monotone numeric levels (ascending like `max_value`, or descending like
  `min_value` or `p_zero`) takes the first level past its default in the levels' direction.

Knobs whose levels are not ordered numbers (mixture weights, task lists, booleans), or whose default is
unset, keep their defaults: a uniform mixture has no place in the curriculum's order, so moving it would be
a guess. Knobs listed in exclusions.FROZEN_KNOBS (invalid, failing or too slow one level up) also keep
their defaults. A dataset none of whose knobs moves has no `hard` variant.
"""
from __future__ import annotations

from typing import Any

from reasoning_gym.coaching.attributes import RangeAttributeDefinition, ScalarAttributeDefinition


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _direction(levels: list) -> int:
    """+1 for strictly ascending numeric levels, -1 for strictly descending, 0 for anything else."""
    if len(levels) < 2 or not all(_is_number(v) for v in levels):
        return 0
    steps = [b - a for a, b in zip(levels, levels[1:])]
    if all(s > 0 for s in steps):
        return 1
    if all(s < 0 for s in steps):
        return -1
    return 0


def _like(default: Any, value: Any) -> Any:
    # A float field stays a float (a level list may mix 100 and 0.5).
    return float(value) if isinstance(default, float) else value


def harder_range(levels: list, low: Any, high: Any) -> tuple[Any, Any] | None:
    """The hard (low, high) for a range knob, or None when the rule does not move it."""
    if _direction(levels) != 1 or not (_is_number(low) and _is_number(high)):
        return None
    above = [v for v in levels if v > high]
    new_high = above[0] if above else high
    below = [v for v in levels if v < new_high]
    new_low = max(low, below[-1]) if below else low
    moved = (_like(low, new_low), _like(high, new_high))
    return None if moved == (low, high) else moved


def harder_scalar(levels: list, default: Any) -> Any | None:
    """The hard value of a scalar knob, or None when the rule does not move it."""
    direction = _direction(levels)
    if direction == 0 or not _is_number(default):
        return None
    beyond = [v for v in levels if (v - default) * direction > 0]
    return _like(default, beyond[0]) if beyond else None


def knob_moves(curriculum, default_config) -> dict[str, dict[str, Any]]:
    """Per curriculum knob that the rule moves: its name → the config fields (name → value) it changes."""
    moves: dict[str, dict[str, Any]] = {}
    for attribute in curriculum.attributes.values():
        if isinstance(attribute, RangeAttributeDefinition):
            low_field, high_field = attribute.lower_field_name, attribute.upper_field_name
            moved = harder_range(attribute.levels, getattr(default_config, low_field), getattr(default_config, high_field))
            if moved is not None:
                moves[attribute.name] = {low_field: moved[0], high_field: moved[1]}
        elif isinstance(attribute, ScalarAttributeDefinition):
            moved = harder_scalar(attribute.levels, getattr(default_config, attribute.field_name))
            if moved is not None:
                moves[attribute.name] = {attribute.field_name: moved}
    return moves
