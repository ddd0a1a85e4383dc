"""Question families that combine measures: rate joins, currency conversion, margins, counts, budget variances.

Each family is `fn(report, files, difficulty, rng) -> Task`, with the difficulty ladder of
families_read: one file and one lookup, then two files or two steps, then three formats and distractors.
"""
from __future__ import annotations

import random

from jointrl.envs.office.documents import BUDGETS, COGS, FACILITY, HEADCOUNT, KPIS, ON_TIME, PLAN, PRICES, REVENUE, UNITS, fy
from jointrl.envs.office.evidence import Evidence, number
from jointrl.envs.office.report import Report
from jointrl.envs.office.task import (Files, Task, change_pct, choose, count, money, percent, read_rate, read_staff_cost,
                                      region_sum, segment_of, years_with_previous)


def rate_join(report: Report, files: Files, difficulty: str, rng: random.Random) -> Task:
    """A per-unit rate times a quantity, the two from different places."""
    c, region, product, year = report.currency, rng.choice(report.regions), rng.choice(report.products), rng.choice(report.years)
    units = lambda ev, r: ev.sheet(UNITS).value(fy(year), Product=product, Region=r)
    if difficulty == "easy":
        price = round(rng.uniform(20, 400), 2)
        return Task(
            f"At a price of {c} {price:,.2f} per unit, what revenue do {region}'s FY{year} unit sales of {product} represent? "
            f"Answer in {c}.",
            money(report.units[region, product, year] * price, c, thousand=False, decimals=2),
            (files.sheet(UNITS, "Units sold are in the workbook's Units sheet."),),
            lambda ev: (units(ev, region) * price, f"{units(ev, region):,.0f} units x {price:,.2f}"))
    list_price = lambda ev: ev.table(files.docx, PRICES).value(fy(year), Product=product)
    if difficulty == "medium":
        return Task(
            f"Multiply {region}'s FY{year} unit sales of {product} (financials workbook) by {product}'s FY{year} list price "
            f"(annual report). What revenue at list price is that? Answer in {c}.",
            money(report.units[region, product, year] * report.list_price[product, year], c, thousand=False, decimals=2),
            (files.sheet(UNITS, "Units sold are in the Units sheet."), files.report("List prices are a table in the annual report.")),
            lambda ev: (units(ev, region) * list_price(ev), f"{units(ev, region):,.0f} units x {list_price(ev):,.2f}"))
    code = rng.choice(report.foreign)
    total_units = sum(report.units[r, product, year] for r in report.regions)

    def solve(ev: Evidence):
        quantity = sum(number(r[fy(year)]) for r in ev.sheet(UNITS).records() if r["Product"] == product)
        rate = read_rate(ev, files, code, year, "closing")
        return quantity * list_price(ev) * rate, f"{quantity:,.0f} units x {list_price(ev):,.2f} x {rate:.4f}"

    return Task(
        f"What was the FY{year} revenue at list price of {product} across all regions (units sold from the financials "
        f"workbook times the FY{year} list price in the annual report), converted to {code} at the FY{year} closing exchange "
        f"rate in the KPI review? Answer in {code}.",
        money(total_units * report.list_price[product, year] * report.fx_closing[code, year], code, thousand=False, decimals=2),
        (files.sheet(UNITS, "Units sold per product and region are in the Units sheet."),
         files.report("The list prices in force are a table in the annual report."),
         files.review("The closing exchange rates are in the KPI review.")),
        solve)


def currency(report: Report, files: Files, difficulty: str, rng: random.Random) -> Task:
    """An amount in the reporting currency converted with a rate from the KPI review."""
    c, code, region, year = report.currency, rng.choice(report.foreign), rng.choice(report.regions), rng.choice(report.years)
    if difficulty == "easy":
        amount = round(rng.uniform(200, 20000), 1)
        return Task(
            f"Convert {c} {amount:,.1f} thousand to {code} at the FY{year} average exchange rate given in the KPI review. "
            f"Answer in {code} thousand.",
            money(amount * report.fx_average[code, year], code, decimals=2),
            (files.review("The exchange rates are a table in the KPI review."),),
            lambda ev: (amount * read_rate(ev, files, code, year, "average"), f"{amount:,.1f} x the FY{year} average rate"))
    if difficulty == "medium":
        return Task(
            f"What was {region}'s FY{year} total revenue (all products) in {code}, converted at the FY{year} average exchange "
            f"rate in the KPI review? Answer in {code} thousand.",
            money(report.total_revenue(region, year) * report.fx_average[code, year], code, decimals=2),
            (files.sheet(REVENUE, "Sum the region's product rows in the Revenue sheet."), files.review("The exchange rates are in the KPI review.")),
            lambda ev: (region_sum(ev.sheet(REVENUE), region, year) * read_rate(ev, files, code, year, "average"), "revenue x average rate"))
    total = report.total_cogs(region, year) + report.staff_cost(region, year) + report.facility_cost[region, year]

    def solve(ev: Evidence):
        parts = (region_sum(ev.sheet(COGS), region, year), read_staff_cost(ev, files, region, year),
                 ev.table(files.pdf, FACILITY).value(fy(year), Region=region))
        rate = read_rate(ev, files, code, year, "closing")
        return sum(parts) * rate, f"COGS {parts[0]:,.1f} + staff {parts[1]:,.1f} + facility {parts[2]:,.1f}, x {rate:.4f}"

    return Task(
        f"What was {region}'s total FY{year} cost in {code} at the FY{year} closing exchange rate (KPI review)? Total cost is "
        f"cost of goods sold over all products (financials workbook) plus staff cost (year-end headcount times the annual "
        f"report's staff cost per FTE) plus facility cost (KPI review). Answer in {code} thousand.",
        money(total * report.fx_closing[code, year], code, decimals=2),
        (files.sheet(COGS, "Cost of goods sold per region and product."), files.sheet(HEADCOUNT, "Year-end FTE per region."),
         files.report("Staff cost per FTE is a table in the annual report."), files.review("Facility costs and exchange rates are in the KPI review.")),
        solve)


def margin(report: Report, files: Files, difficulty: str, rng: random.Random) -> Task:
    """A margin: profit as a percentage of revenue."""
    region, product, year = rng.choice(report.regions), rng.choice(report.products), rng.choice(report.years)
    tail = "Answer in percent with two decimals."
    if difficulty == "easy":
        revenue, cogs = report.revenue[region, product, year], report.cogs[region, product, year]

        def solve(ev: Evidence):
            rev, cost = ev.sheet(REVENUE).value(fy(year), Region=region, Product=product), ev.sheet(COGS).value(fy(year), Region=region, Product=product)
            return (rev - cost) / rev * 100, f"({rev:,.1f} - {cost:,.1f}) / {rev:,.1f}"

        return Task(
            f"What was the gross margin of product {product} in {region} in FY{year}, i.e. (revenue - cost of goods sold) / "
            f"revenue? {tail}",
            percent((revenue - cogs) / revenue * 100),
            (files.sheet(REVENUE, "Revenue is in the Revenue sheet."), files.sheet(COGS, "Cost of goods sold is in the COGS sheet.")),
            solve)
    if difficulty == "medium":
        revenue, cogs = report.total_revenue(region, year), report.total_cogs(region, year)

        def solve(ev: Evidence):
            rev, cost = region_sum(ev.sheet(REVENUE), region, year), region_sum(ev.sheet(COGS), region, year)
            return (rev - cost) / rev * 100, f"({rev:,.1f} - {cost:,.1f}) / {rev:,.1f}"

        return Task(
            f"What was {region}'s gross margin over all products in FY{year}: (total revenue - total cost of goods sold) / "
            f"total revenue? {tail}",
            percent((revenue - cogs) / revenue * 100),
            (files.sheet(REVENUE, "Sum the region's rows in the Revenue sheet."), files.sheet(COGS, "Sum the region's rows in the COGS sheet.")),
            solve)

    def solve(ev: Evidence):
        rev = region_sum(ev.sheet(REVENUE), region, year)
        cost = region_sum(ev.sheet(COGS), region, year) + read_staff_cost(ev, files, region, year) + ev.table(files.pdf, FACILITY).value(fy(year), Region=region)
        return (rev - cost) / rev * 100, f"revenue {rev:,.1f}, total cost {cost:,.1f}"

    return Task(
        f"What was {region}'s operating margin in FY{year}? Operating profit is total revenue minus cost of goods sold (both "
        f"over all products, financials workbook), minus staff cost (year-end headcount times the annual report's staff cost "
        f"per FTE), minus facility cost (KPI review); the margin is operating profit / total revenue. {tail}",
        percent(report.operating_profit(region, year) / report.total_revenue(region, year) * 100),
        (files.sheet(REVENUE, "Revenue per region and product."), files.sheet(COGS, "Cost of goods sold per region and product."),
         files.sheet(HEADCOUNT, "Year-end FTE per region."), files.report("Staff cost per FTE is a table in the annual report."),
         files.review("Facility costs are in the KPI review.")),
        solve)


def _cuts(values: list[float], min_gap: float, digits: int) -> list[tuple[float, int]]:
    """Thresholds strictly between neighbouring values (rounded to `digits`), each with how many values exceed it."""
    ordered = sorted(values, reverse=True)
    cuts = []
    for k in range(1, len(ordered)):
        hi, lo = ordered[k - 1], ordered[k]
        middle = round((hi + lo) / 2, digits)
        if hi - lo >= min_gap and lo < middle < hi:
            cuts.append((middle, k))
    return cuts


def threshold(report: Report, files: Files, difficulty: str, rng: random.Random) -> Task:
    """How many regions meet a threshold."""
    regions = report.regions
    if difficulty == "easy":
        year = choose(rng, report.years, lambda y: bool(_cuts([report.headcount[r, y] for r in regions], 2, 0)))
        limit, k = rng.choice(_cuts([report.headcount[r, year] for r in regions], 2, 0))
        return Task(
            f"How many regions had a year-end headcount of more than {limit:,.0f} FTE in FY{year}? Answer with the number.",
            count(k),
            (files.sheet(HEADCOUNT, "Count the regions above the threshold in the Headcount sheet."),),
            lambda ev: (sum(number(r[fy(year)]) > limit for r in ev.sheet(HEADCOUNT).records()), f"regions above {limit:,.0f}"))
    if difficulty == "medium":
        grown = lambda y: [change_pct(report.total_revenue(r, y), report.total_revenue(r, y - 1)) for r in regions]
        year = choose(rng, years_with_previous(report), lambda y: bool(_cuts(grown(y), 0.3, 1)))
        limit, k = rng.choice(_cuts(grown(year), 0.3, 1))

        def solve(ev: Evidence):
            table = ev.sheet(REVENUE)
            rates = [change_pct(region_sum(table, r, year), region_sum(table, r, year - 1)) for r in dict.fromkeys(table.column("Region"))]
            return sum(g > limit for g in rates), "growth rates: " + ", ".join(f"{g:.2f}%" for g in rates)

        return Task(
            f"How many regions grew their total revenue (all products) by more than {limit:.1f}% from FY{year - 1} to FY{year}? "
            f"Answer with the number.",
            count(k),
            (files.sheet(REVENUE, "Sum each region's product rows for both years."),),
            solve)

    def cuts(y):
        # Both conditions should matter: some region below budget also clears the delivery threshold.
        winners = report.above_budget(y)
        options = _cuts([report.on_time[r, y] for r in winners], 0.2, 1) if len(winners) >= 2 else []
        return [(limit, k) for limit, k in options if any(report.on_time[r, y] > limit for r in regions if r not in winners)]

    year = choose(rng, report.years, lambda y: bool(cuts(y)))
    limit, k = rng.choice(cuts(year))

    def solve(ev: Evidence):
        budgets, kpis = ev.table(files.docx, BUDGETS), ev.table(files.pdf, KPIS)
        names = dict.fromkeys(ev.sheet(REVENUE).column("Region"))
        hits = [r for r in names if region_sum(ev.sheet(REVENUE), r, year) > budgets.value(fy(year), Region=r)
                and kpis.value(ON_TIME, Region=r, Year=fy(year)) >= limit]
        return len(hits), "regions meeting both: " + (", ".join(hits) or "none")

    return Task(
        f"How many regions both exceeded their FY{year} revenue budget (annual report) with their FY{year} total revenue "
        f"(all products, financials workbook) and had an on-time delivery rate of at least {limit:.1f}% in FY{year} (KPI "
        f"review)? Answer with the number.",
        count(k),
        (files.sheet(REVENUE, "Actual revenue per region is the sum of its product rows."),
         files.report("The revenue budgets are a table in the annual report."),
         files.review("On-time delivery by region and year is in the KPI review.")),
        solve)


def variance(report: Report, files: Files, difficulty: str, rng: random.Random) -> Task:
    """Actual minus budget (or plan)."""
    c, region, year = report.currency, rng.choice(report.regions), rng.choice(report.years)
    if difficulty == "easy":
        actual, plan = report.headcount[region, year], report.headcount_plan[region, year]
        return Task(
            f"How many FTE above (positive) or below (negative) its planned headcount was {region} at the end of FY{year}? "
            f"Answer actual minus plan in FTE.",
            count(actual - plan, "FTE"),
            (files.sheet(HEADCOUNT, "Actual year-end FTE is in the Headcount sheet."), files.sheet(PLAN, "Planned FTE is in the Headcount plan sheet.")),
            lambda ev: (ev.sheet(HEADCOUNT).value(fy(year), Region=region) - ev.sheet(PLAN).value(fy(year), Region=region), "actual - plan"))
    budget = lambda ev, r: ev.table(files.docx, BUDGETS).value(fy(year), Region=r)
    if difficulty == "medium":
        return Task(
            f"By how much did {region}'s FY{year} total revenue (all products, financials workbook) differ from its FY{year} "
            f"revenue budget in the annual report? Answer actual minus budget in {c} thousand (negative if below budget).",
            money(report.total_revenue(region, year) - report.budget[region, year], c),
            (files.sheet(REVENUE, "Sum the region's product rows in the Revenue sheet."), files.report("The revenue budgets are in the annual report.")),
            lambda ev: (region_sum(ev.sheet(REVENUE), region, year) - budget(ev, region), "actual - budget"))
    code = rng.choice(report.foreign)
    gap = sum(report.total_revenue(r, year) - report.budget[r, year] for r in report.growth_segment)

    def solve(ev: Evidence):
        segment = segment_of(ev.text(files.docx))
        total = sum(region_sum(ev.sheet(REVENUE), r, year) - budget(ev, r) for r in segment)
        return total * read_rate(ev, files, code, year, "average"), f"segment {segment}: variance {total:,.1f}, converted"

    return Task(
        f"What was the combined FY{year} revenue variance (actual total revenue from the financials workbook minus the revenue "
        f"budget in the annual report) of the Growth-segment regions, as the annual report defines the segment, converted to "
        f"{code} at the FY{year} average exchange rate in the KPI review? Answer in {code} thousand (negative if below budget).",
        money(gap * report.fx_average[code, year], code, decimals=2),
        (files.report("The annual report defines the Growth segment and lists the budgets."),
         files.sheet(REVENUE, "Actual revenue per region is the sum of its product rows."),
         files.review("The exchange rates are in the KPI review.")),
        solve)
