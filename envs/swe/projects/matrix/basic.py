"""Shapes and element-wise operations on matrices stored as lists of rows."""


def shape(m):
    """(rows, columns); a ragged matrix is an error."""
    if not m:
        return (0, 0)
    width = len(m[0])
    for i, row in enumerate(m):
        if len(row) != width:
            raise ValueError(f"row {i} has {len(row)} entries, expected {width}")
    return (len(m), width)


def transpose(m):
    """Rows become columns."""
    rows, cols = shape(m)
    return [[m[r][c] for r in range(rows)] for c in range(cols)]


def add(a, b):
    """The element-wise sum of two matrices of the same shape."""
    if shape(a) != shape(b):
        raise ValueError(f"cannot add shapes {shape(a)} and {shape(b)}")
    return [[x + y for x, y in zip(row_a, row_b)] for row_a, row_b in zip(a, b)]


def scale(m, k):
    """Every entry multiplied by `k`."""
    return [[k * x for x in row] for row in m]


def identity(n):
    """The n x n identity matrix."""
    return [[1 if r == c else 0 for c in range(n)] for r in range(n)]


def trace(m):
    """The sum of the diagonal of a square matrix."""
    rows, cols = shape(m)
    if rows != cols:
        raise ValueError(f"trace needs a square matrix, got {rows}x{cols}")
    return sum(m[i][i] for i in range(rows))
