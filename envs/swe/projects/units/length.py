"""Lengths in metric and imperial units: convert, parse '3.5 km', and pick a readable metric unit."""

TO_METERS = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254, "ft": 0.3048, "yd": 0.9144, "mi": 1609.344}


def convert_length(value, source, target):
    """`value` in unit `source` expressed in unit `target`, rounded to 6 places."""
    for unit in (source, target):
        if unit not in TO_METERS:
            raise ValueError(f"unknown length unit {unit!r}")
    return round(value * TO_METERS[source] / TO_METERS[target], 6)


def parse_length(text):
    """'3.5 km' or '12in' -> metres, rounded to 6 places."""
    text = text.strip()
    split = len(text)
    while split > 0 and text[split - 1].isalpha():
        split -= 1
    number, unit = text[:split].strip(), text[split:]
    if not number:
        raise ValueError(f"no number in {text!r}")
    return convert_length(float(number), unit, "m")


def readable(meters):
    """Metres as a string in the largest metric unit that keeps the number at least 1 ('1.5 km')."""
    for unit in ("km", "m", "cm"):
        if meters >= TO_METERS[unit]:
            return f"{round(meters / TO_METERS[unit], 2):g} {unit}"
    return f"{round(meters / TO_METERS['mm'], 2):g} mm"
