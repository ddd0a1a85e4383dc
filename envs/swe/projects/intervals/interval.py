"""A half-open interval [start, end) of numbers with overlap, intersection and containment."""


class Interval:
    """The numbers x with start <= x < end; an interval with start == end is empty."""

    def __init__(self, start, end):
        if start > end:
            raise ValueError(f"interval start {start} is after its end {end}")
        self.start = start
        self.end = end

    def __repr__(self):
        return f"Interval({self.start}, {self.end})"

    def __eq__(self, other):
        return isinstance(other, Interval) and (self.start, self.end) == (other.start, other.end)

    def as_tuple(self):
        """(start, end)."""
        return (self.start, self.end)

    def length(self):
        """How much of the line the interval covers."""
        return self.end - self.start

    def is_empty(self):
        """True when the interval holds no number."""
        return self.start == self.end

    def contains(self, x):
        """Whether `x` lies in the interval (the end itself does not)."""
        return self.start <= x < self.end

    def overlaps(self, other):
        """Whether the two intervals share at least one number (touching ends do not count)."""
        return self.start < other.end and other.start < self.end

    def intersection(self, other):
        """The shared part of two intervals, or None when they do not overlap."""
        if not self.overlaps(other):
            return None
        return Interval(max(self.start, other.start), min(self.end, other.end))

    def shift(self, offset):
        """The same interval moved by `offset`."""
        return Interval(self.start + offset, self.end + offset)

    def split(self, at):
        """Two intervals cut at `at`, which must lie strictly inside."""
        if not self.start < at < self.end:
            raise ValueError(f"{at} is not strictly inside {self!r}")
        return Interval(self.start, at), Interval(at, self.end)
