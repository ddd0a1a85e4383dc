"""Temperatures in Celsius, Fahrenheit and Kelvin; nothing may go below absolute zero."""

ABSOLUTE_ZERO_C = -273.15


def to_kelvin(value, scale):
    """`value` on scale 'C', 'F' or 'K' in kelvin."""
    if scale == "C":
        kelvin = value - ABSOLUTE_ZERO_C
    elif scale == "F":
        kelvin = (value - 32) * 5 / 9 - ABSOLUTE_ZERO_C
    elif scale == "K":
        kelvin = value
    else:
        raise ValueError(f"unknown temperature scale {scale!r}")
    if kelvin < 0:
        raise ValueError(f"{value} {scale} is below absolute zero")
    return kelvin


def from_kelvin(kelvin, scale):
    """A kelvin temperature on scale 'C', 'F' or 'K'."""
    if scale == "C":
        return kelvin + ABSOLUTE_ZERO_C
    if scale == "F":
        return (kelvin + ABSOLUTE_ZERO_C) * 9 / 5 + 32
    if scale == "K":
        return kelvin
    raise ValueError(f"unknown temperature scale {scale!r}")


def convert_temperature(value, source, target):
    """`value` from one scale to another, rounded to 2 places."""
    return round(from_kelvin(to_kelvin(value, source), target), 2)


def describe(celsius):
    """'freezing' at or below 0 C, 'cold' below 10, 'mild' below 20, 'warm' below 30, else 'hot'."""
    if celsius <= 0:
        return "freezing"
    for limit, word in ((10, "cold"), (20, "mild"), (30, "warm")):
        if celsius < limit:
            return word
    return "hot"
