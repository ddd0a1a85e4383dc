"""Question families that combine measures: rate joins, currency conversion, margins, counts, budget variances.

Each family is `fn(report, files, difficulty, rng) -> Task`, with the difficulty ladder of
families_read: one file and one lookup, then two files or two steps, then three formats and distractors.
"""
from __future__ import annotations

import random

from jointrl.envs.office.documents import BUDGETS, COGS, FACILITY, HEADCOUNT, PLAN, PRICES, REVENUE, UNITS, fy
from jointrl.envs.office.evidence import Evidence, number
from jointrl.envs.office.report import Report
from jointrl.envs.office.task import (Files, Task, Unsuitable, change_pct, choose, count, money, percent, read_rate,
                                      read_staff_cost, region_sum, segment_of)


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
    """A margin: profit as a percentage of revenue (easy and medium: its change between two years, in points)."""
    region, product, year = rng.choice(report.regions), rng.choice(report.products), rng.choice(report.years)
    tail = "Answer in percent with two decimals."
    if difficulty in ("easy", "medium"):
        # A gross margin itself sits in a narrow band (35-60%) that a constant guess would hit; its change
        # from one year to the next is spread around zero, where the tolerance is 0.01 points.
        year = rng.choice(report.years[1:])
        if difficulty == "easy":
            what, sums = f"product {product}'s gross margin in {region}", "the product's row"
            rev = lambda y: report.revenue[region, product, y]
            cost = lambda y: report.cogs[region, product, y]
            read = lambda ev, sheet, y: ev.sheet(sheet).value(fy(y), Region=region, Product=product)
        else:
            what, sums = f"{region}'s gross margin over all products", "the sums of the region's rows"
            rev = lambda y: report.total_revenue(region, y)
            cost = lambda y: report.total_cogs(region, y)
            read = lambda ev, sheet, y: region_sum(ev.sheet(sheet), region, y)
        gross = lambda r, c: (r - c) / r * 100

        def solve(ev: Evidence):
            new, old = (gross(read(ev, REVENUE, y), read(ev, COGS, y)) for y in (year, year - 1))
            return new - old, f"gross margin {new:.4f}% in FY{year} less {old:.4f}% in FY{year - 1}"

        return Task(
            f"By how many percentage points did {what} change from FY{year - 1} to FY{year}? Gross margin is (revenue - "
            f"cost of goods sold) / revenue. Answer the FY{year} margin minus the FY{year - 1} margin in percentage points "
            f"with two decimals (negative for a decline).",
            percent(gross(rev(year), cost(year)) - gross(rev(year - 1), cost(year - 1))),
            (files.sheet(REVENUE, f"Revenue for both years: {sums} in the Revenue sheet."),
             files.sheet(COGS, f"Cost of goods sold for both years: {sums} in the COGS sheet.")),
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


def _cut(rng: random.Random, values: list[float], min_gap: float, digits: int) -> tuple[float, int]:
    """A threshold strictly between two neighbouring values (rounded to `digits`) and how many values exceed it.

    The count is drawn evenly over every well-separated position, so over many cells no count is a likely guess."""
    ordered = sorted(values, reverse=True)
    cuts = []
    for k in range(1, len(ordered)):
        hi, lo = ordered[k - 1], ordered[k]
        middle = round((hi + lo) / 2, digits)
        if hi - lo >= min_gap and lo < middle < hi:
            cuts.append((middle, k))
    if not cuts:
        raise Unsuitable("no well-separated threshold")
    return rng.choice(cuts)


def threshold(report: Report, files: Files, difficulty: str, rng: random.Random) -> Task:
    """How many cells of a region x product x year grid meet a threshold (dozens of cells, so the count is wide)."""
    cells = [(r, p, y) for r in report.regions for p in report.products for y in report.years]
    n = len(cells)
    if difficulty == "easy":
        c = report.currency
        limit, k = _cut(rng, [report.revenue[cell] for cell in cells], 1.0, 1)
        return Task(
            f"Across all regions, products and years in the workbook's Revenue sheet, how many region-product-year figures "
            f"exceed {c} {limit:,.1f} thousand? There are {n} such figures. Answer with the number.",
            count(k),
            (files.sheet(REVENUE, "Count the Revenue sheet's figures above the threshold."),),
            lambda ev: (sum(number(r[fy(y)]) > limit for r in ev.sheet(REVENUE).records() for y in report.years),
                        f"figures above {limit:,.1f}"))
    if difficulty == "medium":
        later = [(r, p, y) for r, p, y in cells if y != report.years[0]]
        grown = [change_pct(report.revenue[r, p, y], report.revenue[r, p, y - 1]) for r, p, y in later]
        limit, k = _cut(rng, grown, 0.2, 1)

        def solve(ev: Evidence):
            rates = [change_pct(number(r[fy(y)]), number(r[fy(y - 1)])) for r in ev.sheet(REVENUE).records() for y in report.years[1:]]
            return sum(g > limit for g in rates), f"{len(rates)} year-over-year changes"

        return Task(
            f"In the workbook's Revenue sheet, for how many region-product pairs and years FY{report.years[1]}-FY{report.last} "
            f"did revenue grow by more than {limit:.1f}% over the previous year? There are {len(later)} such changes. "
            f"Answer with the number.",
            count(k),
            (files.sheet(REVENUE, "Compute each region-product row's change for every year."),),
            solve)
    code = rng.choice(report.foreign)
    value = lambda r, p, y: report.units[r, p, y] * report.list_price[p, y] * report.fx_closing[code, y] / 1000
    limit, k = _cut(rng, [value(*cell) for cell in cells], 1.0, 1)

    def solve(ev: Evidence):
        prices = ev.table(files.docx, PRICES)
        worth = [number(r[fy(y)]) * prices.value(fy(y), Product=r["Product"]) * read_rate(ev, files, code, y, "closing") / 1000
                 for r in ev.sheet(UNITS).records() for y in report.years]
        return sum(w > limit for w in worth), f"{len(worth)} figures at list price in {code}"

    return Task(
        f"Value each region's units sold of each product in each year (financials workbook) at that year's list price "
        f"(annual report), converted to {code} at that year's closing exchange rate (KPI review). How many of these "
        f"{n} region-product-year values exceed {code} {limit:,.1f} thousand? Answer with the number.",
        count(k),
        (files.sheet(UNITS, "Units sold per product, region and year are in the Units sheet."),
         files.report("The list prices in force are a table in the annual report."),
         files.review("The closing exchange rates are in the KPI review.")),
        solve)


def variance(report: Report, files: Files, difficulty: str, rng: random.Random) -> Task:
    """Actual minus budget (or plan)."""
    c, region, year = report.currency, rng.choice(report.regions), rng.choice(report.years)
    if difficulty == "easy":
        # In percent of plan: a difference of a few FTE would be a small integer, easy to guess.
        region, year = choose(rng, [(r, y) for r in report.regions for y in report.years],
                              lambda ry: report.headcount[ry] != report.headcount_plan[ry])
        actual, plan = report.headcount[region, year], report.headcount_plan[region, year]

        def solve(ev: Evidence):
            got, planned = ev.sheet(HEADCOUNT).value(fy(year), Region=region), ev.sheet(PLAN).value(fy(year), Region=region)
            return change_pct(got, planned), f"({got:,.0f} - {planned:,.0f}) / {planned:,.0f} x 100"

        return Task(
            f"By what percentage was {region}'s year-end headcount at the end of FY{year} above (positive) or below (negative) "
            f"its planned headcount? Answer (actual - plan) / plan in percent with two decimals.",
            percent(change_pct(actual, plan)),
            (files.sheet(HEADCOUNT, "Actual year-end FTE is in the Headcount sheet."), files.sheet(PLAN, "Planned FTE is in the Headcount plan sheet.")),
            solve)
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
