"""The string-utilities family: tests for slugs, identifier case, edit distance, wrapping and word counts."""
from __future__ import annotations

import random

from jointrl.envs.swe.case import Case, call, raises
from jointrl.envs.swe.family import Family, Module

WORDS = ("hello", "world", "data", "parse", "server", "alpha", "beta", "quick", "brown", "fox", "river", "stone",
         "cloud", "paper", "lamp", "orbit", "maple", "north", "signal", "table")
MINOR = ("a", "an", "and", "of", "the", "in", "on", "to")
GLUE = (" ", ", ", " - ", "!  ", " & ", "... ")


def _phrase(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    words = [w.capitalize() if rng.random() < 0.4 else w for w in words]
    out = words[0]
    for word in words[1:]:
        out += rng.choice(GLUE) + word
    return out


def slug_cases(rng: random.Random) -> list[Case]:
    long_text = _phrase(rng, 5)
    limit = rng.randint(8, 14)
    text = rng.choice(WORDS)
    return [
        call("slugify", _phrase(rng, 3)),
        call("slugify", f"  {_phrase(rng, 2)} {rng.randint(2, 99)}!"),
        call("slugify", _phrase(rng, 3), sep="_"),
        call("slugify", long_text, max_length=limit),
        call("truncate", text, len(text)),
        call("truncate", long_text, rng.randint(8, 12)),
        call("truncate", long_text, 9, ellipsis="~"),
        raises("ValueError", "truncate", text, 2),
        call("initials", f"{rng.choice(WORDS)} {rng.choice(WORDS)}"),
        call("initials", " ".join(rng.choice(WORDS) for _ in range(5))),
        call("initials", f"{rng.choice(WORDS)} 42 {rng.choice(WORDS)}", limit=2),
    ]


def case_cases(rng: random.Random) -> list[Case]:
    a, b, c = rng.sample(WORDS, 3)
    return [
        call("snake_to_camel", f"{a}_{b}_{c}"),
        call("snake_to_camel", f"{a}__{b}", upper_first=True),
        call("snake_to_camel", f"_{a}_"),
        call("snake_to_camel", "__"),
        call("camel_to_snake", f"{a}{b.capitalize()}{c.capitalize()}"),
        call("camel_to_snake", f"{a.upper()[:4]}{b.capitalize()}"),
        call("camel_to_snake", f"{a.capitalize()}{b.upper()[:3]}"),
        call("title_case", f"{rng.choice(MINOR)} {a} {rng.choice(MINOR)} {b} {c}"),
        call("title_case", f"{a.upper()} {rng.choice(MINOR)} {b} {rng.choice(MINOR)}"),
    ]


def distance_cases(rng: random.Random) -> list[Case]:
    a, b = rng.sample(WORDS, 2)
    stem = rng.choice(WORDS)
    typo = stem[:-1] + ("x" if stem[-1] != "x" else "y")
    same = "".join(rng.choice("ab") for _ in range(rng.randint(5, 8)))
    flipped = "".join(rng.choice("ab") for _ in same)
    return [
        call("levenshtein", a, b),
        call("levenshtein", stem, stem + rng.choice("sz")),
        call("levenshtein", "", b),
        call("levenshtein", typo, stem),
        call("hamming", same, flipped),
        raises("ValueError", "hamming", same, same + "a"),
        call("common_prefix", [stem + "ing", stem + "ed", stem]),
        call("common_prefix", [a, b]),
        call("common_prefix", []),
        call("closest", typo, [a, stem, b]),
        call("closest", "zzzzzz", [a, b], max_distance=rng.randint(1, 2)),
    ]


def wrap_cases(rng: random.Random) -> list[Case]:
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(7, 10)))
    word = rng.choice(WORDS)
    first, second = rng.sample(WORDS, 2)
    return [
        call("wrap", text, rng.randint(10, 16)),
        call("wrap", f"{first} {second}", len(first) + 1 + len(second)),
        call("wrap", f"{word}{word} {first}", 4),
        raises("ValueError", "wrap", text, 0),
        call("center", word, len(word) + rng.choice((3, 5)), fill="*"),
        call("center", word, len(word) + 4),
        call("center", word, len(word) - 1),
        raises("ValueError", "center", word, 10, fill="ab"),
        call("justify", rng.sample(WORDS, 3), 22),
        call("justify", rng.sample(WORDS, 4), 29),
        call("justify", [word], 12),
    ]


def counting_cases(rng: random.Random) -> list[Case]:
    pool = rng.sample(WORDS, 4)
    text = " ".join(rng.choice(pool) for _ in range(12)) + ". It's " + pool[0] + "!"
    return [
        call("words", f"{pool[0].capitalize()}, {pool[1]}'s {pool[2]}!"),
        call("words", "'quoted' words"),
        call("word_counts", text),
        call("top_words", text, 2),
        call("top_words", text, 3, min_length=5),
        call("top_words", "b a c b a", 2),
        call("vowel_ratio", " ".join(pool)),
        call("vowel_ratio", "rhythm"),
        call("vowel_ratio", "123 !"),
    ]


FAMILY = Family(
    name="strings",
    topic="the string utilities",
    package_names=("textkit", "strutil", "wordsmith"),
    modules=(
        Module("slug", slug_cases),
        Module("case", case_cases),
        Module("distance", distance_cases),
        Module("wrap", wrap_cases),
        Module("counting", counting_cases),
    ),
)
