"""Interval arithmetic on closed ranges (lo, hi): the result holds every value the operation can take."""


def check(a):
    """Return `a` after making sure it is an ordered pair."""
    lo, hi = a
    if lo > hi:
        raise ValueError(f"range {a} has lo > hi")
    return a


def add(a, b):
    """Every x + y with x in a and y in b."""
    check(a), check(b)
    return (a[0] + b[0], a[1] + b[1])


def sub(a, b):
    """Every x - y with x in a and y in b."""
    check(a), check(b)
    return (a[0] - b[1], a[1] - b[0])


def mul(a, b):
    """Every x * y with x in a and y in b."""
    check(a), check(b)
    products = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
    return (min(products), max(products))


def width(a):
    """hi - lo."""
    return check(a)[1] - a[0]


def midpoint(a):
    """The centre of the range."""
    lo, hi = check(a)
    return (lo + hi) / 2


def hull(*ranges):
    """The smallest range holding all the given ranges."""
    if not ranges:
        raise ValueError("hull of no ranges")
    return (min(r[0] for r in ranges), max(r[1] for r in ranges))


def contains_zero(a):
    """Whether 0 lies in the range (ends included)."""
    lo, hi = check(a)
    return lo <= 0 <= hi
