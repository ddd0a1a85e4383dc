"""The long tier's annual report and KPI review: every region gets pages of its own, listed on page 1.

Each section is one page (a page break ends it), so the contents on page 1 give every section's page
number, and a reader goes to the pages it needs instead of reading 30. The units and notes are where
a careless reader goes wrong: some regions state staff cost per FTE per month in whole currency units,
the others per year in thousands; facility costs include items that the notes page explains, and the
one-off ones are left out of overhead. The workbook is the ordinary one (`documents.workbook`).
"""
from __future__ import annotations

import re

from jointrl.envs.office.documents import (BUDGETS, ENERGY, ON_TIME, PRICES, RATES, SATISFACTION, Document, PageBreak, Table,
                                           fy, join)
from jointrl.envs.office.report import Report

# Caption stems of the long tier's own tables (the full caption adds number, region and unit).
STAFF, NOTES = "Staff cost per FTE and average headcount", "Notes to the facility tables"
KPIS, FACILITY = "Operational KPIs", "Facility costs"
PER_MONTH, PER_YEAR = "per FTE per month", "thousand per FTE per year"
EXCLUDED, INCLUDED = "excluded from overhead", "included in overhead"


def contents_entry(section: str, page: int) -> str:
    """How page 1 lists a section: 'Velia people p. 5'."""
    return f"{section} p. {page}"


def section_page(contents: str, section: str) -> int:
    """The page that page 1's contents give for a section."""
    found = re.search(rf"(?<![A-Za-z]){re.escape(section)} p\. (\d+)", " ".join(contents.split()))
    if found is None:
        raise ValueError(f"the contents list no section {section!r}")
    return int(found.group(1))


def _pages(pages: list[list]) -> tuple:
    """The blocks of every page in order, a page break between pages."""
    blocks: list = []
    for page in pages:
        if blocks:
            blocks.append(PageBreak())
        blocks += page
    return tuple(blocks)


class _Numbers:
    """Table numbers in order of appearance."""

    def __init__(self):
        self.count = 0

    def next(self) -> int:
        self.count += 1
        return self.count


def annual_report(report: Report) -> Document:
    """The annual report: overview and contents, pricing, budgets, then a sales and a people page per region."""
    c, years, last, tables = report.currency, report.years, report.last, _Numbers()
    core = [r for r in report.regions if r not in report.growth_segment]
    first_region_page = 4
    region_page = {r: first_region_page + 2 * i for i, r in enumerate(report.regions)}
    closing = first_region_page + 2 * len(report.regions)
    overview = [
        f"This report covers the financial years FY{years[0]} to FY{last}. Amounts are in {c}; each table's caption "
        f"gives its unit.",
        f"Segments. The Growth segment comprises {join(report.growth_segment)}; the remaining regions ({join(core)}) form "
        f"the Core segment.",
        "Overhead. A region's overhead is its staff cost (year-end headcount, financials workbook, times staff cost per "
        "FTE, the region's people page) plus its facility cost (KPI review) without the one-off charges that the KPI "
        "review's notes exclude from overhead.",
        "Contents",
        contents_entry("Pricing", 2) + "; " + contents_entry("Budgets", 3),
        *(contents_entry(f"{r} sales", region_page[r]) + "; " + contents_entry(f"{r} people", region_page[r] + 1)
          for r in report.regions),
        contents_entry("Risks and outlook", closing) + "; " + contents_entry("Notes on staff costs", closing + 1),
    ]
    prices = Table(f"Table {tables.next()}: {PRICES} ({c} per unit)", ("Product", *map(fy, years)),
                   tuple((p, *(report.list_price[p, y] for y in years)) for p in report.products), ("", *[",.2f"] * len(years)))
    budgets = Table(f"Table {tables.next()}: {BUDGETS} ({c} thousand)", ("Region", *map(fy, years)),
                    tuple((r, *(report.budget[r, y] for y in years)) for r in report.regions), ("", *[",.1f"] * len(years)))
    pages = [overview,
             ["Pricing", "List prices are set once a year per product and apply to all regions.", prices],
             ["Budgets", "Each region's revenue budget is agreed before the year starts.", budgets]]
    for region in report.regions:
        revenue = Table(f"Table {tables.next()}: Revenue by product, {region} ({c} thousand)", ("Product", *map(fy, years)),
                        tuple((p, *(report.revenue[region, p, y] for y in years)) for p in report.products),
                        ("", *[",.1f"] * len(years)))
        pages.append([f"{region} sales", f"{region} sold {len(report.products)} products; revenue by product and year follows.",
                      revenue])
        monthly = (region, last) in report.monthly_staff_cost
        unit, spec = (f"{c} {PER_MONTH}", ",d") if monthly else (f"{c} {PER_YEAR}", ",.1f")
        staff = report.monthly_staff_cost if monthly else report.staff_cost_per_fte
        people = Table(f"Table {tables.next()}: {STAFF}, {region} (staff cost in {unit})",
                       ("Year", "Staff cost per FTE", "Average headcount (FTE)"),
                       tuple((fy(y), staff[region, y], report.average_headcount[region, y]) for y in years), ("", spec, ",d"))
        pages.append([f"{region} people", "Staff cost per FTE includes salaries, social charges and benefits. Average "
                      "headcount is the mean over the year; year-end headcount is in the financials workbook.", people])
    pages.append(["Risks and outlook", "The main risks are input prices, currency movements against the reporting "
                  "currency, and the pace of hiring in regions where the labour market is tight.",
                  "Management expects demand to stay firm in the Growth segment and stable in the Core segment."])
    pages.append(["Notes on staff costs", f"Regional staff-cost tables give their unit in the caption: some state {c} "
                  f"{PER_MONTH}, others {c} {PER_YEAR}. An annual figure is twelve monthly ones."])
    return Document(f"{report.slug}_annual_report_FY{last}.docx", "docx", f"{report.org} annual report FY{last}", _pages(pages),
                    f"annual report, {len(pages)} pages: segments, overhead, contents on page 1, pricing, budgets, a sales "
                    f"and a people page per region")


def kpi_review(report: Report) -> Document:
    """The KPI review: contents, then an operations and a facilities page per region, exchange rates and notes."""
    c, years, last, tables = report.currency, report.years, report.last, _Numbers()
    first_region_page = 3
    region_page = {r: first_region_page + 2 * i for i, r in enumerate(report.regions)}
    rates_page = first_region_page + 2 * len(report.regions)
    marks = {(n.region, n.year): f"N{n.number}" for n in report.facility_notes}
    pages = [[f"This review reports operational indicators for FY{years[0]} to FY{last}, facility costs and the exchange "
              f"rates used to translate {c} amounts.", "Contents", contents_entry("Method", 2),
              *(contents_entry(f"{r} operations", region_page[r]) + "; " + contents_entry(f"{r} facilities", region_page[r] + 1)
                for r in report.regions),
              contents_entry("Exchange rates", rates_page) + "; " + contents_entry("Notes", rates_page + 1)],
             ["Method", "On-time delivery is the share of orders delivered by the promised date. Customer satisfaction is "
              "the share of surveyed customers rating the service good or better. Energy use covers every site of a region. "
              "Average rates are the mean over the year; closing rates apply at year end."]]
    for region in report.regions:
        kpis = Table(f"Table {tables.next()}: {KPIS}, {region}", ("Year", ON_TIME, SATISFACTION, ENERGY),
                     tuple((fy(y), report.on_time[region, y], report.satisfaction[region, y], report.energy[region, y]) for y in years),
                     ("", ".1f", ".1f", ",d"))
        facility = Table(f"Table {tables.next()}: {FACILITY}, {region} ({c} thousand)", ("Year", "Facility cost", "Note"),
                         tuple((fy(y), report.facility_cost[region, y], marks.get((region, y), "-")) for y in years), ("", ",.1f", ""))
        pages += [[f"{region} operations", kpis],
                  [f"{region} facilities", "Facility cost covers rent, energy, maintenance and services of the region's sites. "
                   "A note number points to the notes page, which explains items inside the figure.", facility]]
    rates = Table(f"Table {tables.next()}: {RATES} (units of currency per 1 {c})", ("Currency", "Rate", *map(fy, years)),
                  tuple((code, kind, *(table[code, y] for y in years))
                        for code in report.foreign for kind, table in (("average", report.fx_average), ("closing", report.fx_closing))),
                  ("", "", *[",.4f"] * len(years)))
    notes = Table(f"Table {tables.next()}: {NOTES} ({c} thousand)", ("Note", "Region", "Year", "Item", "Amount", "Treatment"),
                  tuple((f"N{n.number}", n.region, fy(n.year), n.item, n.amount, EXCLUDED if n.excluded else INCLUDED)
                        for n in report.facility_notes), ("", "", "", "", ",.1f", ""))
    pages += [["Exchange rates", rates],
              ["Notes", "Each note explains an item included in a region's printed facility cost. One-off charges are "
               "excluded from overhead; recurring items are part of it.", notes]]
    return Document(f"{report.slug}_kpi_review_FY{last}.pdf", "pdf", f"{report.org} KPI review FY{last}", _pages(pages),
                    f"KPI review, {len(pages)} pages: contents on page 1, an operations and a facilities page per region, "
                    f"exchange rates, notes")
