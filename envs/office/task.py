"""What a question family produces: the question, its gold answer, the reads that answer it, and the solver.

`Task.solve` computes the answer from an Evidence of parsed tool outputs (what the demo read); the
gold is computed from the report's figures. Helpers here are shared by both sides of that pair.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence, TypeVar

from jointrl.envs.office.documents import FACILITY, HEADCOUNT, RATES, REVENUE, STAFF_COST, Document, fy
from jointrl.envs.office.evidence import Evidence, Table
from jointrl.envs.office.matching import Gold
from jointrl.envs.office.report import REGIONS, Report

T = TypeVar("T")
SEGMENT = re.compile(r"Growth segment comprises (.+?);")


@dataclass(frozen=True)
class Read:
    """One reading step of the demo: a whole sheet of the workbook, or every page of a docx or pdf, or one
    page of it (a number, or a section that page 1's contents locate)."""

    tool: str  # "read_xlsx" | "read_docx" | "read_pdf"
    file: str
    why: str  # the demo's reasoning before the read
    sheet: str | None = None
    page: int | str | None = None  # None: every page


@dataclass(frozen=True)
class Task:
    """One question with its gold answer, the reads that answer it and the solver over what was read."""

    question: str
    gold: Gold
    reads: tuple[Read, ...]
    solve: Callable[[Evidence], tuple[float | str, str]]  # -> (answer, the worked steps in words)

    @property
    def needed(self) -> tuple[str, ...]:
        """The files a solution must open."""
        return tuple(dict.fromkeys(r.file for r in self.reads))


class Files:
    """The bundle's three files by role, with the Read steps that open them."""

    def __init__(self, docs: dict[str, Document]):
        by_kind = {d.kind: d.name for d in docs.values()}
        self.xlsx, self.docx, self.pdf = by_kind["xlsx"], by_kind["docx"], by_kind["pdf"]

    def sheet(self, name: str, why: str) -> Read:
        """Read one sheet of the workbook."""
        return Read("read_xlsx", self.xlsx, why, name)

    def report(self, why: str) -> Read:
        """Read every page of the annual report."""
        return Read("read_docx", self.docx, why)

    def review(self, why: str) -> Read:
        """Read every page of the KPI review."""
        return Read("read_pdf", self.pdf, why)

    def report_page(self, page: int | str, why: str) -> Read:
        """Read one page of the annual report: a number, or a section named in its contents."""
        return Read("read_docx", self.docx, why, page=page)

    def review_page(self, page: int | str, why: str) -> Read:
        """Read one page of the KPI review: a number, or a section named in its contents."""
        return Read("read_pdf", self.pdf, why, page=page)


class Unsuitable(Exception):
    """The report has no figures that make this family's question well posed (the env redraws)."""


def choose(rng: random.Random, options: Iterable[T], ok: Callable[[T], bool]) -> T:
    """A random option that passes `ok`; Unsuitable when none does."""
    options = list(options)
    rng.shuffle(options)
    for option in options:
        if ok(option):
            return option
    raise Unsuitable("no option fits")


def separated(values: Sequence[float], rel_gap: float) -> bool:
    """Whether sorted neighbours differ by at least rel_gap of the largest magnitude (no near-ties)."""
    ordered = sorted(values)
    scale = max(abs(v) for v in ordered) or 1.0
    return all(b - a >= rel_gap * scale for a, b in zip(ordered, ordered[1:]))


def change_pct(new: float, old: float) -> float:
    """Percent change from old to new."""
    return (new - old) / old * 100.0


def money(value: float, currency: str, thousand: bool = True, decimals: int = 1) -> Gold:
    """A gold amount of money, in thousands unless told otherwise."""
    return Gold(value, f"{currency} thousand" if thousand else currency, currency, 1000.0 if thousand else 1.0, decimals=decimals)


def percent(value: float) -> Gold:
    """A gold percentage, written with two decimals."""
    return Gold(value, "%", percent=True, decimals=2)


def count(value: int, unit: str = "") -> Gold:
    """A gold whole number (a count, a rank, FTE, units)."""
    return Gold(float(value), unit, decimals=0)


def region_name(value: str) -> Gold:
    """A gold region name; every region name the generator can draw is a candidate, so a reply that also
    names a region of another report is a hedge too."""
    return Gold(value, candidates=REGIONS)


def segment_of(text: str) -> list[str]:
    """The Growth-segment regions as the annual report's narrative lists them."""
    match = SEGMENT.search(text)
    assert match, "the annual report names no Growth segment"
    return re.split(r", | and ", match.group(1))


# Solvers' helpers: the same quantities as Report's methods, computed from read tables.

def region_sum(table: Table, region: str, year: int) -> float:
    """A region's figure summed over the products of a region-by-product sheet."""
    return sum(float(r[fy(year)]) for r in table.records() if r["Region"] == region)


def read_staff_cost(ev: Evidence, files: Files, region: str, year: int) -> float:
    """Year-end FTE (workbook) times staff cost per FTE (annual report), thousand."""
    return ev.sheet(HEADCOUNT).value(fy(year), Region=region) * ev.table(files.docx, STAFF_COST).value(fy(year), Region=region)


def read_rate(ev: Evidence, files: Files, code: str, year: int, kind: str) -> float:
    """An exchange rate from the KPI review: units of `code` per reporting unit, 'average' or 'closing'."""
    return ev.table(files.pdf, RATES).value(fy(year), Currency=code, Rate=kind)


def read_operating_profit(ev: Evidence, files: Files, region: str, year: int, cogs: Table) -> float:
    """Revenue less COGS, staff cost and facility cost, from what was read."""
    revenue = region_sum(ev.sheet(REVENUE), region, year)
    facility = ev.table(files.pdf, FACILITY).value(fy(year), Region=region)
    return revenue - region_sum(cogs, region, year) - read_staff_cost(ev, files, region, year) - facility


def years_with_previous(report: Report) -> tuple[int, ...]:
    """Years that have a previous year in the report (for changes)."""
    return report.years[1:]
