"""The long tier's question family: a segment's overhead gathered page by page from 30-page documents.

The answer needs the segment and the overhead definition (annual report, page 1), each member region's
people page (staff cost per FTE, per month or per year as its caption says), year-end headcount
(workbook), each member's facilities page and the notes page (one-off charges inside the printed
facility cost are left out) of the KPI review, and its exchange rates: 10+ reads, each needed.
"""
from __future__ import annotations

import random

from jointrl.envs.office.documents import HEADCOUNT, fy
from jointrl.envs.office.evidence import Evidence, number
from jointrl.envs.office.long_documents import EXCLUDED, FACILITY, NOTES, PER_MONTH, STAFF
from jointrl.envs.office.report import Report
from jointrl.envs.office.task import Files, Task, Unsuitable, choose, money, read_rate, segment_of

# The one-off charges left out must move the answer well beyond the matcher's 0.5% tolerance.
MIN_ONE_OFF_SHARE = 0.02


def segment_overhead(report: Report, files: Files, difficulty: str, rng: random.Random) -> Task:
    """The Growth segment's overhead in a foreign currency, from the long tier's documents."""
    if not report.long:
        raise ValueError(f"segment-overhead needs the long tier's documents, not difficulty {difficulty!r}")
    segment, code = report.growth_segment, rng.choice(report.foreign)
    if not any((r, report.last) in report.monthly_staff_cost for r in segment):
        raise Unsuitable("no Growth-segment region states its staff cost per month")
    total = lambda y: sum(report.overhead(r, y) for r in segment)
    year = choose(rng, report.years, lambda y: sum(report.one_off(r, y) for r in segment) >= MIN_ONE_OFF_SHARE * total(y))

    def solve(ev: Evidence):
        notes = ev.table(files.pdf, NOTES)
        overheads, steps = [], []
        for region in segment_of(ev.text(files.docx)):
            staff = ev.table(files.docx, f"{STAFF}, {region} (")
            per_fte = staff.value("Staff cost per FTE", Year=fy(year))
            if PER_MONTH in staff.caption:
                per_fte = per_fte * 12 / 1000
            facility = ev.table(files.pdf, f"{FACILITY}, {region} (").find(Year=fy(year))
            note = notes.find(Note=facility["Note"]) if facility["Note"] != "-" else None
            one_off = number(note["Amount"]) if note is not None and note["Treatment"] == EXCLUDED else 0.0
            overheads.append(ev.sheet(HEADCOUNT).value(fy(year), Region=region) * per_fte + number(facility["Facility cost"]) - one_off)
            steps.append(f"{region} {overheads[-1]:,.1f}" + (f" (one-off {one_off:,.1f} left out)" if one_off else ""))
        rate = read_rate(ev, files, code, year, "average")
        return sum(overheads) * rate, "overhead " + "; ".join(steps) + f"; x {rate:.4f}"

    reads = [files.report_page(1, "Page 1 of the annual report defines overhead and the Growth segment and lists the sections.")]
    reads += [files.report_page(f"{r} people", f"{r}'s staff cost per FTE is on its people page; mind the caption's unit.")
              for r in segment]
    reads += [files.sheet(HEADCOUNT, "Year-end headcount per region is in the workbook's Headcount sheet.")]
    reads += [files.review_page(f"{r} facilities", f"{r}'s facility cost and its note marks are on its facilities page.")
              for r in segment]
    reads += [files.review_page("Notes", "The notes say which items inside facility cost are one-off and left out."),
              files.review_page("Exchange rates", "The average exchange rates are on the exchange-rates page.")]
    return Task(
        f"What was the Growth segment's total overhead in FY{year}, as the annual report defines overhead and the segment, "
        f"converted to {code} at the FY{year} average exchange rate in the KPI review? Answer in {code} thousand.",
        money(total(year) * report.fx_average[code, year], code, decimals=2),
        tuple(reads),
        solve)
