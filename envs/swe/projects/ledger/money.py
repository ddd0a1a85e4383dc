"""Money as integer cents: parse and format amounts, split a total fairly, take percentages."""


def parse_amount(text):
    """'1,234.5' -> 123450 cents; a leading '-' makes it negative; more than two decimals is an error."""
    text = text.strip().replace(",", "")
    negative = text.startswith("-")
    if negative:
        text = text[1:]
    whole, _, fraction = text.partition(".")
    if len(fraction) > 2 or not (whole or fraction):
        raise ValueError(f"not an amount of money: {text!r}")
    cents = int(whole or "0") * 100 + int(fraction.ljust(2, "0") or "0")
    return -cents if negative else cents


def format_cents(cents):
    """123450 -> '1,234.50'; negative amounts get a leading '-'."""
    sign = "-" if cents < 0 else ""
    whole, fraction = divmod(abs(cents), 100)
    return f"{sign}{whole:,}.{fraction:02d}"


def split_evenly(total, parts):
    """Split `total` cents into `parts` shares that differ by at most a cent, larger shares first."""
    if parts <= 0:
        raise ValueError(f"cannot split into {parts} parts")
    share, left = divmod(total, parts)
    return [share + 1 if i < left else share for i in range(parts)]


def percent_of(cents, percent):
    """`percent`% of `cents`, rounded half up to a whole cent."""
    return (cents * percent + 50) // 100
