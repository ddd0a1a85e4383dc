"""Render rows as an aligned text table (numbers right-aligned) or back to CSV text."""


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def render_table(headers, rows):
    """Columns padded to their widest cell, numbers right-aligned, a dashed line under the header."""
    cells = [[str(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = [" | ".join(h.ljust(w) for h, w in zip(headers, widths))]
    lines.append("-+-".join("-" * w for w in widths))
    for raw, row in zip(rows, cells):
        padded = [c.rjust(w) if _is_number(v) else c.ljust(w) for v, c, w in zip(raw, row, widths)]
        lines.append(" | ".join(padded))
    return "\n".join(lines)


def quote(field, delimiter=","):
    """A CSV field, quoted when it holds the delimiter, a quote or a line break."""
    if delimiter in field or '"' in field or "\n" in field:
        return '"' + field.replace('"', '""') + '"'
    return field


def to_csv(rows, delimiter=","):
    """Rows of strings as CSV text, one line per row."""
    return "\n".join(delimiter.join(quote(str(f), delimiter) for f in row) for row in rows)
