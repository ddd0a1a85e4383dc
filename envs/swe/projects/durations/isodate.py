"""ISO 8601 calendar dates ('2024-03-05'): parse, validate, format and count the days between."""

from .calendar_math import day_of_year, days_in_month, is_leap


def parse_date(text):
    """'2024-03-05' -> (2024, 3, 5); a date that does not exist is an error."""
    parts = text.strip().split("-")
    if len(parts) != 3 or len(parts[0]) != 4 or not all(p.isdigit() for p in parts):
        raise ValueError(f"not an ISO date: {text!r}")
    year, month, day = (int(p) for p in parts)
    if not 1 <= day <= days_in_month(year, month):
        raise ValueError(f"{text!r}: day {day} does not exist in that month")
    return (year, month, day)


def format_date(year, month, day):
    """(2024, 3, 5) -> '2024-03-05'."""
    return f"{year:04d}-{month:02d}-{day:02d}"


def ordinal(year, month, day):
    """Days since 0001-01-01 (which is day 1)."""
    y = year - 1
    return y * 365 + y // 4 - y // 100 + y // 400 + day_of_year(year, month, day)


def days_between(start, end):
    """Days from one ISO date to another (negative when `end` is earlier)."""
    return ordinal(*parse_date(end)) - ordinal(*parse_date(start))


def quarter(text):
    """'2024-05-17' -> 'Q2'."""
    _, month, _ = parse_date(text)
    return f"Q{(month - 1) // 3 + 1}"


def days_in_year(year):
    """365 or 366."""
    return 366 if is_leap(year) else 365
