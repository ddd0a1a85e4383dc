"""Place numbers into buckets given sorted edges, by binary search."""


def locate(x, edges):
    """The index i with edges[i] <= x < edges[i + 1]; -1 below the first edge, len(edges) - 1 at or past the last."""
    lo, hi = 0, len(edges)
    while lo < hi:
        mid = (lo + hi) // 2
        if edges[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def bucketize(values, edges):
    """How many values fall in each bucket [edges[i], edges[i + 1]); values outside the edges are dropped."""
    counts = [0] * (len(edges) - 1)
    for value in values:
        i = locate(value, edges)
        if 0 <= i < len(edges) - 1:
            counts[i] += 1
    return counts


def clamp(x, lo, hi):
    """`x` limited to [lo, hi]."""
    if lo > hi:
        raise ValueError(f"clamp bounds reversed: {lo} > {hi}")
    return max(lo, min(x, hi))


def even_edges(lo, hi, buckets):
    """`buckets + 1` evenly spaced edges from lo to hi, rounded to 6 places."""
    if buckets < 1:
        raise ValueError(f"need at least one bucket, got {buckets}")
    step = (hi - lo) / buckets
    return [round(lo + i * step, 6) for i in range(buckets + 1)]
