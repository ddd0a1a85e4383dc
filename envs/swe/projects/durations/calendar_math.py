"""Calendar arithmetic on (year, month, day) triples of the proleptic Gregorian calendar."""

DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_leap(year):
    """Divisible by 4, except centuries not divisible by 400."""
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year, month):
    """How many days `month` (1-12) of `year` has."""
    if not 1 <= month <= 12:
        raise ValueError(f"month {month} is not in 1..12")
    if month == 2 and is_leap(year):
        return 29
    return DAYS_IN_MONTH[month - 1]


def day_of_year(year, month, day):
    """1 for January 1st, up to 365 or 366."""
    return sum(days_in_month(year, m) for m in range(1, month)) + day


def add_days(year, month, day, days):
    """The date `days` after (or before, when negative) the given one."""
    day += days
    while day > days_in_month(year, month):
        day -= days_in_month(year, month)
        month += 1
        if month > 12:
            year, month = year + 1, 1
    while day < 1:
        month -= 1
        if month < 1:
            year, month = year - 1, 12
        day += days_in_month(year, month)
    return (year, month, day)


def weekday(year, month, day):
    """0 for Monday up to 6 for Sunday (Sakamoto's method)."""
    offsets = (0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4)
    if month < 3:
        year -= 1
    sunday_based = (year + year // 4 - year // 100 + year // 400 + offsets[month - 1] + day) % 7
    return (sunday_based + 6) % 7
