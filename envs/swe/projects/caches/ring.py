"""A fixed-size ring buffer that overwrites its oldest item when full."""


class RingBuffer:
    """The last `capacity` items appended, oldest first."""

    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.slots = [None] * capacity
        self.start = 0
        self.size = 0

    def append(self, item):
        """Add `item`, dropping the oldest one when the buffer is full."""
        end = (self.start + self.size) % self.capacity
        self.slots[end] = item
        if self.size < self.capacity:
            self.size += 1
        else:
            self.start = (self.start + 1) % self.capacity

    def items(self):
        """The held items, oldest first."""
        return [self.slots[(self.start + i) % self.capacity] for i in range(self.size)]

    def is_full(self):
        """Whether the next append overwrites something."""
        return self.size == self.capacity

    def latest(self, n=1):
        """The `n` most recent items, oldest of them first."""
        held = self.items()
        return held[max(0, len(held) - n):]

    def mean(self):
        """The average of the held numbers, rounded to 3 places (None when empty)."""
        if self.size == 0:
            return None
        return round(sum(self.items()) / self.size, 3)
