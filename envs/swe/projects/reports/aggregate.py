"""Group records by a key and summarise a numeric field per group."""


def group_by(records, key):
    """{key value: [records]}, groups in order of first appearance."""
    groups = {}
    for record in records:
        groups.setdefault(record[key], []).append(record)
    return groups


def summarize(records, key, field):
    """{group: (count, total, mean rounded to 2 places)} of a numeric field."""
    out = {}
    for group, members in group_by(records, key).items():
        values = [float(m[field]) for m in members]
        total = round(sum(values), 2)
        out[group] = (len(values), total, round(total / len(values), 2))
    return out


def top(records, field, n, reverse=True):
    """The `n` records with the largest (or, with reverse=False, smallest) numeric field, stable on ties."""
    return sorted(records, key=lambda r: float(r[field]), reverse=reverse)[:n]


def share(records, key, field):
    """{group: percent of the field's grand total}, rounded to 1 place."""
    totals = {group: s[1] for group, s in summarize(records, key, field).items()}
    grand = sum(totals.values())
    if grand == 0:
        raise ValueError("shares of a zero total")
    return {group: round(100 * total / grand, 1) for group, total in totals.items()}
