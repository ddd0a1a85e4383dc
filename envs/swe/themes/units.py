"""The unit-conversion family: tests for lengths, temperatures, data sizes, masses and speeds."""
from __future__ import annotations

import random

from jointrl.envs.swe.case import Case, call, raises
from jointrl.envs.swe.family import Family, Module


def length_cases(rng: random.Random) -> list[Case]:
    value = rng.randint(1, 500)
    return [
        call("convert_length", value, rng.choice(("km", "mi")), rng.choice(("m", "ft"))),
        call("convert_length", value, "in", "cm"),
        call("convert_length", value, "m", "m"),
        raises("ValueError", "convert_length", value, "m", "furlong"),
        call("parse_length", f"{value / 4} km"),
        call("parse_length", f"{value}in"),
        raises("ValueError", "parse_length", "km"),
        call("readable", value * 7.5),
        call("readable", 1000),
        call("readable", value / 1000),
        call("readable", 0.01),
    ]


def temperature_cases(rng: random.Random) -> list[Case]:
    c = rng.randint(-40, 120)
    return [
        call("convert_temperature", c, "C", "F"),
        call("convert_temperature", rng.randint(-40, 200), "F", "C"),
        call("convert_temperature", c, "C", "K"),
        call("convert_temperature", 0, "K", "F"),
        call("convert_temperature", 212, "F", "K"),
        raises("ValueError", "convert_temperature", -300, "C", "K"),
        raises("ValueError", "convert_temperature", 10, "X", "C"),
        raises("ValueError", "convert_temperature", 10, "C", "R"),
        call("describe", rng.choice((-5, 0))),
        call("describe", rng.choice((10, 15))),
        call("describe", rng.choice((5, 9))),
        call("describe", rng.choice((20, 25, 29))),
        call("describe", rng.choice((30, 35))),
    ]


def data_size_cases(rng: random.Random) -> list[Case]:
    count = rng.randint(2000, 10**9)
    return [
        call("human_bytes", count),
        call("human_bytes", count, binary=False),
        call("human_bytes", rng.randint(0, 1023)),
        call("human_bytes", 1024),
        call("human_bytes", 1000, binary=False),
        call("human_bytes", 5 * 1024 ** 5),
        raises("ValueError", "human_bytes", -1),
        call("parse_size", f"{rng.randint(1, 9)}.5 MiB"),
        call("parse_size", f"{rng.randint(1, 999)} kB"),
        call("parse_size", "3 B"),
        raises("ValueError", "parse_size", "3 mb"),
        call("fits", ["3 MB", "2 MB", "1 kB"], rng.choice((5_000_000, 5_001_000, 4_999_999))),
        call("fits", ["1 KiB", "1 KiB"], 2048),
    ]


def mass_cases(rng: random.Random) -> list[Case]:
    value = rng.randint(1, 900)
    servings, wanted = rng.randint(2, 6), rng.randint(1, 12)
    recipe = {"flour": (rng.randint(100, 500), "g"), "milk": (rng.randint(1, 5) / 4, "l"), "eggs": (rng.randint(1, 4), "")}
    return [
        call("convert_mass", value, "g", rng.choice(("oz", "lb"))),
        call("convert_mass", value / 100, "kg", "g"),
        call("convert_mass", value, "lb", "kg"),
        raises("ValueError", "convert_mass", value, "g", "stone"),
        call("scale_recipe", recipe, servings, wanted),
        call("scale_recipe", recipe, 4, 4),
        raises("ValueError", "scale_recipe", recipe, 0, 2),
        raises("ValueError", "scale_recipe", recipe, 2, 0),
        call("total_grams", [(value, "g"), (1, "kg"), (rng.randint(1, 16), "oz")]),
        call("pounds_and_ounces", rng.randint(100, 5000)),
        call("pounds_and_ounces", 453.59237),
    ]


def speed_cases(rng: random.Random) -> list[Case]:
    kmh = rng.randint(6, 20)
    minutes, seconds = rng.randint(3, 7), rng.randint(0, 59)
    return [
        call("convert_speed", kmh, "kmh", rng.choice(("mph", "ms", "kn"))),
        call("convert_speed", 10, "ms", "kmh"),
        raises("ValueError", "convert_speed", 10, "kmh", "mach"),
        call("pace", kmh),
        call("pace", 12),
        raises("ValueError", "pace", 0),
        call("pace_to_kmh", f"{minutes}:{seconds:02d}"),
        call("pace_to_kmh", "5:00"),
        raises("ValueError", "pace_to_kmh", "4:60"),
        raises("ValueError", "pace_to_kmh", "0:00"),
        call("finish_time", rng.choice((5, 10, 21.1, 42.195)), f"{minutes}:{seconds:02d}"),
        call("finish_time", 10, "6:00"),
    ]


FAMILY = Family(
    name="units",
    topic="the unit converters",
    package_names=("unitconv", "measure", "quantities"),
    modules=(
        Module("length", length_cases),
        Module("temperature", temperature_cases),
        Module("data_size", data_size_cases),
        Module("mass", mass_cases),
        Module("speed", speed_cases),
    ),
)
