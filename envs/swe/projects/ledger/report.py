"""Summaries of (date, account, cents) records: totals per account and month, the largest movements."""


def by_account(records):
    """{account: total cents}."""
    totals = {}
    for _, account, cents in records:
        totals[account] = totals.get(account, 0) + cents
    return totals


def by_month(records):
    """{'YYYY-MM': total cents}, months in order."""
    totals = {}
    for date, _, cents in sorted(records):
        month = date[:7]
        totals[month] = totals.get(month, 0) + cents
    return totals


def largest(records, n, outgoing=False):
    """The `n` records with the largest amounts (the most negative ones when `outgoing`), ties by date."""
    if outgoing:
        ranked = sorted(records, key=lambda r: (r[2], r[0]))
    else:
        ranked = sorted(records, key=lambda r: (-r[2], r[0]))
    return ranked[:n]


def running_balance(records, opening=0):
    """The balance after each record, in date order, starting from `opening`."""
    balance = opening
    out = []
    for record in sorted(records):
        balance += record[2]
        out.append(balance)
    return out
