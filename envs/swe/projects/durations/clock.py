"""Clock times: 12- and 24-hour notation, minutes between times across midnight, rounding."""


def parse_time(text):
    """'13:05' -> minutes after midnight."""
    hours, _, minutes = text.partition(":")
    h, m = int(hours), int(minutes)
    if not (0 <= h < 24 and 0 <= m < 60):
        raise ValueError(f"not a time of day: {text!r}")
    return h * 60 + m


def to_12h(text):
    """'13:05' -> '1:05 PM', '00:30' -> '12:30 AM'."""
    minutes = parse_time(text)
    h, m = divmod(minutes, 60)
    suffix = "AM" if h < 12 else "PM"
    h = h % 12 or 12
    return f"{h}:{m:02d} {suffix}"


def to_24h(text):
    """'1:05 PM' -> '13:05', '12:30 AM' -> '00:30'."""
    clock, _, suffix = text.strip().partition(" ")
    hours, _, minutes = clock.partition(":")
    h = int(hours) % 12
    if suffix.upper() == "PM":
        h += 12
    return f"{h:02d}:{int(minutes):02d}"


def minutes_between(start, end):
    """Minutes from `start` to `end`, wrapping past midnight when `end` is earlier."""
    return (parse_time(end) - parse_time(start)) % (24 * 60)


def round_to(text, step):
    """The time rounded to the nearest multiple of `step` minutes (halves round up), as 'HH:MM'."""
    minutes = (parse_time(text) + step // 2) // step * step % (24 * 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"
