"""Working days: skip weekends and listed holidays when counting or stepping through dates."""

from .calendar_math import add_days, weekday


def is_business_day(date, holidays=()):
    """Monday to Friday and not a holiday; dates are (year, month, day)."""
    return weekday(*date) < 5 and date not in holidays


def business_days_between(start, end, holidays=()):
    """Business days d with start <= d < end."""
    count, date = 0, start
    while date < end:
        if is_business_day(date, holidays):
            count += 1
        date = add_days(*date, 1)
    return count


def add_business_days(start, days, holidays=()):
    """The date `days` business days after `start` (a non-negative count)."""
    if days < 0:
        raise ValueError(f"cannot step back {days} business days")
    date = start
    while days > 0:
        date = add_days(*date, 1)
        if is_business_day(date, holidays):
            days -= 1
    return date


def next_business_day(date, holidays=()):
    """`date` itself if it is a business day, else the first one after it."""
    while not is_business_day(date, holidays):
        date = add_days(*date, 1)
    return date
