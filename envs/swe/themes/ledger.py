"""The bookkeeping family: tests for money in cents, a ledger, stock levels, pricing and reports."""
from __future__ import annotations

import random

from jointrl.envs.swe.case import Case, call, raises, script
from jointrl.envs.swe.family import Family, Module

ACCOUNTS = ("cash", "bank", "rent", "sales", "travel", "savings", "payroll")
SKUS = ("AX-1", "BK-7", "CR-3", "DL-9", "EM-2", "FX-5")


def money_cases(rng: random.Random) -> list[Case]:
    whole = rng.randint(1000, 99999)
    cents = rng.randint(10, 99)
    total = rng.randint(100, 9999)
    return [
        call("parse_amount", f"{whole:,}.{cents}"),
        call("parse_amount", f"-{rng.randint(1, 99)}.5"),
        call("parse_amount", f" {rng.randint(1, 9)} "),
        call("parse_amount", ".07"),
        raises("ValueError", "parse_amount", "1.234"),
        raises("ValueError", "parse_amount", "-"),
        call("format_cents", whole * 100 + cents),
        call("format_cents", -rng.randint(1, 99999)),
        call("format_cents", 5),
        call("split_evenly", total, rng.randint(3, 7)),
        call("split_evenly", 9, 3),
        raises("ValueError", "split_evenly", total, 0),
        call("percent_of", total, rng.randint(1, 40)),
        call("percent_of", 250, 1),
    ]


def ledger_cases(rng: random.Random) -> list[Case]:
    a, b, c = rng.sample(ACCOUNTS, 3)
    x, y = rng.randint(500, 5000), rng.randint(100, 499)
    opened = ["ledger = Ledger()", f"ledger.post({a!r}, {x})", f"ledger.post({b!r}, {y})"]
    return [
        script("balance", opened, f"ledger.balance({a!r})"),
        script("balance", opened + [f"ledger.post({a!r}, -{y})"], f"ledger.balance({a!r})"),
        script("balance", opened, f"ledger.balance({c!r})"),
        script("post_rejects", opened, f"ledger.post({a!r}, 0)", raises="ValueError"),
        script("transfer", opened + [f"ledger.transfer({a!r}, {c!r}, {x})"], f"[ledger.balance({a!r}), ledger.balance({c!r})]"),
        script("transfer_rejects", opened, f"ledger.transfer({b!r}, {c!r}, {y + 1})", raises="InsufficientFunds"),
        script("transfer_rejects", opened, f"ledger.transfer({a!r}, {a!r}, 1)", raises="ValueError"),
        script("transfer_rejects", opened, f"ledger.transfer({a!r}, {b!r}, 0)", raises="ValueError"),
        script("transfer", ["ledger = Ledger(allow_overdraft=True)", f"ledger.transfer({b!r}, {a!r}, {y})"],
               f"ledger.balance({b!r})"),
        script("accounts", opened + [f"ledger.post({c!r}, 1)"], "ledger.accounts()"),
        script("history", opened + [f"ledger.post({a!r}, {y}, 'refund')", f"ledger.post({a!r}, -1, 'fee')"],
               f"ledger.history({a!r}, last=2)"),
        script("history", opened, f"ledger.history({a!r}, last=5)"),
        script("trial_balance", ["ledger = Ledger(allow_overdraft=True)", f"ledger.transfer({a!r}, {b!r}, {x})",
                                 f"ledger.transfer({b!r}, {c!r}, {y})"], "ledger.trial_balance()"),
    ]


def inventory_cases(rng: random.Random) -> list[Case]:
    s1, s2, s3 = rng.sample(SKUS, 3)
    q1, q2 = rng.randint(5, 20), rng.randint(1, 4)
    stocked = ["inv = Inventory()", f"inv.receive({s1!r}, {q1})", f"inv.receive({s2!r}, {q2})"]
    prices = {s1: rng.randint(100, 900), s2: rng.randint(100, 900)}
    return [
        script("stock", stocked + [f"inv.receive({s1!r}, 3)"], f"inv.stock({s1!r})"),
        script("stock", stocked, f"inv.stock({s3!r})"),
        script("ship", stocked + [f"inv.ship({s1!r}, {q1 - 2})"], f"inv.stock({s1!r})"),
        script("ship", stocked + [f"inv.ship({s2!r}, {q2})"], "sorted(inv.levels)"),
        script("ship_rejects", stocked, f"inv.ship({s2!r}, {q2 + 1})", raises="OutOfStock"),
        script("receive_rejects", stocked, f"inv.receive({s3!r}, 0)", raises="ValueError"),
        script("low_stock", stocked, f"inv.low_stock({q2})"),
        script("low_stock", stocked, f"inv.low_stock({q2 - 1})"),
        script("value", stocked, f"inv.value({prices!r})"),
        script("value", stocked, f"inv.value({{{s1!r}: 10}})"),
        script("reorder", stocked, f"inv.reorder({{{s1!r}: {q1 + 5}, {s2!r}: {q2}, {s3!r}: 4}})"),
    ]


def pricing_cases(rng: random.Random) -> list[Case]:
    price = rng.randint(199, 9999)
    tiers = [(10, 5), (50, 12), (25, 8)]
    rng.shuffle(tiers)
    lines = [(rng.randint(1, 60), rng.randint(50, 2000)) for _ in range(3)]
    return [
        call("apply_discount", price, rng.randint(5, 50)),
        call("apply_discount", 999, 100),
        call("apply_discount", 250, 1),
        raises("ValueError", "apply_discount", price, 101),
        call("tier_discount", rng.randint(10, 60), tiers),
        call("tier_discount", 25, tiers),
        call("tier_discount", 9, tiers),
        call("line_total", rng.randint(20, 60), rng.randint(50, 500), tiers),
        call("line_total", 3, 199),
        call("tax", price, rng.choice((7, 8, 19, 20))),
        call("tax", 50, 1),
        call("invoice_total", lines, rng.choice((7, 19)), tiers),
    ]


def report_cases(rng: random.Random) -> list[Case]:
    records = []
    for _ in range(8):
        date = f"2024-{rng.randint(1, 4):02d}-{rng.randint(1, 28):02d}"
        records.append((date, rng.choice(ACCOUNTS[:4]), rng.choice((-1, 1)) * rng.randint(100, 5000)))
    return [
        call("by_account", records),
        call("by_month", records),
        call("by_month", [("2024-02-01", "cash", 5), ("2024-01-31", "cash", 7), ("2024-02-29", "bank", -2)]),
        call("largest", records, 3),
        call("largest", records, 2, outgoing=True),
        call("largest", [("2024-01-02", "a", 10), ("2024-01-01", "b", 10), ("2024-01-03", "c", 3)], 2),
        call("running_balance", records),
        call("running_balance", records[:3], opening=rng.randint(1000, 2000)),
    ]


FAMILY = Family(
    name="ledger",
    topic="the bookkeeping package",
    package_names=("ledgerly", "bookkeep", "tallybook"),
    modules=(
        Module("money", money_cases),
        Module("ledger", ledger_cases),
        Module("inventory", inventory_cases),
        Module("pricing", pricing_cases),
        Module("report", report_cases),
    ),
)
