"""Speeds in km/h, mph, m/s and knots, and running paces written as 'm:ss' per kilometre."""

KMH = {"kmh": 1.0, "mph": 1.609344, "ms": 3.6, "kn": 1.852}


def convert_speed(value, source, target):
    """A speed from one unit to another, rounded to 3 places."""
    if source not in KMH or target not in KMH:
        raise ValueError(f"cannot convert {source!r} to {target!r}")
    return round(value * KMH[source] / KMH[target], 3)


def pace(kmh):
    """Minutes and seconds per kilometre at `kmh`, as 'm:ss' (seconds rounded)."""
    if kmh <= 0:
        raise ValueError(f"speed must be positive, got {kmh}")
    seconds = round(3600 / kmh)
    return f"{seconds // 60}:{seconds % 60:02d}"


def pace_to_kmh(text):
    """'5:00' per km -> 12.0 km/h, rounded to 2 places."""
    minutes, _, seconds = text.partition(":")
    total = int(minutes) * 60 + int(seconds)
    if total <= 0 or int(seconds) >= 60:
        raise ValueError(f"not a pace: {text!r}")
    return round(3600 / total, 2)


def finish_time(distance_km, pace_text):
    """The time to run `distance_km` at a pace, as 'h:mm:ss'."""
    minutes, _, seconds = pace_text.partition(":")
    total = round(distance_km * (int(minutes) * 60 + int(seconds)))
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
