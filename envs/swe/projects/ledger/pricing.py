"""Prices in cents: discounts, volume tiers, tax and invoice totals (all rounded half up to the cent)."""


def apply_discount(cents, percent):
    """The price after taking `percent`% off."""
    if not 0 <= percent <= 100:
        raise ValueError(f"discount must be between 0 and 100 percent, got {percent}")
    return cents - (cents * percent + 50) // 100


def tier_discount(quantity, tiers):
    """The discount percent of the largest tier whose minimum quantity `quantity` reaches (0 if none).

    `tiers` is a list of (minimum quantity, percent) pairs in any order.
    """
    best = 0
    for minimum, percent in tiers:
        if quantity >= minimum and percent > best:
            best = percent
    return best


def line_total(quantity, unit_cents, tiers=()):
    """quantity * unit price, less the volume discount."""
    return apply_discount(quantity * unit_cents, tier_discount(quantity, tiers))


def tax(cents, rate_percent):
    """Tax at `rate_percent`% on `cents`."""
    return (cents * rate_percent + 50) // 100


def invoice_total(lines, rate_percent, tiers=()):
    """(subtotal, tax, total) for (quantity, unit_cents) lines."""
    subtotal = sum(line_total(quantity, unit, tiers) for quantity, unit in lines)
    owed = tax(subtotal, rate_percent)
    return subtotal, owed, subtotal + owed
