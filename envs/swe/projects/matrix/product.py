"""Matrix and vector products, and integer powers of square matrices."""

from .basic import identity, shape


def dot(u, v):
    """The dot product of two vectors of equal length."""
    if len(u) != len(v):
        raise ValueError(f"vectors of lengths {len(u)} and {len(v)}")
    return sum(x * y for x, y in zip(u, v))


def matmul(a, b):
    """The product a @ b; the columns of `a` must match the rows of `b`."""
    (n, k), (k2, m) = shape(a), shape(b)
    if k != k2:
        raise ValueError(f"cannot multiply {n}x{k} by {k2}x{m}")
    return [[sum(a[i][t] * b[t][j] for t in range(k)) for j in range(m)] for i in range(n)]


def power(m, exponent):
    """m multiplied by itself `exponent` times (the identity for 0), by repeated squaring."""
    rows, cols = shape(m)
    if rows != cols:
        raise ValueError("only square matrices have powers")
    if exponent < 0:
        raise ValueError(f"negative exponent {exponent}")
    result, base = identity(rows), m
    while exponent > 0:
        if exponent % 2 == 1:
            result = matmul(result, base)
        base = matmul(base, base)
        exponent //= 2
    return result


def outer(u, v):
    """The matrix whose (i, j) entry is u[i] * v[j]."""
    return [[x * y for y in v] for x in u]
