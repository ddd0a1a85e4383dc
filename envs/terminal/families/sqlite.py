"""SQLite family: query a shop database into a file, update rows by rules, and combine a report with an update."""
from __future__ import annotations

import random
import sqlite3

from jointrl.envs.terminal import vocab
from jointrl.envs.terminal.families.csvreport import money
from jointrl.envs.terminal.task import File, Sql, Step, Task

FINISH = "a one-line summary of what you did."
SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL, tier TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,
                       price_cents INTEGER NOT NULL, stock INTEGER NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     product_id INTEGER NOT NULL REFERENCES products(id), qty INTEGER NOT NULL, status TEXT NOT NULL);
"""


def _shop(rng: random.Random, customers: int, products: int, orders: int) -> dict[str, list[tuple]]:
    names = vocab.people(rng, customers)
    data = {
        "customers": [(i + 1, n, rng.choice(vocab.CITIES[:5]), rng.choice(["basic", "basic", "silver"]))
                      for i, n in enumerate(names)],
        "products": [(i + 1, w, rng.choice(vocab.CATEGORIES), rng.randint(199, 9999), rng.randint(0, 60))
                     for i, w in enumerate(vocab.words(rng, products))],
    }
    data["orders"] = [(i + 1, rng.randint(1, customers), rng.randint(1, products), rng.randint(1, 5),
                       rng.choice(["paid", "paid", "paid", "shipped", "cancelled", "refunded"])) for i in range(orders)]
    return data


def database(data: dict[str, list[tuple]]) -> bytes:
    """The shop as the bytes of an SQLite database file."""
    connection = sqlite3.connect(":memory:")
    try:
        connection.executescript(SCHEMA)
        for table, rows in data.items():
            connection.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
        connection.commit()
        return connection.serialize()
    finally:
        connection.close()


def _db_name(rng: random.Random) -> str:
    """A per-seed database file name, so remembered sqlite3 commands open nothing on another seed."""
    return f"{rng.choice(vocab.WORDS)}-{rng.choice(['shop', 'store', 'orders', 'sales'])}.db"


def _query(rng: random.Random) -> Task:
    data = _shop(rng, rng.randint(15, 25), 10, 30)
    city = data["customers"][0][2]
    expected = sorted(name for _, name, c, _ in data["customers"] if c == city)
    db, folder = _db_name(rng), rng.choice(vocab.WORDS)
    out = f"{folder}/{city.lower()}.txt"
    prompt = (f"`{db}` is an SQLite database. Write the names of all customers whose city is `{city}` to `{out}`, "
              "one per line, sorted alphabetically (byte order), nothing else in the file.")
    steps = [
        Step(f"sqlite3 {db} '.schema customers'", "Check the table's columns."),
        Step(f"mkdir -p {folder} && sqlite3 {db} \"SELECT name FROM customers WHERE city = '{city}' ORDER BY name\" > {out} "
             f"&& cat {out}", "Select, sort in SQL (binary collation is byte order), and redirect."),
    ]
    checks = [File(out, "".join(f"{n}\n" for n in expected)),
              Sql(db, "SELECT * FROM customers ORDER BY id", tuple(data["customers"]), keep=True)]
    return Task(prompt, FINISH, {db: database(data)}, steps, checks)


def _update(rng: random.Random) -> Task:
    data = _shop(rng, 12, rng.randint(18, 26), rng.randint(40, 60))
    category, threshold, amount = rng.choice(vocab.CATEGORIES), rng.randint(4, 20), rng.choice(range(10, 65, 5))
    # At least one product to restock and one order to delete.
    data["products"][0] = (1, data["products"][0][1], category, data["products"][0][3], threshold - 1)
    data["orders"][0] = data["orders"][0][:4] + ("cancelled",)
    products = [(i, n, c, p, s + amount if c == category and s < threshold else s) for i, n, c, p, s in data["products"]]
    orders = [o for o in data["orders"] if o[4] != "cancelled"]
    db = _db_name(rng)
    prompt = (
        f"`{db}` is an SQLite database. 1) Restock: for every product in category `{category}` whose `stock` is below "
        f"{threshold}, add {amount} to its stock. 2) Delete every order whose status is `cancelled`. Change nothing else."
    )
    steps = [
        Step(f"sqlite3 {db} '.schema' && sqlite3 {db} 'SELECT status, COUNT(*) FROM orders GROUP BY status'",
             "Schema and statuses."),
        Step(f"sqlite3 {db} \"UPDATE products SET stock = stock + {amount} WHERE category = '{category}' AND stock < {threshold}; "
             "DELETE FROM orders WHERE status = 'cancelled'; SELECT changes();\"", "Both changes as two statements in one run."),
    ]
    checks = [Sql(db, "SELECT * FROM products ORDER BY id", tuple(products)),
              Sql(db, "SELECT * FROM orders ORDER BY id", tuple(orders)),
              Sql(db, "SELECT * FROM customers ORDER BY id", tuple(data["customers"]), keep=True)]
    return Task(prompt, FINISH, {db: database(data)}, steps, checks)


def _report(rng: random.Random) -> Task:
    top_n = rng.choice([3, 4, 5])
    while True:
        data = _shop(rng, rng.randint(12, 18), rng.randint(10, 16), rng.randint(60, 90))
        price = {p[0]: p[3] for p in data["products"]}
        spent = {c[0]: 0 for c in data["customers"]}
        for _, customer, product, qty, status in data["orders"]:
            if status in ("paid", "shipped"):
                spent[customer] += qty * price[product]
        ranked = sorted(((v, k) for k, v in spent.items()), reverse=True)
        if len({v for v, _ in ranked}) == len(ranked):
            break
    # The cut-off sits exactly on one customer's spending or one cent above another's: `at least` must be exact.
    cut = rng.randint(2, top_n + 2)
    threshold = ranked[cut - 1][0] if rng.random() < 0.5 else ranked[cut][0] + 1
    names = {c[0]: c[1] for c in data["customers"]}
    customers = [(i, n, city, "gold" if spent[i] >= threshold else tier) for i, n, city, tier in data["customers"]]
    report = "name,spent\n" + "".join(f"{names[k]},{money(v)}\n" for v, k in ranked[:top_n])
    db, out = _db_name(rng), f"{rng.choice(vocab.WORDS)}-top.csv"
    prompt = (
        f"`{db}` is an SQLite database. A customer's spending is the sum of `qty * price_cents` over their orders whose "
        f"status is `paid` or `shipped`. 1) Write `{out}` with the header `name,spent` and the "
        f"{top_n} customers who spent most, most first, `spent` in currency units with exactly two decimals (cents / 100). "
        f"2) Set `tier` to `gold` for every customer whose spending is at least {threshold} cents; leave other customers' "
        "tiers as they are. Change nothing else."
    )
    spending = ("SELECT c.id, c.name, COALESCE(SUM(o.qty * p.price_cents), 0) AS total FROM customers c "
                "LEFT JOIN orders o ON o.customer_id = c.id AND o.status IN ('paid', 'shipped') "
                "LEFT JOIN products p ON p.id = o.product_id GROUP BY c.id")
    steps = [
        Step(f"sqlite3 {db} '.schema'", "See how the tables relate."),
        Step(f"sqlite3 -header -csv {db} \"SELECT name, printf('%.2f', total / 100.0) AS spent FROM ({spending}) "
             f"ORDER BY total DESC LIMIT {top_n}\" > {out} && cat {out}",
             "Spending per customer with a join, then the top rows as CSV with a header."),
        Step(f"sqlite3 {db} \"UPDATE customers SET tier = 'gold' WHERE id IN "
             f"(SELECT id FROM ({spending}) WHERE total >= {threshold}); SELECT name, tier FROM customers WHERE tier = 'gold';\"",
             "Promote by the same spending query."),
    ]
    checks = [File(out, report, match="table"),
              Sql(db, "SELECT * FROM customers ORDER BY id", tuple(customers)),
              Sql(db, "SELECT * FROM orders ORDER BY id", tuple(data["orders"]), keep=True)]
    return Task(prompt, FINISH, {db: database(data)}, steps, checks)


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: a filtered, sorted query into a file; medium: two rule-based updates; hard: joined report plus an update."""
    return {"easy": _query, "medium": _update, "hard": _report}[difficulty](rng)
