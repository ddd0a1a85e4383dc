"""Question families that find and combine one measure: lookup, growth, aggregation, extremum, ranking.

Each family is `fn(report, files, difficulty, rng) -> Task`. Easy questions need one file and one
lookup; medium ones two files or a two-step computation; hard ones all three formats, several steps,
and a report that carries distractor sheets, tables and years.
"""
from __future__ import annotations

import random

from jointrl.envs.office.documents import BUDGETS, COGS, ENERGY, HEADCOUNT, KPIS, ON_TIME, PRICES, REVENUE, SATISFACTION, UNITS, fy
from jointrl.envs.office.evidence import Evidence, number
from jointrl.envs.office.matching import Gold
from jointrl.envs.office.report import Report
from jointrl.envs.office.task import (Files, Task, change_pct, choose, count, money, percent, read_operating_profit,
                                      read_rate, read_staff_cost, region_name, region_sum, segment_of, separated, years_with_previous)

ORDINALS = {1: "1st", 2: "2nd", 3: "3rd"}


def lookup(report: Report, files: Files, difficulty: str, rng: random.Random) -> Task:
    """A single figure; harder levels identify the row through facts in other files."""
    c, region, product = report.currency, rng.choice(report.regions), rng.choice(report.products)
    if difficulty == "easy":
        year = rng.choice(report.years)
        return Task(
            f"What was the revenue of product {product} in the {region} region in FY{year}? Answer in {c} thousand.",
            money(report.revenue[region, product, year], c),
            (files.sheet(REVENUE, "Revenue by region and product is in the workbook's Revenue sheet."),),
            lambda ev: (ev.sheet(REVENUE).value(fy(year), Region=region, Product=product), f"{region}/{product} {fy(year)} cell"))
    if difficulty == "medium":
        year = choose(rng, report.years, lambda y: _prices_unique(report, y))
        price = report.list_price[product, year]

        def solve_medium(ev: Evidence):
            found = _product_priced(ev, files, year, price)
            return ev.sheet(UNITS).value(fy(year), Product=found, Region=region), f"product {found} (annual report), its {region} units"

        return Task(
            f"In FY{year} one product had a list price of {c} {price:,.2f} per unit (see the annual report). "
            f"How many units of that product were sold in {region} in FY{year}? Answer in units.",
            count(report.units[region, product, year], "units"),
            (files.report("The list prices are in the annual report; find the product first."),
             files.sheet(UNITS, "Units sold are in the workbook's Units sheet.")),
            solve_medium)

    def fits(y: int) -> bool:
        # The region's delivery rate must name it alone, and differ from every next-year target (a distractor).
        rate = report.on_time[region, y]
        clashes = [report.on_time[r, y] for r in report.regions if r != region] + [v for (_, k), v in report.targets.items() if k == "on_time"]
        return _prices_unique(report, y) and rate not in clashes

    year = choose(rng, report.years, fits)
    price, rate = report.list_price[product, year], report.on_time[region, year]

    def solve(ev: Evidence):
        kpis = [r for r in ev.table(files.pdf, KPIS).records() if r["Year"] == fy(year) and number(r[ON_TIME]) == rate]
        assert len(kpis) == 1
        found_region, found_product = kpis[0]["Region"], _product_priced(ev, files, year, price)
        value = ev.sheet(COGS).value(fy(year), Region=found_region, Product=found_product)
        return value, f"region {found_region} (KPI review), product {found_product} (annual report), COGS {value:,.1f}"

    return Task(
        f"In FY{year} the region with an on-time delivery rate of {rate:.1f}% sold, among others, the product whose FY{year} "
        f"list price was {c} {price:,.2f} per unit. What was that region's cost of goods sold for that product in FY{year}? "
        f"Answer in {c} thousand.",
        money(report.cogs[region, product, year], c),
        (files.review("The KPI review's operational KPIs identify the region."),
         files.report("The annual report's list prices identify the product."),
         files.sheet(COGS, "Cost of goods sold is in the workbook's COGS sheet.")),
        solve)


def _prices_unique(report: Report, year: int) -> bool:
    return len({report.list_price[p, year] for p in report.products}) == len(report.products)


def _product_priced(ev: Evidence, files: Files, year: int, price: float) -> str:
    """The product whose list price in `year` was `price`, from the annual report as read."""
    rows = [r for r in ev.table(files.docx, PRICES).records() if f"{number(r[fy(year)]):.2f}" == f"{price:.2f}"]
    assert len(rows) == 1
    return rows[0]["Product"]


def growth(report: Report, files: Files, difficulty: str, rng: random.Random) -> Task:
    """Year-over-year change in percent."""
    region, year = rng.choice(report.regions), rng.choice(years_with_previous(report))
    span = f"from FY{year - 1} to FY{year}"
    tail = "Answer in percent with two decimals (negative for a decline)."
    if difficulty == "easy":
        new, old = report.headcount[region, year], report.headcount[region, year - 1]
        return Task(
            f"By what percentage did {region}'s year-end headcount change {span}? {tail}",
            percent(change_pct(new, old)),
            (files.sheet(HEADCOUNT, "Headcount by region and year is in the Headcount sheet."),),
            lambda ev: _change(ev.sheet(HEADCOUNT).value(fy(year), Region=region), ev.sheet(HEADCOUNT).value(fy(year - 1), Region=region)))
    if difficulty == "medium":
        return Task(
            f"By what percentage did {region}'s total revenue (all products) change {span}? {tail}",
            percent(change_pct(report.total_revenue(region, year), report.total_revenue(region, year - 1))),
            (files.sheet(REVENUE, "Revenue is per product; sum the region's rows for each year."),),
            lambda ev: _change(region_sum(ev.sheet(REVENUE), region, year), region_sum(ev.sheet(REVENUE), region, year - 1)))
    code = rng.choice(report.foreign)
    staff = lambda y: report.staff_cost(region, y) * report.fx_average[code, y]
    read = lambda ev, y: read_staff_cost(ev, files, region, y) * read_rate(ev, files, code, y, "average")
    return Task(
        f"By what percentage did {region}'s staff cost, expressed in {code}, change {span}? Staff cost is the year-end "
        f"headcount (financials workbook) times the average staff cost per FTE (annual report); convert each year at "
        f"that year's average exchange rate (KPI review). {tail}",
        percent(change_pct(staff(year), staff(year - 1))),
        (files.sheet(HEADCOUNT, "Year-end FTE per region is in the Headcount sheet."),
         files.report("Staff cost per FTE is a table in the annual report."),
         files.review("The exchange rates are in the KPI review.")),
        lambda ev: _change(read(ev, year), read(ev, year - 1)))


def _change(new: float, old: float) -> tuple[float, str]:
    return change_pct(new, old), f"({new:,.4f} - {old:,.4f}) / {old:,.4f} x 100"


def aggregate(report: Report, files: Files, difficulty: str, rng: random.Random) -> Task:
    """A sum or an average over a range of rows."""
    c, year = report.currency, rng.choice(report.years)
    if difficulty == "easy":
        product = rng.choice(report.products)
        return Task(
            f"What was the total revenue of product {product} across all regions in FY{year}? Answer in {c} thousand.",
            money(sum(report.revenue[r, product, year] for r in report.regions), c),
            (files.sheet(REVENUE, "Sum the product's rows of the Revenue sheet."),),
            lambda ev: (sum(float(r[fy(year)]) for r in ev.sheet(REVENUE).records() if r["Product"] == product), f"sum of {product} rows"))
    if difficulty == "medium":
        # Energy use spreads over two orders of magnitude; a mean of percentages near 92% would be guessable.
        values = [report.energy[r, year] for r in report.regions]
        return Task(
            f"What was the average energy use per region in FY{year}, according to the KPI review? Give the simple "
            f"(unweighted) mean over all regions in MWh.",
            Gold(sum(values) / len(values), "MWh", decimals=2),
            (files.review("Energy use by region and year is in the KPI review; the table spans pages."),),
            lambda ev: _mean([number(r[ENERGY]) for r in ev.table(files.pdf, KPIS).records() if r["Year"] == fy(year)]))
    code = rng.choice(report.foreign)
    value = sum(report.total_revenue(r, year) for r in report.growth_segment) * report.fx_average[code, year]

    def solve(ev: Evidence):
        segment = segment_of(ev.text(files.docx))
        total = sum(region_sum(ev.sheet(REVENUE), r, year) for r in segment)
        return total * read_rate(ev, files, code, year, "average"), f"segment {segment}, revenue {total:,.1f} converted"

    return Task(
        f"What was the total FY{year} revenue (all products) of the regions in the Growth segment, as the annual report "
        f"defines it, converted to {code} at the FY{year} average exchange rate in the KPI review? Answer in {code} thousand.",
        money(value, code, decimals=2),
        (files.report("The annual report's narrative defines the Growth segment."),
         files.sheet(REVENUE, "Revenue per region and product is in the Revenue sheet."),
         files.review("The exchange rates are in the KPI review.")),
        solve)


def _mean(values: list[float]) -> tuple[float, str]:
    return sum(values) / len(values), f"mean of {len(values)} values"


def argmax(report: Report, files: Files, difficulty: str, rng: random.Random) -> Task:
    """The region with the largest value of a measure, possibly among a filtered set."""
    regions = report.regions
    if difficulty == "easy":
        year = choose(rng, report.years, lambda y: _clear_top([report.headcount[r, y] for r in regions], 0.0))
        best = max(regions, key=lambda r: report.headcount[r, year])
        return Task(
            f"Which region had the largest year-end headcount in FY{year}? Answer with the region's name.",
            region_name(best),
            (files.sheet(HEADCOUNT, "Compare the regions' FTE in the Headcount sheet."),),
            lambda ev: _top({r["Region"]: number(r[fy(year)]) for r in ev.sheet(HEADCOUNT).records()}))
    if difficulty == "medium":
        per_fte = lambda r, y: report.total_revenue(r, y) / report.headcount[r, y]
        year = choose(rng, report.years, lambda y: _clear_top([per_fte(r, y) for r in regions], 0.01))
        return Task(
            f"Which region had the highest revenue per FTE in FY{year}, i.e. total revenue across products divided by "
            f"year-end headcount? Answer with the region's name.",
            region_name(max(regions, key=lambda r: per_fte(r, year))),
            (files.sheet(REVENUE, "Total revenue per region is the sum of its product rows."),
             files.sheet(HEADCOUNT, "Year-end FTE is in the Headcount sheet.")),
            lambda ev: _top({r: region_sum(ev.sheet(REVENUE), r, year) / ev.sheet(HEADCOUNT).value(fy(year), Region=r) for r in _regions(ev)}))

    def fits(y):
        winners = report.above_budget(y)
        if len(winners) < 2 or len(winners) == len(regions):
            return False
        overall = max(regions, key=lambda r: report.satisfaction[r, y])
        return overall not in winners and _clear_top([report.satisfaction[r, y] for r in winners], 0.0)

    year = choose(rng, report.years, fits)
    best = max(report.above_budget(year), key=lambda r: report.satisfaction[r, year])

    def solve(ev: Evidence):
        budgets, kpis = ev.table(files.docx, BUDGETS), ev.table(files.pdf, KPIS)
        winners = [r for r in _regions(ev) if region_sum(ev.sheet(REVENUE), r, year) > budgets.value(fy(year), Region=r)]
        top, _ = _top({r: kpis.value(SATISFACTION, Region=r, Year=fy(year)) for r in winners})
        return top, f"regions above budget: {', '.join(winners)}; highest satisfaction: {top}"

    return Task(
        f"Among the regions whose FY{year} total revenue (all products, financials workbook) exceeded their FY{year} revenue "
        f"budget (annual report), which had the highest customer satisfaction in FY{year} (KPI review)? Answer with the "
        f"region's name.",
        region_name(best),
        (files.sheet(REVENUE, "Actual revenue per region is the sum of its product rows."),
         files.report("The revenue budgets are a table in the annual report."),
         files.review("Customer satisfaction by region and year is in the KPI review.")),
        solve)


def _clear_top(values: list[float], rel_gap: float) -> bool:
    ordered = sorted(values, reverse=True)
    return ordered[0] - ordered[1] > rel_gap * abs(ordered[0])


def _top(values: dict[str, float]) -> tuple[str, str]:
    best = max(values, key=values.get)
    return best, "; ".join(f"{k} {v:,.2f}" for k, v in values.items())


def _regions(ev: Evidence) -> list[str]:
    return ev.sheet(HEADCOUNT).column("Region") if HEADCOUNT in ev.sheets else list(dict.fromkeys(ev.sheet(REVENUE).column("Region")))


def ranking(report: Report, files: Files, difficulty: str, rng: random.Random) -> Task:
    """The region at a position when regions are ordered by a measure (a name, so no small number is a safe guess)."""
    regions = report.regions
    if difficulty == "easy":
        year = choose(rng, report.years, lambda y: len({report.headcount[r, y] for r in regions}) == len(regions))
        k = rng.randint(1, len(regions))
        order = sorted(regions, key=lambda r: -report.headcount[r, year])
        return Task(
            f"Ranking the regions by year-end headcount in FY{year} from largest (position 1) to smallest, which region is "
            f"at position {k}? Answer with the region's name.",
            region_name(order[k - 1]),
            (files.sheet(HEADCOUNT, "Order the regions' FTE in the Headcount sheet."),),
            lambda ev: _at_rank({r["Region"]: number(r[fy(year)]) for r in ev.sheet(HEADCOUNT).records()}, k))
    if difficulty == "medium":
        year = choose(rng, report.years, lambda y: separated([report.total_revenue(r, y) for r in regions], 0.005))
        k = rng.randint(2, len(regions) - 1)
        order = sorted(regions, key=lambda r: -report.total_revenue(r, year))
        return Task(
            f"Which region ranked {ORDINALS.get(k, f'{k}th')} by total revenue (all products) in FY{year}, counting from the "
            f"largest? Answer with the region's name.",
            region_name(order[k - 1]),
            (files.sheet(REVENUE, "Total revenue per region is the sum of its product rows."),),
            lambda ev: _at_rank({r: region_sum(ev.sheet(REVENUE), r, year) for r in _regions(ev)}, k))
    year = choose(rng, report.years, lambda y: separated([report.operating_profit(r, y) for r in regions], 0.01))
    k = rng.randint(1, len(regions))
    order = sorted(regions, key=lambda r: -report.operating_profit(r, year))
    return Task(
        f"Rank the regions by FY{year} operating profit, largest first: total revenue minus cost of goods sold (both over all "
        f"products, financials workbook), minus staff cost (year-end headcount times the annual report's staff cost per FTE), "
        f"minus facility cost (KPI review). Which region is at position {k}? Answer with the region's name.",
        region_name(order[k - 1]),
        (files.sheet(REVENUE, "Revenue per region and product."), files.sheet(COGS, "Cost of goods sold per region and product."),
         files.sheet(HEADCOUNT, "Year-end FTE per region."), files.report("Staff cost per FTE is in the annual report."),
         files.review("Facility costs are in the KPI review.")),
        lambda ev: _at_rank({r: read_operating_profit(ev, files, r, year, ev.sheet(COGS)) for r in _regions(ev)}, k))


def _at_rank(values: dict[str, float], k: int) -> tuple[str, str]:
    order = sorted(values, key=lambda r: -values[r])
    return order[k - 1], "order: " + ", ".join(order)
