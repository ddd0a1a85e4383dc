"""Grids as lists of rows: neighbours, flood fill, rotation and spiral order."""


def neighbors(grid, row, col, diagonal=False):
    """(row, col) positions next to a cell that lie inside the grid, in reading order."""
    out = []
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            if (dr, dc) == (0, 0) or (not diagonal and dr != 0 and dc != 0):
                continue
            r, c = row + dr, col + dc
            if 0 <= r < len(grid) and 0 <= c < len(grid[0]):
                out.append((r, c))
    return out


def flood_fill(grid, row, col, value):
    """A copy of `grid` where the 4-connected region holding (row, col) is set to `value`."""
    out = [list(r) for r in grid]
    old = out[row][col]
    if old == value:
        return out
    stack = [(row, col)]
    while stack:
        r, c = stack.pop()
        if out[r][c] != old:
            continue
        out[r][c] = value
        stack.extend(neighbors(out, r, c))
    return out


def rotate(grid):
    """The grid turned a quarter clockwise."""
    return [list(row) for row in zip(*grid[::-1])]


def spiral(grid):
    """The entries read clockwise from the top-left corner, spiralling inwards."""
    out = []
    top, bottom, left, right = 0, len(grid) - 1, 0, len(grid[0]) - 1
    while top <= bottom and left <= right:
        out += [grid[top][c] for c in range(left, right + 1)]
        out += [grid[r][right] for r in range(top + 1, bottom + 1)]
        if top < bottom:
            out += [grid[bottom][c] for c in range(right - 1, left - 1, -1)]
        if left < right:
            out += [grid[r][left] for r in range(bottom - 1, top, -1)]
        top, bottom, left, right = top + 1, bottom - 1, left + 1, right - 1
    return out
