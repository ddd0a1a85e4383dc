"""Durations written like '1h30m' or '2d 4h': parse them to seconds and format seconds back."""

UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def parse_duration(text):
    """'1h30m15s' -> 5415; units d, h, m, s in that order, each at most once; spaces are ignored."""
    text = text.replace(" ", "").lower()
    if not text:
        raise ValueError("empty duration")
    total, number, last = 0, "", -1
    for char in text:
        if char.isdigit():
            number += char
            continue
        position = next((i for i, (unit, _) in enumerate(UNITS) if unit == char), None)
        if position is None or not number or position <= last:
            raise ValueError(f"bad duration {text!r} at {char!r}")
        total += int(number) * UNITS[position][1]
        number, last = "", position
    if number:
        raise ValueError(f"bad duration {text!r}: {number} has no unit")
    return total


def format_duration(seconds, largest="d"):
    """5415 -> '1h 30m 15s', never using a unit larger than `largest`; 0 -> '0s'."""
    if seconds < 0:
        raise ValueError(f"negative duration {seconds}")
    start = next(i for i, (unit, _) in enumerate(UNITS) if unit == largest)
    parts = []
    for unit, size in UNITS[start:]:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return " ".join(parts) or "0s"


def total_minutes(texts):
    """The summed length of several durations, in whole minutes rounded down."""
    return sum(parse_duration(text) for text in texts) // 60
