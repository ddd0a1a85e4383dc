"""Data sizes: bytes to '1.5 MiB' (binary) or '1.6 MB' (decimal) and back."""

BINARY = ("B", "KiB", "MiB", "GiB", "TiB")
DECIMAL = ("B", "kB", "MB", "GB", "TB")


def human_bytes(count, binary=True):
    """A byte count with one decimal in the largest unit that keeps it at least 1 ('512 B' has none)."""
    if count < 0:
        raise ValueError(f"negative size {count}")
    base, units = (1024, BINARY) if binary else (1000, DECIMAL)
    value, unit = float(count), 0
    while value >= base and unit < len(units) - 1:
        value /= base
        unit += 1
    if unit == 0:
        return f"{count} B"
    return f"{value:.1f} {units[unit]}"


def parse_size(text):
    """'1.5 MiB' -> 1572864, '2 kB' -> 2000; the result is rounded to whole bytes."""
    number, _, unit = text.strip().partition(" ")
    for base, units in ((1024, BINARY), (1000, DECIMAL)):
        if unit in units:
            return round(float(number) * base ** units.index(unit))
    raise ValueError(f"unknown size unit {unit!r}")


def fits(sizes, capacity):
    """How many of `sizes` (strings like '3 MB'), taken in order, fit in `capacity` bytes together."""
    used = 0
    for n, size in enumerate(sizes):
        used += parse_size(size)
        if used > capacity:
            return n
    return len(sizes)
