"""Tolerant answer matching: numbers with separators, currencies, scale words and percent signs; names.

A numeric answer is the last number in the reply (after an 'Answer:' marker when there is one). It is
correct when it lies within REL_TOL of the gold value (or ABS_TOL, for values near zero), read in the
question's unit or, when the reply writes a scale word ('k', 'thousand', 'm', 'million', 'bn'), in
absolute terms; a reply without a scale word may also give the full figure. A reply that names a
different currency, a percent sign where none belongs, or two different figures in its answer part is
wrong. A name answer is correct when the normalised reply is the name, or mentions it and no other
candidate (candidates are every name the domain can generate, not only this report's).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

REL_TOL, ABS_TOL = 0.005, 0.01
# An answer is a figure or a name: its tail is all matching reads, so a huge reply costs no more than this.
MAX_REPLY_CHARS = 4096
ANSWER_MARK = re.compile(r"(?i)\bfinal answer\s*[:=]|\banswer\s*[:=]")
# A number: optional sign or opening parenthesis, digits with ',' or '.' groups, optional decimals.
# A figure glued to 'FY' is a year label, not an answer.
# The gap after a sign is bounded ({0,3}), which keeps matching linear in the reply's length (an
# unbounded \s* retried at every blank of a long run of blanks is quadratic).
NUMBER = re.compile(r"(?P<neg>[-\u2212\u2013(])?\s{0,3}(?<!FY)(?<![\d.,])(?P<digits>\d[\d,.]*\d|\d)(?:\s?(?P<suffix>%|percent\b|k\b|thousands?\b|tsd\b|mn\b|m\b|mio\b|millions?\b|bn\b|billions?\b|(?:st|nd|rd|th)\b))?", re.I)
SCALES = {"k": 1e3, "thousand": 1e3, "thousands": 1e3, "tsd": 1e3, "m": 1e6, "mn": 1e6, "mio": 1e6, "million": 1e6,
          "millions": 1e6, "bn": 1e9, "billion": 1e9, "billions": 1e9}
CURRENCY_CODES = ("EUR", "USD", "GBP", "CHF", "JPY", "SEK", "CAD")
SYMBOLS = {"€": {"EUR"}, "$": {"USD", "CAD"}, "£": {"GBP"}, "¥": {"JPY"}}


@dataclass(frozen=True)
class Gold:
    """A gold answer: a number in a unit (currency, scale, percent) or a name among candidates."""

    value: float | str
    unit: str = ""  # as the question names it: 'EUR thousand', '%', 'FTE', 'units', ''
    currency: str | None = None
    scale: float = 1.0  # what one unit of `value` is worth: 1000 for thousands
    percent: bool = False
    decimals: int = 1  # how the demo writes it
    candidates: tuple[str, ...] = ()  # for names: every name a reply could give

    @property
    def is_text(self) -> bool:
        """Whether the answer is a name rather than a number."""
        return isinstance(self.value, str)

    def render(self, value: float | str) -> str:
        """`value` written as an answer in this gold's unit ('EUR 1,234.5 thousand', '12.34%', 'Nordics')."""
        if isinstance(value, str):
            return value
        if self.percent:
            return f"{value:.{self.decimals}f}%"
        figure = f"{value:,.{self.decimals}f}"
        unit = self.unit.removeprefix(self.currency).strip() if self.currency else self.unit
        return " ".join(part for part in (self.currency, figure, unit) if part)


@dataclass(frozen=True)
class Parsed:
    """The number a reply gives, with what it says about scale, percent and currency."""

    value: float
    scale: float | None  # from a scale word; None when the reply has none
    percent: bool
    currencies: frozenset[str]


def answer_part(text: str) -> str:
    """The part of a reply that holds the answer: after the last 'Answer:' marker, else all of it."""
    marks = list(ANSWER_MARK.finditer(text))
    return text[marks[-1].end():] if marks else text


def _digits(raw: str) -> float | None:
    # Both separators: the later one is the decimal point. Only commas: thousands when every group has
    # three digits ('1,234,567'), else a decimal comma ('12,5').
    if "," in raw and "." in raw:
        decimal = "." if raw.rfind(".") > raw.rfind(",") else ","
        thousands = "," if decimal == "." else "."
        raw = raw.replace(thousands, "").replace(decimal, ".")
    elif "," in raw:
        groups = raw.split(",")
        raw = raw.replace(",", "") if all(len(g) == 3 for g in groups[1:]) else raw.replace(",", ".")
    elif raw.count(".") > 1:
        raw = raw.replace(".", "")
    try:
        return float(raw)
    except ValueError:
        return None


def parse_number(text: str) -> Parsed | None:
    """The last number of a reply's answer part, or None when it has none."""
    part = answer_part(text).replace("\u00a0", " ")
    found = None
    for match in NUMBER.finditer(part):
        value = _digits(match.group("digits"))
        if value is not None:
            found = (match, value)
    if found is None:
        return None
    match, value = found
    if match.group("neg"):
        value = -value
    suffix = (match.group("suffix") or "").lower()
    upper = part.upper()
    currencies = {code for code in CURRENCY_CODES if re.search(rf"\b{code}\b", upper)}
    for symbol, codes in SYMBOLS.items():
        if symbol in part:
            currencies.add("|".join(sorted(codes)))
    return Parsed(value, SCALES.get(suffix), suffix in ("%", "percent"), frozenset(currencies))


def _close(answer: float, gold: float) -> bool:
    return math.isfinite(answer) and abs(answer - gold) <= max(REL_TOL * abs(gold), ABS_TOL)


def _currency_ok(parsed: Parsed, gold: Gold) -> bool:
    # A symbol stands for a set of codes ('$' is USD or CAD); every currency the reply names must fit.
    return all(gold.currency is not None and gold.currency in named.split("|") for named in parsed.currencies)


def number_matches(reply: str, gold: Gold) -> bool:
    """Whether the reply's number equals the gold figure within tolerance, in a compatible unit."""
    parsed = parse_number(reply)
    if parsed is None or not _currency_ok(parsed, gold):
        return False
    if gold.percent:
        return parsed.scale is None and _close(parsed.value, gold.value)
    if parsed.percent:
        return False
    absolute = gold.value * gold.scale
    if parsed.scale is not None:
        return _close(parsed.value * parsed.scale, absolute)
    return _close(parsed.value, gold.value) or _close(parsed.value, absolute)


def normalise(text: str) -> str:
    """Lower case, punctuation to spaces, single spaces."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def named_candidates(said: str, gold: Gold) -> set[str]:
    """The gold's candidates a normalised reply mentions as whole words."""
    padded = f" {said} "
    return {c for c in gold.candidates if f" {normalise(c)} " in padded}


def text_matches(reply: str, gold: Gold) -> bool:
    """Whether the reply names the gold and no other candidate."""
    said = normalise(answer_part(reply))
    target = normalise(gold.value)
    if not said or not target:
        return False
    if said == target:
        return True
    return named_candidates(said, gold) == {gold.value}


def several_answers(reply: str | None, gold: Gold) -> bool:
    """Whether a reply hedges over several answers: two or more candidates named, or two or more different
    figures in its answer part (a list of guesses; the answer is to hold one figure)."""
    if not reply:
        return False
    reply = reply[-MAX_REPLY_CHARS:]
    if gold.is_text:
        return len(named_candidates(normalise(answer_part(reply)), gold)) >= 2
    figures = {_digits(m.group("digits")) for m in NUMBER.finditer(answer_part(reply))} - {None}
    return len(figures) >= 2


def matches(reply: str | None, gold: Gold) -> bool:
    """Whether a final reply answers the gold correctly; only its last MAX_REPLY_CHARS characters are read.

    A reply that lists several candidates is wrong even when one of them is right."""
    if not reply:
        return False
    reply = reply[-MAX_REPLY_CHARS:]
    if several_answers(reply, gold):
        return False
    return text_matches(reply, gold) if gold.is_text else number_matches(reply, gold)
