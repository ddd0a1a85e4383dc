"""CSV family: filter, aggregate and join comma-separated files into an exact output file."""
from __future__ import annotations

import random

from jointrl.envs.terminal import vocab
from jointrl.envs.terminal.task import File, Step, Task

FINISH = "a one-line summary of what you wrote."
COUNTRIES = ("Norway", "Chile", "Kenya", "Japan", "Canada", "Spain", "Peru")


def money(cents: int) -> str:
    """Cents as a decimal string with two places."""
    return f"{cents // 100}.{cents % 100:02d}"


def _sales(rng: random.Random, count: int, regions: list[str]) -> list[list]:
    products = vocab.words(rng, 6) + [f"{regions[0]}-star"]
    rows = []
    for i in range(count):
        date = f"{rng.choice([2022, 2023, 2024])}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        rows.append([1000 + i, date, rng.choice(regions), rng.choice(products), rng.randint(1, 40), rng.randint(99, 25000)])
    return rows


def _sales_csv(rows: list[list]) -> str:
    lines = ["id,date,region,product,units,price"]
    lines += [f"{r[0]},{r[1]},{r[2]},{r[3]},{r[4]},{money(r[5])}" for r in rows]
    return "\n".join(lines) + "\n"


def _filter(rng: random.Random) -> Task:
    region = rng.choice(["north", "south", "east", "west"])
    lookalike = f"{region}east" if region in ("north", "south") else f"{region}ern"
    regions = [region, lookalike, "central", rng.choice(["north", "south", "east", "west"])]
    rows = _sales(rng, rng.randint(25, 45), regions)
    rows[0][2] = region
    text = _sales_csv(rows)
    lines = text.splitlines()
    expected = "\n".join([lines[0]] + [line for line, row in zip(lines[1:], rows) if row[2] == region]) + "\n"
    # Per-seed file names: a remembered awk line reads and writes nothing on another seed.
    source, folder = vocab.words(rng, 2)
    source, out = f"{source}-sales.csv", f"{folder}/{region}.csv"
    prompt = (f"Write to `{out}` the header line of `{source}` followed by every row whose `region` column is "
              f"exactly `{region}` (not merely containing it), in their original order.")
    steps = [
        Step(f"head -5 {source} && cut -d, -f3 {source} | sort | uniq -c", "Look at the columns and the region values."),
        Step(f"mkdir -p {folder} && awk -F, 'NR == 1 || $3 == \"{region}\"' {source} > {out} && wc -l {out}",
             "Compare the third field exactly instead of grepping, which would also hit look-alike regions and products."),
    ]
    return Task(prompt, FINISH, {source: text}, steps, [File(out, expected, match="table")])


def _aggregate(rng: random.Random) -> Task:
    rows = _sales(rng, rng.randint(60, 120), list(vocab.REGIONS))
    year = rng.choice([2022, 2023, 2024])
    totals: dict[str, int] = {}
    for r in rows:
        if r[1].startswith(f"{year}-"):
            totals[r[2]] = totals.get(r[2], 0) + r[4] * r[5]
    expected = "region,revenue\n" + "".join(f"{k},{money(v)}\n" for k, v in sorted(totals.items()))
    source, out = (f"{w}.csv" for w in vocab.words(rng, 2))
    prompt = (
        f"From `{source}`, write `{out}` with the header `region,revenue` and one row per region that has sales "
        f"dated in {year}: revenue is the sum of `units * price` over that region's {year} rows only, written with "
        "exactly two decimals. Sort the rows by region name."
    )
    steps = [
        Step(f"head -5 {source}", "Check the column order: date is field 2, region 3, units 5, price 6."),
        Step(f"{{ echo region,revenue; awk -F, 'NR > 1 && substr($2, 1, 4) == \"{year}\" {{ r[$3] += $5 * $6 }} "
             f"END {{ for (k in r) printf \"%s,%.2f\\n\", k, r[k] }}' {source} | sort; }} > {out} && cat {out}",
             "Sum per region in awk over the chosen year, print two decimals, sort by name, and put the header first."),
    ]
    return Task(prompt, FINISH, {source: _sales_csv(rows)}, steps, [File(out, expected, match="table")])


def _join(rng: random.Random) -> Task:
    country = rng.choice(COUNTRIES)
    top_n = rng.choice([3, 4, 5])
    while True:
        names = vocab.people(rng, rng.randint(14, 20))
        customers = [(200 + i, name, country if i % 3 == 0 else rng.choice(COUNTRIES)) for i, name in enumerate(names)]
        orders = []
        for i in range(rng.randint(70, 110)):
            status = rng.choice(["paid", "paid", "Paid", "PAID", "refunded", "cancelled", "pending"])
            date = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            orders.append({"order_id": 5000 + i, "customer_id": rng.choice(customers)[0], "status": status,
                           "amount": rng.randint(500, 90000), "date": date})
        totals = {c[0]: 0 for c in customers if c[2] == country}
        for o in orders:
            if o["customer_id"] in totals and o["status"].lower() == "paid":
                totals[o["customer_id"]] += o["amount"]
        ranked = sorted(((v, k) for k, v in totals.items() if v > 0), reverse=True)
        # Distinct totals make the order unambiguous; enough buyers make the cut-off matter.
        if len(ranked) > top_n and len({v for v, _ in ranked}) == len(ranked):
            break
    columns = ["order_id", "customer_id", "date", "status", "amount"]
    rng.shuffle(columns)
    order_lines = [",".join(columns)] + [",".join(money(o[c]) if c == "amount" else str(o[c]) for c in columns) for o in orders]
    customer_lines = ["customer_id,name,country"] + [f"{i},{n},{c}" for i, n, c in customers]
    by_id = {c[0]: c[1] for c in customers}
    expected = "name,total\n" + "".join(f"{by_id[k]},{money(v)}\n" for v, k in ranked[:top_n])
    shop = rng.choice(vocab.WORDS)
    clients, sales, out = f"{shop}/customers.csv", f"{shop}/orders.csv", f"{rng.choice(vocab.WORDS)}-top.csv"
    prompt = (
        f"`{clients}` and `{sales}` describe a shop. For the customers whose country is `{country}`, add up the "
        "`amount` of their orders whose `status` is paid (compare the status case-insensitively; refunded, cancelled and "
        f"pending orders do not count). Write `{out}` with the header `name,total` and the {top_n} customers "
        f"with the highest totals, highest first, totals with exactly two decimals. Mind the column order of `{sales}`."
    )
    script = (
        f"{{ echo name,total; awk -F, -v C='{country}' 'NR == FNR {{ if (FNR > 1 && $3 == C) name[$1] = $2; next }} "
        "FNR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next } "
        "($col[\"customer_id\"] in name) && tolower($col[\"status\"]) == \"paid\" { t[$col[\"customer_id\"]] += $col[\"amount\"] } "
        f"END {{ for (c in t) printf \"%s,%.2f\\n\", name[c], t[c] }}' {clients} {sales} | "
        f"sort -t, -k2,2nr | head -{top_n}; }} > {out} && cat {out}"
    )
    steps = [
        Step(f"head -3 {clients} {sales} && "
             f"cut -d, -f$(head -1 {sales} | tr , '\\n' | grep -n status | cut -d: -f1) {sales} | sort | uniq -c",
             "Check both headers and the spellings of status."),
        Step(script, f"Read the customers of that country first, find the columns of {sales} by name from its header, "
                     "sum paid amounts case-insensitively, then sort by total and keep the top rows."),
    ]
    files = {clients: "\n".join(customer_lines) + "\n", sales: "\n".join(order_lines) + "\n"}
    return Task(prompt, FINISH, files, steps, [File(out, expected, match="table")])


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: filter rows exactly; medium: group-by sum for one year; hard: join two files, case-blind status, top N."""
    return {"easy": _filter, "medium": _aggregate, "hard": _join}[difficulty](rng)
