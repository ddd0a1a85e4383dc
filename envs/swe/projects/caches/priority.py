"""A priority queue that serves the lowest priority first and equal priorities in arrival order."""


class PriorityQueue:
    """Items with numeric priorities; `pop` returns the item with the smallest priority, oldest first on ties."""

    def __init__(self):
        self.entries = []  # (priority, arrival, item), kept sorted
        self.arrivals = 0

    def __len__(self):
        return len(self.entries)

    def push(self, item, priority=0):
        """Queue `item`."""
        entry = (priority, self.arrivals, item)
        self.arrivals += 1
        lo, hi = 0, len(self.entries)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entries[mid][:2] < entry[:2]:
                lo = mid + 1
            else:
                hi = mid
        self.entries.insert(lo, entry)

    def pop(self):
        """Remove and return the next item."""
        if not self.entries:
            raise IndexError("pop from an empty queue")
        return self.entries.pop(0)[2]

    def peek(self):
        """The next item, left in the queue (None when empty)."""
        return self.entries[0][2] if self.entries else None

    def drain(self, limit=None):
        """Pop up to `limit` items (all when None) and return them in order."""
        count = len(self.entries) if limit is None else min(limit, len(self.entries))
        return [self.pop() for _ in range(count)]
