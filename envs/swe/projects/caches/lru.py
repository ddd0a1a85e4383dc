"""A least-recently-used cache with a fixed capacity and hit/miss counters."""


class LRUCache:
    """Keeps at most `capacity` entries; reading or writing an entry makes it the most recent."""

    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.order = []  # least recent first
        self.values = {}
        self.hits = 0
        self.misses = 0
        self.evicted = []

    def get(self, key, default=None):
        """The value for `key` (counting a hit) or `default` (counting a miss)."""
        if key not in self.values:
            self.misses += 1
            return default
        self.hits += 1
        self.order.remove(key)
        self.order.append(key)
        return self.values[key]

    def put(self, key, value):
        """Store `value`; when full, the least recently used entry is evicted first."""
        if key in self.values:
            self.order.remove(key)
        elif len(self.values) >= self.capacity:
            oldest = self.order.pop(0)
            del self.values[oldest]
            self.evicted.append(oldest)
        self.order.append(key)
        self.values[key] = value

    def keys(self):
        """Keys from least to most recently used."""
        return list(self.order)

    def hit_rate(self):
        """hits / (hits + misses), rounded to 3 places (0.0 before any read)."""
        reads = self.hits + self.misses
        return round(self.hits / reads, 3) if reads else 0.0
