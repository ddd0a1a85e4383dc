"""Which answer each seed's entry must have, for datasets whose raw answers a constant guess would often hit.

Three kinds of dataset are balanced by redrawing a seed's entry until its reference answer fits the seed:

- an explicit k-way choice (yes/no, one of k named moves) lists its choices in CHOICES; seed s wants choice
  `target(s, k)`, so every choice is the right one equally often and the env declares `answer_choices = k`;
- a dataset whose degenerate answers are common (the dead board, a one-cell matrix) lists a test for it in DEGENERATE, and
  entries with that answer are redrawn;
- a dataset with a few very common answers (`0`, `infeasible`, a small count) is in SPREAD: its answers fall
  into BUCKETS buckets (see bucket) and seed s wants an answer in bucket `target(s, BUCKETS)`, so no single
  answer is right for more than one seed in BUCKETS consecutive aligned ones. Only datasets with answers
  wide enough to fill every bucket can be spread; those too narrow are excluded (exclusions.py).

`target(s, k)` is the digit sum of s in base k, mod k (the generalised Thue-Morse sequence): every aligned
run of k consecutive seeds takes each value exactly once, and, unlike `s mod k`, the seeds 1_000_000 + i do
not repeat the values of the seeds i (a memorised train answer is not the held-out one).
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Callable

CHOICES: dict[str, tuple[str, ...]] = {
    "acre": ("on", "off", "undetermined"),
    "circuit_logic": ("0", "1"),
    "course_schedule": ("True", "False"),
    "mahjong_puzzle": ("Peng", "Chi", "Pass"),
    "syllogism": ("Yes", "No"),
}
SPREAD: frozenset[str] = frozenset({
    "calendar_arithmetic", "gsm_symbolic", "largest_island", "number_sequence", "power_function", "products",
    "shortest_path", "tsumego",
})


def _dead_board(reference: str) -> bool:
    """A Game of Life answer in which every cell is dead."""
    return not any(cell for row in json.loads(reference) for cell in row)


def _one_cell(reference: str) -> bool:
    """A matrix answer cropped down to a single cell (a fifth of the hard tasks, a third of them '0')."""
    return len(reference.split()) == 1


DEGENERATE: dict[str, Callable[[str], bool]] = {"game_of_life": _dead_board, "manipulate_matrix": _one_cell}
# A constant answer is right for at most one seed in each aligned run of BUCKETS seeds: at most 1/23, 4.3%.
BUCKETS = 23
# Draws a balanced seed may take. The rarest bucket measured (shortest_path hard) holds 0.5% of the answers:
# 1000 draws miss it with probability 0.7% (400 would miss it 13% of the time); a miss takes the first
# playable entry passed over (entries.draw), unbalanced for that seed alone.
MAX_DRAWS = 1000


def target(seed: int, k: int) -> int:
    """The digit sum of `seed` in base k, mod k: the choice or bucket that seed's answer must fall in."""
    total = 0
    while seed:
        seed, digit = divmod(seed, k)
        total += digit
    return total % k


def answer_choices(name: str) -> int | None:
    """k for a dataset posed as an explicit k-way choice, else None."""
    return len(CHOICES[name]) if name in CHOICES else None


def balanced(name: str) -> bool:
    """Whether a seed of this dataset must redraw until its answer fits (see fits)."""
    return name in CHOICES or name in SPREAD or name in DEGENERATE


def _normal(answer: str) -> str:
    """The answer as a choice compares it: stripped and lower-case."""
    return answer.strip().lower()


def bucket(answer: str) -> int:
    """The SPREAD bucket of an answer: an integer's value mod BUCKETS (so any BUCKETS consecutive counts fill
    every bucket), any other answer's hash (stable across processes)."""
    text = _normal(answer)
    if re.fullmatch(r"[-+]?\d{1,30}", text):
        return int(text) % BUCKETS
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "big") % BUCKETS


def fits(name: str, seed: int, reference: str) -> bool:
    """Whether an entry with this reference answer may be seed's task (always true for unbalanced datasets)."""
    if name in CHOICES:
        choices = [_normal(c) for c in CHOICES[name]]
        wanted = choices[target(seed, len(choices))]
        return _normal(reference) == wanted
    if name in SPREAD:
        return bucket(reference) == target(seed, BUCKETS)
    if name in DEGENERATE:
        return not DEGENERATE[name](reference)
    return True
