"""Find free time between busy (start, end) slots of a day and count how many slots overlap at once."""

from .merge import gaps, merge


def free_slots(busy, day_start, day_end, min_length=1):
    """Free (start, end) runs of the day at least `min_length` long."""
    return [(s, e) for s, e in gaps(busy, day_start, day_end) if e - s >= min_length]


def first_fit(busy, duration, day_start, day_end):
    """The earliest start of a free run of `duration` within the day, or None."""
    for start, end in gaps(busy, day_start, day_end):
        if end - start >= duration:
            return start
    return None


def max_overlap(slots):
    """The most slots in progress at one moment (a slot ending when another starts does not overlap it)."""
    events = []
    for start, end in slots:
        events.append((start, 1))
        events.append((end, -1))
    # At equal times ends (-1) sort before starts (+1), so touching slots never count together.
    events.sort()
    running = best = 0
    for _, change in events:
        running += change
        best = max(best, running)
    return best


def busiest(slots, hour_length=60):
    """The index of the hour (counted from 0) that the merged slots cover most, earliest on ties."""
    covered = {}
    for start, end in merge(slots):
        for hour in range(start // hour_length, (end - 1) // hour_length + 1):
            lo, hi = max(start, hour * hour_length), min(end, (hour + 1) * hour_length)
            covered[hour] = covered.get(hour, 0) + hi - lo
    if not covered:
        return None
    return min(covered, key=lambda hour: (-covered[hour], hour))
