"""The numbers of one fictional organisation's multi-year report, drawn from a seeded generator.

Every figure is rounded to the precision the documents print, so a value read back from any rendered
file equals the value here exactly, and every gold answer is computed from these rounded figures.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

# Region names are drawn from stem x ending (432 names), so a name memorised from one seed is rarely even
# present in another seed's report, let alone its answer.
REGION_STEMS = ("Vel", "Kor", "Ash", "Mar", "Tal", "Bren", "Sol", "Dun", "Eld", "Fen", "Gar", "Hal", "Ist", "Jor", "Lun",
                "Nor", "Ost", "Pel", "Rav", "Tor", "Cal", "Wen", "Zan", "Ber")
REGION_ENDINGS = ("ia", "mark", "land", "vale", "heim", "mere", "stad", "ora", "gard", "wick", "moor", "dal", "holm", "fell",
                  "burg", "thal", "ena", "aria")
REGIONS = tuple(stem + ending for stem in REGION_STEMS for ending in REGION_ENDINGS)
PRODUCTS = ("Aurora", "Beacon", "Cobalt", "Dynamo", "Ember", "Falcon", "Granite", "Harbor")
ORG_NAMES = ("Halvorsen", "Marrow", "Quillon", "Tessaro", "Vantor", "Brightwell", "Okafor", "Lindqvist", "Corvane", "Estrada")
ORG_KINDS = ("Instruments", "Systems", "Logistics", "Foods", "Textiles", "Robotics", "Materials", "Optics")
# Units of each currency per 1 EUR around which the yearly rates wander.
EUR_RATES = {"EUR": 1.0, "USD": 1.08, "GBP": 0.86, "CHF": 0.96, "JPY": 150.0, "SEK": 11.2, "CAD": 1.46}
REPORTING = ("EUR", "GBP", "CHF")
# Per difficulty: (history years, regions, products); hard also carries distractor tables, and long
# reports spread each region over pages of its own, with monthly staff-cost tables and facility notes.
SIZES = {"easy": (5, 4, 4), "medium": (5, 5, 4), "hard": (6, 6, 4), "long": (6, 13, 6)}
MONTHLY_REGIONS = 5  # long reports: regions whose staff cost per FTE the annual report states per month
FACILITY_NOTES = 20  # long reports: region-years whose facility cost carries a note (they fit the notes page)


@dataclass(frozen=True)
class FacilityNote:
    """A note on one region-year's facility cost: an item inside the printed figure, excluded from overhead or not."""

    number: int
    region: str
    year: int
    item: str
    amount: float  # thousand, 0.1; already part of the printed facility cost
    excluded: bool  # a one-off charge that overhead leaves out


@dataclass
class Report:
    """All figures of one report; money in the reporting currency (thousands unless named per unit)."""

    org: str
    slug: str  # file-name prefix
    currency: str  # reporting currency code
    years: tuple[int, ...]  # financial years with actuals, ascending
    regions: tuple[str, ...]
    products: tuple[str, ...]
    foreign: tuple[str, ...]  # currencies in the exchange-rate table
    growth_segment: tuple[str, ...]  # regions the annual report groups as the Growth segment
    distractors: bool  # hard reports add forecast, proposed-price and target tables
    revenue: dict = field(default_factory=dict)  # (region, product, year) -> thousand, 0.1
    cogs: dict = field(default_factory=dict)  # (region, product, year) -> thousand, 0.1
    units: dict = field(default_factory=dict)  # (region, product, year) -> units sold
    list_price: dict = field(default_factory=dict)  # (product, year) -> per unit, 0.01
    headcount: dict = field(default_factory=dict)  # (region, year) -> year-end FTE
    headcount_plan: dict = field(default_factory=dict)  # (region, year) -> planned FTE
    staff_cost_per_fte: dict = field(default_factory=dict)  # (region, year) -> thousand, 0.1
    budget: dict = field(default_factory=dict)  # (region, year) -> revenue budget, thousand, 0.1
    on_time: dict = field(default_factory=dict)  # (region, year) -> percent, 0.1
    satisfaction: dict = field(default_factory=dict)  # (region, year) -> percent, 0.1
    energy: dict = field(default_factory=dict)  # (region, year) -> MWh
    facility_cost: dict = field(default_factory=dict)  # (region, year) -> thousand, 0.1
    fx_average: dict = field(default_factory=dict)  # (currency, year) -> units per 1 reporting unit, 0.0001
    fx_closing: dict = field(default_factory=dict)  # (currency, year) -> units per 1 reporting unit, 0.0001
    forecast: dict = field(default_factory=dict)  # (region, product, future year) -> thousand (hard only)
    proposed_price: dict = field(default_factory=dict)  # product -> next year's proposed price (hard only)
    targets: dict = field(default_factory=dict)  # (region, kpi) -> next year's target percent (hard only)
    long: bool = False  # the long tier's documents: one page per region and topic, notes, monthly units
    monthly_staff_cost: dict = field(default_factory=dict)  # (region, year) -> per FTE per month, whole units (long only)
    average_headcount: dict = field(default_factory=dict)  # (region, year) -> average FTE over the year (long only)
    facility_notes: list = field(default_factory=list)  # FacilityNote, in note-number order (long only)

    @property
    def last(self) -> int:
        """The latest year with actuals (the report's year)."""
        return self.years[-1]

    def total_revenue(self, region: str, year: int) -> float:
        """Revenue of a region over all products."""
        return sum(self.revenue[region, p, year] for p in self.products)

    def total_cogs(self, region: str, year: int) -> float:
        """Cost of goods sold of a region over all products."""
        return sum(self.cogs[region, p, year] for p in self.products)

    def above_budget(self, year: int) -> list[str]:
        """Regions whose total revenue exceeded their revenue budget in `year`."""
        return [r for r in self.regions if self.total_revenue(r, year) > self.budget[r, year]]

    def staff_cost(self, region: str, year: int) -> float:
        """Year-end FTE times the average staff cost per FTE (thousand)."""
        return self.headcount[region, year] * self.staff_cost_per_fte[region, year]

    def one_off(self, region: str, year: int) -> float:
        """The one-off charges inside a region's printed facility cost, which overhead excludes (thousand)."""
        return sum(n.amount for n in self.facility_notes if (n.region, n.year) == (region, year) and n.excluded)

    def overhead(self, region: str, year: int) -> float:
        """Staff cost plus facility cost without one-off charges (thousand)."""
        return self.staff_cost(region, year) + self.facility_cost[region, year] - self.one_off(region, year)

    def operating_profit(self, region: str, year: int) -> float:
        """Revenue less cost of goods sold, staff cost and facility cost (thousand)."""
        return self.total_revenue(region, year) - self.total_cogs(region, year) - self.staff_cost(region, year) - self.facility_cost[region, year]


def _walk(rng: random.Random, start: float, years: tuple[int, ...], low: float, high: float, digits: int) -> dict[int, float]:
    """A yearly series that changes by a random rate in [low, high] each year, rounded."""
    out, value = {}, start
    for year in years:
        out[year] = round(value, digits)
        value *= 1 + rng.uniform(low, high)
    return out


def generate(seed: int, difficulty: str, variant: int = 0) -> Report:
    """The report for (seed, difficulty, variant); the same triple always gives the same figures."""
    if difficulty not in SIZES:
        raise ValueError(f"unknown difficulty {difficulty!r}; expected one of {sorted(SIZES)}")
    rng = random.Random(f"office-report:{difficulty}:{seed}:{variant}")
    n_years, n_regions, n_products = SIZES[difficulty]
    last = rng.randint(2021, 2025)
    years = tuple(range(last - n_years + 1, last + 1))
    regions = tuple(rng.sample(REGIONS, n_regions))
    products = tuple(rng.sample(PRODUCTS, n_products))
    currency = rng.choice(REPORTING)
    foreign = tuple(rng.sample([c for c in EUR_RATES if c != currency and c != "EUR"], 3))
    org_name = rng.choice(ORG_NAMES)
    report = Report(
        org=f"{org_name} {rng.choice(ORG_KINDS)}", slug=org_name.lower(), currency=currency, years=years,
        regions=regions, products=products, foreign=foreign,
        growth_segment=tuple(sorted(rng.sample(regions, 2 if n_regions < 5 else 3 if n_regions < 10 else 4), key=regions.index)),
        distractors=difficulty == "hard", long=difficulty == "long",
    )
    for product in products:
        for year, price in _walk(rng, rng.uniform(40, 400), years, 0.0, 0.06, 2).items():
            report.list_price[product, year] = price
    for region in regions:
        for product in products:
            for year, value in _walk(rng, rng.uniform(3000, 25000), years, -0.08, 0.15, 1).items():
                report.revenue[region, product, year] = value
                report.cogs[region, product, year] = round(value * rng.uniform(0.4, 0.65), 1)
                # Units roughly match revenue at list price, discounts and mix making them differ.
                report.units[region, product, year] = round(value * 1000 / report.list_price[product, year] * rng.uniform(0.9, 1.15))
        for year, cost in _walk(rng, rng.uniform(38, 95), years, 0.01, 0.04, 1).items():
            report.staff_cost_per_fte[region, year] = cost
        # Staff cost starts at 18-32% of the region's revenue, so operating margins stay plausible.
        first = years[0]
        start = report.total_revenue(region, first) * rng.uniform(0.18, 0.32) / report.staff_cost_per_fte[region, first]
        for year, fte in _walk(rng, start, years, -0.06, 0.1, 0).items():
            report.headcount[region, year] = int(fte)
            report.headcount_plan[region, year] = int(round(fte * rng.uniform(0.9, 1.1)))
        for year, cost in _walk(rng, rng.uniform(400, 3000), years, -0.05, 0.1, 1).items():
            report.facility_cost[region, year] = cost
        for year in years:
            report.budget[region, year] = round(report.total_revenue(region, year) * rng.uniform(0.9, 1.1), -1)
            report.on_time[region, year] = round(rng.uniform(85.0, 99.5), 1)
            report.satisfaction[region, year] = round(rng.uniform(70.0, 95.0), 1)
            # Log-uniform over 500-20,000 MWh: a mean over regions spreads widely from seed to seed.
            report.energy[region, year] = int(10 ** rng.uniform(2.7, 4.3))
    per_eur = {year: {c: EUR_RATES[c] * rng.uniform(0.94, 1.06) for c in EUR_RATES if c != "EUR"} | {"EUR": 1.0} for year in years}
    for year in years:
        for code in foreign:
            average = per_eur[year][code] / per_eur[year][currency]
            report.fx_average[code, year] = round(average, 4)
            report.fx_closing[code, year] = round(average * rng.uniform(0.97, 1.03), 4)
    if report.distractors:
        _add_distractors(report, rng)
    if report.long:
        _add_long_details(report, rng)
    return report


ONE_OFF_ITEMS = ("a one-off relocation charge", "a one-off site closure charge", "a one-off lease termination charge")
RECURRING_ITEMS = ("a recurring energy surcharge", "recurring security services", "a recurring maintenance contract")


def _add_long_details(report: Report, rng: random.Random) -> None:
    """Monthly staff-cost units, average headcount and facility-cost notes for the long tier's documents."""
    monthly = set(rng.sample(report.regions, MONTHLY_REGIONS))
    noted = set(rng.sample([(r, y) for r in report.regions for y in report.years], FACILITY_NOTES))
    for region in report.regions:
        for year in report.years:
            if region in monthly:
                # The annual figure is exactly what the printed monthly figure gives, so gold and documents agree.
                per_month = round(report.staff_cost_per_fte[region, year] * 1000 / 12)
                report.monthly_staff_cost[region, year] = per_month
                report.staff_cost_per_fte[region, year] = per_month * 12 / 1000
            report.average_headcount[region, year] = int(round(report.headcount[region, year] * rng.uniform(0.93, 1.05)))
            if (region, year) in noted:
                excluded = rng.random() < 0.6
                amount = round(report.staff_cost(region, year) * rng.uniform(0.06, 0.12), 1)
                report.facility_cost[region, year] = round(report.facility_cost[region, year] + amount, 1)
                item = rng.choice(ONE_OFF_ITEMS if excluded else RECURRING_ITEMS)
                report.facility_notes.append(FacilityNote(len(report.facility_notes) + 1, region, year, item, amount, excluded))


def _add_distractors(report: Report, rng: random.Random) -> None:
    """Forecasts, next year's budgets, proposed prices and KPI targets: near-miss figures for hard tasks."""
    future = (report.last + 1, report.last + 2)
    for region in report.regions:
        for product in report.products:
            base = report.revenue[region, product, report.last]
            for year in future:
                base *= 1 + rng.uniform(-0.03, 0.12)
                report.forecast[region, product, year] = round(base, 1)
        report.budget[region, future[0]] = round(report.total_revenue(region, report.last) * rng.uniform(0.95, 1.2), -1)
        report.targets[region, "on_time"] = round(rng.uniform(90.0, 99.0), 1)
        report.targets[region, "satisfaction"] = round(rng.uniform(80.0, 95.0), 1)
    for product in report.products:
        report.proposed_price[product] = round(report.list_price[product, report.last] * rng.uniform(1.01, 1.08), 2)
