"""Parse CSV text: quoted fields with doubled quotes inside, a chosen delimiter, header rows to records."""


class CsvError(ValueError):
    """Malformed CSV (an unterminated quote, a row of the wrong width)."""


def parse_line(line, delimiter=","):
    """The fields of one CSV line; a quoted field may hold the delimiter and "" for a quote."""
    fields, field, quoted, i = [], "", False, 0
    while i < len(line):
        char = line[i]
        if quoted:
            if char == '"' and i + 1 < len(line) and line[i + 1] == '"':
                field += '"'
                i += 1
            elif char == '"':
                quoted = False
            else:
                field += char
        elif char == '"' and not field:
            quoted = True
        elif char == delimiter:
            fields.append(field)
            field = ""
        else:
            field += char
        i += 1
    if quoted:
        raise CsvError(f"unterminated quote in {line!r}")
    fields.append(field)
    return fields


def parse(text, delimiter=","):
    """All rows of `text`, skipping blank lines."""
    return [parse_line(line, delimiter) for line in text.splitlines() if line.strip()]


def records(text, delimiter=","):
    """Rows after the header as {column: value} dicts; every row must be as wide as the header."""
    rows = parse(text, delimiter)
    if not rows:
        return []
    header, out = rows[0], []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise CsvError(f"line {number} has {len(row)} fields, the header has {len(header)}")
        out.append(dict(zip(header, row)))
    return out
