"""The dates-and-durations family: tests for durations, calendar arithmetic, ISO dates, working days, clocks."""
from __future__ import annotations

import random

from jointrl.envs.swe.case import Case, call, raises
from jointrl.envs.swe.family import Family, Module


def _date(rng: random.Random) -> tuple[int, int, int]:
    return (rng.randint(1990, 2030), rng.randint(1, 12), rng.randint(1, 28))


def duration_cases(rng: random.Random) -> list[Case]:
    h, m, s = rng.randint(1, 23), rng.randint(1, 59), rng.randint(1, 59)
    days = rng.randint(1, 9)
    return [
        call("parse_duration", f"{h}h{m}m{s}s"),
        call("parse_duration", f"{days}d {h}H"),
        call("parse_duration", f"{m * 3}m"),
        raises("ValueError", "parse_duration", f"{m}m{h}h"),
        raises("ValueError", "parse_duration", f"{h}h{m}"),
        raises("ValueError", "parse_duration", ""),
        call("format_duration", days * 86400 + h * 3600 + s),
        call("format_duration", h * 3600 + m * 60, largest="m"),
        call("format_duration", 0),
        raises("ValueError", "format_duration", -s),
        call("total_minutes", [f"{m}m{s}s", f"{h}h", f"{s}s"]),
    ]


def calendar_cases(rng: random.Random) -> list[Case]:
    date = _date(rng)
    return [
        call("is_leap", rng.choice((1996, 2004, 2024, 2028))),
        call("is_leap", rng.choice((1900, 2100, 2200))),
        call("is_leap", 2000),
        call("is_leap", rng.choice((2019, 2021, 2023))),
        call("days_in_month", rng.choice((2000, 2024)), 2),
        call("days_in_month", 2023, rng.choice((4, 6, 9, 11))),
        call("days_in_month", 2023, 12),
        raises("ValueError", "days_in_month", 2023, 13),
        call("day_of_year", *date),
        call("day_of_year", 2024, 12, 31),
        call("add_days", *date, rng.randint(20, 400)),
        call("add_days", *date, -rng.randint(20, 400)),
        call("add_days", 2023, 12, 31, 1),
        call("weekday", *date),
        call("weekday", 2024, rng.randint(1, 2), rng.randint(1, 28)),
    ]


def isodate_cases(rng: random.Random) -> list[Case]:
    y, m, d = _date(rng)
    other = _date(rng)
    return [
        call("parse_date", f"{y}-{m:02d}-{d:02d}"),
        raises("ValueError", "parse_date", f"{y}-02-30"),
        raises("ValueError", "parse_date", f"{y}/{m}/{d}"),
        call("parse_date", "2024-02-29"),
        call("format_date", y, m, d),
        call("format_date", 987, 1, 2),
        call("ordinal", 1, 1, 1),
        call("days_between", f"{y}-{m:02d}-{d:02d}", "{:04d}-{:02d}-{:02d}".format(*other)),
        call("days_between", "2023-12-31", "2024-01-01"),
        call("quarter", f"{y}-{m:02d}-{d:02d}"),
        call("quarter", f"{y}-0{rng.choice((3, 4))}-01"),
        call("days_in_year", rng.choice((1900, 2000, 2023, 2024))),
    ]


def business_cases(rng: random.Random) -> list[Case]:
    start = (2024, rng.randint(1, 11), rng.randint(1, 20))
    end = (2024, start[1] + 1, rng.randint(1, 28))
    holiday = (2024, start[1], start[2] + rng.randint(1, 7))
    return [
        call("is_business_day", (2024, 3, rng.choice((4, 5, 6, 7, 8)))),
        call("is_business_day", (2024, 3, rng.choice((9, 10)))),
        call("is_business_day", (2024, 3, 6), holidays=[(2024, 3, 6)]),
        call("business_days_between", start, end),
        call("business_days_between", start, end, holidays=[holiday]),
        call("business_days_between", (2024, 3, 4), (2024, 3, 4)),
        call("add_business_days", start, rng.randint(1, 12)),
        call("add_business_days", (2024, 3, 8), 1),
        call("add_business_days", start, 0),
        raises("ValueError", "add_business_days", start, -1),
        call("next_business_day", (2024, 3, rng.choice((9, 10)))),
        call("next_business_day", (2024, 3, 7), holidays=[(2024, 3, 7), (2024, 3, 8)]),
    ]


def clock_cases(rng: random.Random) -> list[Case]:
    h, m = rng.randint(13, 23), rng.randint(0, 59)
    morning = rng.randint(1, 11)
    return [
        call("parse_time", f"{h}:{m:02d}"),
        raises("ValueError", "parse_time", f"24:{m:02d}"),
        raises("ValueError", "parse_time", f"{h}:60"),
        call("to_12h", f"{h}:{m:02d}"),
        call("to_12h", f"00:{m:02d}"),
        call("to_12h", f"12:{m:02d}"),
        call("to_24h", f"{morning}:{m:02d} PM"),
        call("to_24h", f"12:{m:02d} AM"),
        call("to_24h", f"12:{m:02d} PM"),
        call("minutes_between", f"{morning:02d}:{m:02d}", f"{h}:00"),
        call("minutes_between", f"{h}:{m:02d}", f"0{morning % 10}:15"),
        call("round_to", f"{h}:{m:02d}", rng.choice((5, 10, 15, 30))),
        call("round_to", "10:07", 15),
        call("round_to", "23:53", 15),
    ]


FAMILY = Family(
    name="durations",
    topic="the date and duration helpers",
    package_names=("timewise", "chrono_lite", "datekit"),
    modules=(
        Module("duration", duration_cases),
        Module("calendar_math", calendar_cases),
        Module("isodate", isodate_cases, requires=("calendar_math",)),
        Module("business", business_cases, requires=("calendar_math",)),
        Module("clock", clock_cases),
    ),
)
