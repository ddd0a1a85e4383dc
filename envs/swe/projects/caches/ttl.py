"""A cache whose entries expire `ttl` time units after they were set; time is passed in explicitly."""


class TTLCache:
    """Entries live for `ttl` units: an entry set at t is readable while now < t + ttl."""

    def __init__(self, ttl):
        if ttl <= 0:
            raise ValueError(f"ttl must be positive, got {ttl}")
        self.ttl = ttl
        self.entries = {}

    def set(self, key, value, now):
        """Store `value` as of time `now`."""
        self.entries[key] = (value, now + self.ttl)

    def get(self, key, now, default=None):
        """The live value for `key` at time `now`, else `default`."""
        if key not in self.entries:
            return default
        value, expires = self.entries[key]
        if now >= expires:
            return default
        return value

    def purge(self, now):
        """Drop the expired entries; return how many were dropped."""
        expired = [key for key, (_, expires) in self.entries.items() if now >= expires]
        for key in expired:
            del self.entries[key]
        return len(expired)

    def live_keys(self, now):
        """Keys still readable at `now`, sorted."""
        return sorted(key for key, (_, expires) in self.entries.items() if now < expires)

    def remaining(self, key, now):
        """Time units left before `key` expires (0 if expired or missing)."""
        if key not in self.entries:
            return 0
        return max(0, self.entries[key][1] - now)
