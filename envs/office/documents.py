"""Which facts go into which file: a report laid out as format-neutral documents of paragraphs and tables.

Revenue, cost of goods sold, units and headcount live only in the workbook; list prices, budgets,
staff cost per FTE and the segment definition only in the annual report (docx); operational KPIs,
facility costs and exchange rates only in the KPI review (pdf). Question families name tables by the
captions defined here, and the renderers turn these documents into xlsx, docx and pdf.
"""
from __future__ import annotations

from dataclasses import dataclass

from jointrl.envs.office.report import Report

# Sheet names of the workbook.
REVENUE, COGS, UNITS, HEADCOUNT, PLAN, FORECAST = "Revenue", "COGS", "Units", "Headcount", "Headcount plan", "Forecast"
# Caption stems of the annual report's and KPI review's tables (the full caption adds number and unit).
PRICES, BUDGETS, STAFF_COST, PROPOSED = "List prices by product", "Revenue budget by region", "Average staff cost per FTE by region", "Proposed list prices"
KPIS, FACILITY, RATES, TARGETS = "Operational KPIs by region and year", "Facility costs by region", "Exchange rates", "KPI targets"
ON_TIME, SATISFACTION, ENERGY = "On-time delivery (%)", "Customer satisfaction (%)", "Energy use (MWh)"

Cell = str | int | float


@dataclass(frozen=True)
class Table:
    """A captioned table; `formats` gives each column's display format (a format spec, '' for text)."""

    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    formats: tuple[str, ...]
    sheet: str = ""  # the workbook sheet that holds it (xlsx only)

    def display(self, row: tuple[Cell, ...]) -> list[str]:
        """A row's cells as the docx and pdf print them."""
        return [format(value, spec) if spec else str(value) for value, spec in zip(row, self.formats)]


@dataclass(frozen=True)
class PageBreak:
    """Starts a new page in a docx or pdf (the long tier gives every section a page of its own)."""


@dataclass(frozen=True)
class Document:
    """One file of the bundle: its name, format, title, and body of paragraphs, tables and page breaks in order."""

    name: str
    kind: str  # "xlsx" | "docx" | "pdf"
    title: str
    blocks: tuple[str | Table | PageBreak, ...]
    summary: str  # the one-line description list_files shows

    def tables(self) -> list[Table]:
        """The document's tables in order."""
        return [b for b in self.blocks if isinstance(b, Table)]


def fy(year: int) -> str:
    """The column label of a financial year."""
    return f"FY{year}"


def _by_region(report: Report, caption: str, values: dict, years, spec: str, sheet: str = "") -> Table:
    rows = tuple((r, *(values[r, y] for y in years)) for r in report.regions)
    return Table(caption, ("Region", *map(fy, years)), rows, ("", *[spec] * len(years)), sheet)


def workbook(report: Report) -> Document:
    """The financials workbook: one sheet per table, figures as numbers."""
    c, years = report.currency, report.years
    by_product = lambda values: tuple((r, p, *(values[r, p, y] for y in years)) for r in report.regions for p in report.products)
    money = ("", "", *[",.1f"] * len(years))
    tables = [
        Table(f"Revenue by region and product ({c} thousand)", ("Region", "Product", *map(fy, years)), by_product(report.revenue), money, REVENUE),
        Table(f"Cost of goods sold by region and product ({c} thousand)", ("Region", "Product", *map(fy, years)), by_product(report.cogs), money, COGS),
        Table("Units sold by product and region (units)", ("Product", "Region", *map(fy, years)),
              tuple((p, r, *(report.units[r, p, y] for y in years)) for p in report.products for r in report.regions), ("", "", *[",d"] * len(years)), UNITS),
        _by_region(report, "Year-end headcount by region (FTE)", report.headcount, years, ",d", HEADCOUNT),
        _by_region(report, "Planned year-end headcount by region (FTE)", report.headcount_plan, years, ",d", PLAN),
    ]
    if report.distractors:
        future = sorted({y for _, _, y in report.forecast})
        tables.append(Table(f"Revenue forecast by region and product ({c} thousand)", ("Region", "Product", *map(fy, future)),
                            tuple((r, p, *(report.forecast[r, p, y] for y in future)) for r in report.regions for p in report.products),
                            ("", "", *[",.1f"] * len(future)), FORECAST))
    sheets = ", ".join(t.sheet for t in tables)
    return Document(f"{report.slug}_financials.xlsx", "xlsx", f"{report.org} financials", tuple(tables),
                    f"workbook of financial tables, FY{years[0]}-FY{years[-1]}; sheets: {sheets}")


def annual_report(report: Report) -> Document:
    """The annual report: narrative, the segment definition, prices, budgets and staff costs."""
    c, years, last = report.currency, report.years, report.last
    growth = report.growth_segment
    core = [r for r in report.regions if r not in growth]
    group_revenue = sum(report.total_revenue(r, last) for r in report.regions)
    group_fte = sum(report.headcount[r, last] for r in report.regions)
    budget_years = sorted({y for _, y in report.budget})
    blocks: list[str | Table] = [
        f"This report covers the financial years FY{years[0]} to FY{last}. Amounts are in {c}; tables marked "
        f"'{c} thousand' are in thousands of {c}.",
        f"Group revenue for FY{last} reached {c} {group_revenue:,.1f} thousand across {len(report.regions)} regions, "
        f"with a year-end workforce of {group_fte:,d} FTE.",
        f"Segments. The Growth segment comprises {join(growth)}; the remaining regions ({join(core)}) form the Core segment.",
        "Pricing. List prices are set once a year per product and apply to all regions.",
    ]
    number = 1
    prices = Table(f"Table {number}: {PRICES} ({c} per unit)", ("Product", *map(fy, years)),
                   tuple((p, *(report.list_price[p, y] for y in years)) for p in report.products), ("", *[",.2f"] * len(years)))
    blocks += [prices]
    number += 1
    if report.distractors:
        proposed = Table(f"Table {number}: {PROPOSED} for FY{last + 1}, not yet in force ({c} per unit)", ("Product", fy(last + 1)),
                         tuple((p, report.proposed_price[p]) for p in report.products), ("", ",.2f"))
        blocks += ["The board will decide on the following proposed prices next year.", proposed]
        number += 1
    budgets = _by_region(report, f"Table {number}: {BUDGETS} ({c} thousand)", report.budget, budget_years, ",.1f")
    blocks += ["Budgets. Each region's revenue budget is agreed before the year starts.", budgets]
    number += 1
    staff = _by_region(report, f"Table {number}: {STAFF_COST} ({c} thousand)", report.staff_cost_per_fte, years, ",.1f")
    blocks += ["People. Staff cost per FTE includes salaries, social charges and benefits.", staff,
               "Risks. The main risks are input prices, currency movements against the reporting currency, and the pace "
               "of hiring in regions where the labour market is tight.",
               "Outlook. Management expects demand to stay firm in the Growth segment and stable in the Core segment."]
    return Document(f"{report.slug}_annual_report_FY{last}.docx", "docx", f"{report.org} annual report FY{last}", tuple(blocks),
                    "annual report: narrative, segments, list prices, revenue budgets, staff cost per FTE")


def kpi_review(report: Report) -> Document:
    """The KPI review: operational KPIs by region and year, facility costs and exchange rates."""
    c, years, last = report.currency, report.years, report.last
    kpis = Table(f"Table 1: {KPIS}", ("Region", "Year", ON_TIME, SATISFACTION, ENERGY),
                 tuple((r, fy(y), report.on_time[r, y], report.satisfaction[r, y], report.energy[r, y]) for r in report.regions for y in years),
                 ("", "", ".1f", ".1f", ",d"))
    facility = _by_region(report, f"Table 2: {FACILITY} ({c} thousand)", report.facility_cost, years, ",.1f")
    rates = Table(f"Table 3: {RATES} (units of currency per 1 {c})", ("Currency", "Rate", *map(fy, years)),
                  tuple((code, kind, *(table[code, y] for y in years))
                        for code in report.foreign for kind, table in (("average", report.fx_average), ("closing", report.fx_closing))),
                  ("", "", *[",.4f"] * len(years)))
    blocks: list[str | Table] = [
        f"This review reports operational indicators for FY{years[0]} to FY{last}, facility costs and the exchange rates "
        f"used to translate {c} amounts. Average rates are the mean over the year; closing rates apply at year end.",
        kpis, facility, rates,
    ]
    if report.distractors:
        targets = Table(f"Table 4: {TARGETS} for FY{last + 1}", ("Region", ON_TIME, SATISFACTION),
                        tuple((r, report.targets[r, "on_time"], report.targets[r, "satisfaction"]) for r in report.regions), ("", ".1f", ".1f"))
        blocks += [targets]
    return Document(f"{report.slug}_kpi_review_FY{last}.pdf", "pdf", f"{report.org} KPI review FY{last}", tuple(blocks),
                    "KPI review: operational KPIs by region and year, facility costs, exchange rates")


def join(names) -> str:
    """Names as prose: 'A', 'A and B', 'A, B and C'."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
