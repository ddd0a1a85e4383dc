"""Exact Gaussian elimination with fractions: determinants, rank and solutions of linear systems."""

from fractions import Fraction


def _echelon(m):
    """Row-reduce a copy of `m`; return the reduced rows, pivot columns, and the sign of the row swaps."""
    rows = [[Fraction(x) for x in row] for row in m]
    pivots, sign, r = [], 1, 0
    width = len(rows[0]) if rows else 0
    for c in range(width):
        pivot = next((i for i in range(r, len(rows)) if rows[i][c] != 0), None)
        if pivot is None:
            continue
        if pivot != r:
            rows[r], rows[pivot] = rows[pivot], rows[r]
            sign = -sign
        for i in range(r + 1, len(rows)):
            factor = rows[i][c] / rows[r][c]
            rows[i] = [x - factor * y for x, y in zip(rows[i], rows[r])]
        pivots.append(c)
        r += 1
        if r == len(rows):
            break
    return rows, pivots, sign


def determinant(m):
    """The determinant of a square matrix, as an exact Fraction."""
    if any(len(row) != len(m) for row in m):
        raise ValueError("determinant needs a square matrix")
    rows, pivots, sign = _echelon(m)
    if len(pivots) < len(m):
        return Fraction(0)
    result = Fraction(sign)
    for i in range(len(m)):
        result *= rows[i][i]
    return result


def rank(m):
    """The number of linearly independent rows."""
    return len(_echelon(m)[1])


def solve(a, b):
    """The x with a @ x == b for a square, invertible `a`, as Fractions."""
    n = len(a)
    augmented = [list(row) + [rhs] for row, rhs in zip(a, b)]
    rows, pivots, _ = _echelon(augmented)
    if pivots[:n] != list(range(n)):
        raise ValueError("the system has no unique solution")
    x = [Fraction(0)] * n
    for i in range(n - 1, -1, -1):
        known = sum(rows[i][j] * x[j] for j in range(i + 1, n))
        x[i] = (rows[i][n] - known) / rows[i][i]
    return x
