"""Vectors as lists of numbers: length, direction, angles, projections and cross products."""

import math


def norm(v):
    """The Euclidean length, rounded to 6 places."""
    return round(math.sqrt(sum(x * x for x in v)), 6)


def normalize(v):
    """The unit vector in the direction of `v` (entries rounded to 6 places); the zero vector has none."""
    length = math.sqrt(sum(x * x for x in v))
    if length == 0:
        raise ValueError("the zero vector has no direction")
    return [round(x / length, 6) for x in v]


def cross(u, v):
    """The cross product of two 3-vectors."""
    if len(u) != 3 or len(v) != 3:
        raise ValueError("cross products are defined for 3-vectors")
    return [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]]


def angle(u, v):
    """The angle between two non-zero vectors in degrees, rounded to 2 places."""
    dot = sum(x * y for x, y in zip(u, v))
    cosine = dot / (math.sqrt(sum(x * x for x in u)) * math.sqrt(sum(y * y for y in v)))
    return round(math.degrees(math.acos(max(-1.0, min(1.0, cosine)))), 2)


def project(u, onto):
    """The component of `u` along `onto` (entries rounded to 6 places)."""
    scale = sum(x * y for x, y in zip(u, onto)) / sum(y * y for y in onto)
    return [round(scale * y, 6) for y in onto]
