"""A repeating signal cycle (green, amber, red, ...) with a duration per phase: the phase at a time."""


def cycle_length(phases):
    """The total duration of one cycle of (name, duration) phases."""
    if not phases or any(duration <= 0 for _, duration in phases):
        raise ValueError("a cycle needs phases with positive durations")
    return sum(duration for _, duration in phases)


def phase_at(phases, t):
    """The name of the phase showing at time `t` (the cycle starts at t = 0 and repeats)."""
    t = t % cycle_length(phases)
    for name, duration in phases:
        if t < duration:
            return name
        t -= duration
    raise AssertionError("unreachable: t is below the cycle length")


def next_change(phases, t):
    """The first time after `t` at which the phase changes."""
    length = cycle_length(phases)
    base = t - t % length
    elapsed = 0
    for _, duration in phases:
        elapsed += duration
        if base + elapsed > t:
            return base + elapsed
    raise AssertionError("unreachable: the cycle ends after t")


def time_in(phases, name, start, end):
    """How long phase `name` shows during [start, end), counted in whole time units."""
    return sum(1 for t in range(start, end) if phase_at(phases, t) == name)
