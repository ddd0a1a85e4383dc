"""The matrix family: tests for shapes, products, exact elimination, vectors and grids."""
from __future__ import annotations

import random

from jointrl.envs.swe.case import Case, call, expr, raises
from jointrl.envs.swe.family import Family, Module


def _matrix(rng: random.Random, rows: int, cols: int, lo: int = -5, hi: int = 9) -> list[list[int]]:
    return [[rng.randint(lo, hi) for _ in range(cols)] for _ in range(rows)]


def basic_cases(rng: random.Random) -> list[Case]:
    r, c = rng.randint(2, 3), rng.randint(2, 4)
    a, b, square = _matrix(rng, r, c), _matrix(rng, r, c), _matrix(rng, 3, 3)
    return [
        call("shape", a),
        call("shape", []),
        raises("ValueError", "shape", [[1, 2], [3]]),
        call("transpose", a),
        call("add", a, b),
        raises("ValueError", "add", a, _matrix(rng, r, c + 1)),
        call("scale", a, rng.randint(-3, 4)),
        call("identity", rng.randint(2, 4)),
        call("identity", 1),
        call("trace", square),
        raises("ValueError", "trace", a if r != c else _matrix(rng, 2, 3)),
    ]


def product_cases(rng: random.Random) -> list[Case]:
    n, k, m = rng.randint(1, 3), rng.randint(2, 3), rng.randint(2, 3)
    a, b = _matrix(rng, n, k), _matrix(rng, k, m)
    square = _matrix(rng, 2, 2, -3, 3)
    u, v = [rng.randint(-5, 5) for _ in range(3)], [rng.randint(-5, 5) for _ in range(3)]
    return [
        call("dot", u, v),
        raises("ValueError", "dot", u, v[:2]),
        call("matmul", a, b),
        call("matmul", [[1, 2]], [[3], [4]]),
        raises("ValueError", "matmul", a, _matrix(rng, k + 1, m)),
        call("power", square, rng.randint(2, 5)),
        call("power", square, 0),
        call("power", [[1, 1], [1, 0]], rng.randint(6, 12)),
        raises("ValueError", "power", square, -1),
        call("outer", u[:2], v),
    ]


def solve_cases(rng: random.Random) -> list[Case]:
    a = _matrix(rng, 3, 3)
    while (a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
           + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0])) == 0:
        a = _matrix(rng, 3, 3)
    b = [rng.randint(-9, 9) for _ in range(3)]
    row = [rng.randint(1, 5) for _ in range(3)]
    dependent = [row, [2 * x for x in row], _matrix(rng, 1, 3)[0]]
    return [
        expr("determinant", f"str(determinant({a!r}))"),
        expr("determinant", "str(determinant([[0, 1], [1, 0]]))"),
        expr("determinant", f"str(determinant({dependent!r}))"),
        expr("determinant_rejects", "determinant([[1, 2, 3], [4, 5, 6]])", raises="ValueError"),
        call("rank", a),
        call("rank", dependent),
        call("rank", [[0, 0], [0, 0]]),
        expr("solve", f"[str(x) for x in solve({a!r}, {b!r})]"),
        expr("solve", "[str(x) for x in solve([[0, 2], [3, 0]], [4, 9])]"),
        expr("solve_rejects", f"solve({[row, [2 * x for x in row], [1, 0, 0]]!r}, [1, 2, 3])", raises="ValueError"),
    ]


def vector_cases(rng: random.Random) -> list[Case]:
    u = [rng.randint(-6, 6) or 1 for _ in range(3)]
    v = [rng.randint(-6, 6) or 2 for _ in range(3)]
    return [
        call("norm", u),
        call("norm", [3, 4]),
        call("normalize", v),
        raises("ValueError", "normalize", [0, 0]),
        call("cross", u, v),
        call("cross", [1, 0, 0], [0, 1, 0]),
        raises("ValueError", "cross", u[:2], v[:2]),
        call("angle", u, v),
        call("angle", [1, 0], [0, 2]),
        call("project", u, v),
        call("project", [2, 3], [1, 0]),
    ]


def grid_cases(rng: random.Random) -> list[Case]:
    rows, cols = rng.randint(3, 4), rng.randint(3, 5)
    cells = [[rng.randint(0, 1) for _ in range(cols)] for _ in range(rows)]
    r, c = rng.randrange(rows), rng.randrange(cols)
    return [
        call("neighbors", cells, r, c),
        call("neighbors", cells, 0, 0, diagonal=True),
        call("neighbors", cells, rows - 1, cols - 1),
        call("flood_fill", cells, r, c, 7),
        call("flood_fill", [[1, 1], [0, 1]], 0, 0, 1),
        call("rotate", _matrix(rng, rows, cols, 0, 9)),
        call("spiral", _matrix(rng, rows, cols, 0, 9)),
        call("spiral", [[1, 2, 3, 4]]),
        call("spiral", [[1], [2], [3]]),
    ]


FAMILY = Family(
    name="matrix",
    topic="the matrix helpers",
    package_names=("matkit", "gridmath", "linalg_lite"),
    modules=(
        Module("basic", basic_cases),
        Module("product", product_cases, requires=("basic",)),
        Module("solve", solve_cases),
        Module("vector", vector_cases),
        Module("grid", grid_cases),
    ),
)
