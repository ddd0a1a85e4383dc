"""Find-in-page that cannot hang: literal matching by default, and a regex subset without catastrophic backtracking.

A runaway regex cannot be stopped from outside: CPython's `re` holds the interpreter lock for the whole
match, so a tool timeout never gets to fire. Patterns are therefore checked before they run: no
backreferences or lookarounds, no repetition inside a repetition or of an alternation, and the
product of the spans of the variable-length repetitions (`.*` spans a whole line) at most MAX_SPANS.
Lines are matched one at a time and pages keep them under LINE characters, so the backtracking work
per line is at most about LINE * MAX_SPANS steps.
"""
from __future__ import annotations

import re

try:
    from re import _parser as sre_parse  # Python 3.11+
except ImportError:  # Python 3.10
    import sre_parse  # type: ignore[no-redef]

MAX_PATTERN = 100
LINE = 100  # the longest line a page has (pages.WIDTH)
MAX_SPANS = 500  # one unbounded repetition with two optional ones, or `\d{1,4}.*`
REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}
REFUSED = {
    "GROUPREF": "backreferences",
    "GROUPREF_EXISTS": "conditional groups",
    "ASSERT": "lookarounds",
    "ASSERT_NOT": "lookarounds",
}


class PatternError(ValueError):
    """A pattern that is invalid or could take unbounded time; the message says which."""


def _children(op: str, arg) -> list:
    """The sub-patterns an opcode contains."""
    if op == "SUBPATTERN":
        return [arg[-1]]
    if op == "BRANCH":
        return list(arg[1])
    if op in REPEATS:
        return [arg[2]]
    if op == "ATOMIC_GROUP":
        return [arg]
    return []


def _check(items, inside_repeat: bool) -> int:
    """Refuse unsafe constructs below `items`; return the product of its repetitions' spans."""
    spans = 1
    for op, arg in items:
        op = str(op)
        if op in REFUSED:
            raise PatternError(f"{REFUSED[op]} are not supported")
        if inside_repeat and (op in REPEATS or op == "BRANCH"):
            raise PatternError("a repetition may not contain another repetition or an alternation")
        if op in REPEATS:
            spans *= min(arg[1], LINE) - min(arg[0], LINE) + 1
        for child in _children(op, arg):
            spans *= _check(child, inside_repeat or op in REPEATS)
    return spans


def compile_pattern(pattern: str, regex: bool) -> re.Pattern:
    """A case-insensitive matcher for a literal (default) or for a regex from the safe subset."""
    if not pattern:
        raise PatternError("the pattern is empty")
    if len(pattern) > MAX_PATTERN:
        raise PatternError(f"the pattern is {len(pattern)} characters long; at most {MAX_PATTERN} are allowed")
    if not regex:
        return re.compile(re.escape(pattern), re.IGNORECASE)
    try:
        tree = sre_parse.parse(pattern, re.IGNORECASE)
        compiled = re.compile(pattern, re.IGNORECASE)
    except (re.error, RecursionError, OverflowError) as err:
        raise PatternError(f"invalid regular expression: {err}") from err
    if _check(list(tree), inside_repeat=False) > MAX_SPANS:
        raise PatternError("too many open-ended repetitions: use at most one of *, + or {m,} with a few ? or {m,n}")
    return compiled


def find_lines(lines: list[str], pattern: str, regex: bool = False) -> list[int]:
    """Indices of the lines that contain a match (each line matched on its own)."""
    matcher = compile_pattern(pattern, regex)
    return [i for i, line in enumerate(lines) if matcher.search(line)]
