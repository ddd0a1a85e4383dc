"""The CSV-report family: tests for parsing, column typing, grouping, rendering and pivot tables."""
from __future__ import annotations

import random

from jointrl.envs.swe.case import Case, call, expr, raises
from jointrl.envs.swe.family import Family, Module

REGIONS = ("north", "south", "east", "west")
PRODUCTS = ("tea", "coffee", "cocoa")


def _records(rng: random.Random, n: int = 7) -> list[dict]:
    return [{"region": rng.choice(REGIONS[:3]), "product": rng.choice(PRODUCTS), "units": str(rng.randint(1, 40)),
             "price": f"{rng.randint(1, 20)}.{rng.choice(('0', '25', '5', '75'))}"} for _ in range(n)]


def _csv(records: list[dict]) -> str:
    header = list(records[0])
    return "\n".join([",".join(header)] + [",".join(r[h] for h in header) for r in records])


def csvparse_cases(rng: random.Random) -> list[Case]:
    a, b = rng.sample(REGIONS, 2)
    records = _records(rng, 4)
    return [
        call("parse_line", f'{a},"{b}, {a}",{rng.randint(1, 99)}'),
        call("parse_line", f'"say ""{a}""",x,'),
        call("parse_line", f"{a};{b}", delimiter=";"),
        call("parse_line", ""),
        raises("CsvError", "parse_line", f'{a},"{b}'),
        call("parse", f"{a},1\n\n{b},2\n"),
        call("records", _csv(records)),
        call("records", f"x;y\n{a};{b}", delimiter=";"),
        call("records", ""),
        raises("CsvError", "records", f"x,y\n{a},{b},extra"),
    ]


def columns_cases(rng: random.Random) -> list[Case]:
    whole, cents = rng.randint(1000, 99999), rng.randint(1, 99)
    records = _records(rng, 5)
    return [
        call("to_number", f"{whole:,}.{cents:02d}"),
        call("to_number", f" {rng.randint(1, 500)} "),
        call("to_number", f"({rng.randint(1, 500)})"),
        call("to_number", ""),
        raises("ValueError", "to_number", "n/a"),
        call("infer_type", [str(rng.randint(1, 9)), "", str(rng.randint(10, 99))]),
        call("infer_type", ["1", f"{rng.randint(1, 9)}.5", ""]),
        call("infer_type", ["1", rng.choice(REGIONS)]),
        call("column", records, "region"),
        call("column", records, "units", numeric=True),
        raises("KeyError", "column", records, "colour"),
        call("column_total", records, "units"),
        call("column_total", [{"n": ""}, {"n": "2"}], "n"),
    ]


def aggregate_cases(rng: random.Random) -> list[Case]:
    records = _records(rng)
    return [
        expr("group_by", f"{{k: len(v) for k, v in group_by({records!r}, 'region').items()}}"),
        expr("group_by", f"list(group_by({records!r}, 'product'))"),
        call("summarize", records, "region", "units"),
        call("summarize", records, "product", "price"),
        call("top", records, "units", rng.randint(2, 3)),
        call("top", records, "price", 2, reverse=False),
        call("top", [{"n": "1", "id": "a"}, {"n": "1", "id": "b"}, {"n": "0", "id": "c"}], "n", 2),
        call("share", records, "region", "units"),
        raises("ValueError", "share", [{"g": "a", "n": "0"}], "g", "n"),
    ]


def render_cases(rng: random.Random) -> list[Case]:
    rows = [[rng.choice(REGIONS), rng.randint(1, 999), round(rng.uniform(0, 99), 2)] for _ in range(3)]
    return [
        call("render_table", ["region", "units", "price"], rows),
        call("render_table", ["a", "long header"], [["x", 1]]),
        call("quote", "plain"),
        call("quote", f"{rng.choice(REGIONS)}, inc"),
        call("quote", 'say "hi"'),
        call("quote", "a;b", delimiter=";"),
        call("to_csv", [["region", "note"], [rng.choice(REGIONS), 'big, "bold"']]),
        call("to_csv", [[1, 2.5, "x"]], delimiter="|"),
    ]


def pivot_cases(rng: random.Random) -> list[Case]:
    records = _records(rng)
    return [
        call("pivot", records, "region", "product", "units"),
        call("pivot", records[:2], "product", "region", "units"),
        expr("row_totals", f"row_totals(pivot({records!r}, 'region', 'product', 'units'))"),
        expr("column_totals", f"column_totals(pivot({records!r}, 'region', 'product', 'units'))"),
        call("column_totals", {"a": {"x": 1, "y": 2}, "b": {"x": 3}}),
        call("flatten", {"b": {"x": 1, "y": 2}, "a": {"y": 3}}),
        expr("flatten", f"flatten(pivot({records!r}, 'product', 'region', 'units'))"),
    ]


FAMILY = Family(
    name="reports",
    topic="the CSV report builder",
    package_names=("reportgen", "tabular", "csvreport"),
    modules=(
        Module("csvparse", csvparse_cases),
        Module("columns", columns_cases),
        Module("aggregate", aggregate_cases),
        Module("render", render_cases),
        Module("pivot", pivot_cases),
    ),
)
