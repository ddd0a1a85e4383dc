"""Pivot records into a table of sums: one row per value of one key, one column per value of another."""


def pivot(records, row_key, column_key, field):
    """{row value: {column value: sum of field}}, rows and columns sorted; missing cells are 0."""
    rows = sorted({r[row_key] for r in records})
    columns = sorted({r[column_key] for r in records})
    table = {row: {col: 0 for col in columns} for row in rows}
    for record in records:
        table[record[row_key]][record[column_key]] += int(record[field])
    return table


def row_totals(table):
    """{row: sum across its columns}."""
    return {row: sum(cells.values()) for row, cells in table.items()}


def column_totals(table):
    """{column: sum down the rows}."""
    totals = {}
    for cells in table.values():
        for col, value in cells.items():
            totals[col] = totals.get(col, 0) + value
    return totals


def flatten(table):
    """The table as rows [row, cell, cell, ...] under a header ['', column, ...]."""
    columns = sorted({col for cells in table.values() for col in cells})
    out = [[""] + columns]
    for row in sorted(table):
        out.append([row] + [table[row].get(col, 0) for col in columns])
    return out
