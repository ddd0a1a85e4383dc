"""Column values as numbers: parse '1,234.50' and '(12)' style amounts, and infer a column's type."""


def to_number(text):
    """'1,234.5' -> 1234.5, '42' -> 42, '(12)' -> -12 (accounting negative), '' -> None."""
    text = text.strip().replace(",", "")
    if not text:
        return None
    negative = text.startswith("(") and text.endswith(")")
    if negative:
        text = text[1:-1]
    value = float(text) if "." in text else int(text)
    return -value if negative else value


def infer_type(values):
    """'int' if every non-empty value is a whole number, 'float' if all are numbers, else 'text'."""
    kind = "int"
    for value in values:
        if not value.strip():
            continue
        try:
            number = to_number(value)
        except ValueError:
            return "text"
        if isinstance(number, float):
            kind = "float"
    return kind


def column(records, name, numeric=False):
    """One column of a list of records (as numbers when `numeric`); a missing column is an error."""
    if records and name not in records[0]:
        raise KeyError(f"no column {name!r}; columns are {sorted(records[0])}")
    return [to_number(r[name]) if numeric else r[name] for r in records]


def column_total(records, name):
    """The sum of a numeric column, skipping empty cells."""
    return sum(v for v in column(records, name, numeric=True) if v is not None)
