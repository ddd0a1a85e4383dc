"""Merge lists of (start, end) pairs into disjoint runs and measure what they cover or leave out."""


def merge(intervals):
    """Sorted disjoint (start, end) runs covering the same numbers; touching runs are joined."""
    merged = []
    for start, end in sorted(intervals):
        if start == end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def total_length(intervals):
    """How much of the line the intervals cover together (overlaps counted once)."""
    return sum(end - start for start, end in merge(intervals))


def gaps(intervals, lo, hi):
    """The uncovered (start, end) runs between `lo` and `hi`."""
    out = []
    cursor = lo
    for start, end in merge(intervals):
        if end <= lo or start >= hi:
            continue
        if start > cursor:
            out.append((cursor, start))
        cursor = max(cursor, end)
    if cursor < hi:
        out.append((cursor, hi))
    return out


def coverage(intervals, lo, hi):
    """The fraction of [lo, hi) the intervals cover, rounded to 4 places."""
    if hi <= lo:
        raise ValueError(f"empty window [{lo}, {hi})")
    uncovered = sum(end - start for start, end in gaps(intervals, lo, hi))
    return round(1 - uncovered / (hi - lo), 4)
