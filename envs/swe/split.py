"""The train / held-out split of bug sites: held-out seeds inject bugs only on lines train seeds never touch.

The mutable lines of a module (lines where some mutation starts) are grouped by their text, and every
third group in source order goes to the held-out half. Grouping by text matters: the same line written
twice (`if scale == "C":` in two functions) gives the same fix wherever it is mutated, so both copies must
fall in one half. A held-out task's fixes (and its `task_key`) can then never be ones a policy saw in
training; the split depends on the source text alone.
"""
from __future__ import annotations

from functools import lru_cache

from jointrl.envs.base import HELD_OUT_START
from jointrl.envs.swe.mutation import Mutation, mutations

HELD_OUT_EVERY = 3  # one mutable line in this many is held out


def held_out_seed(seed: int) -> bool:
    """Whether `seed` is an evaluation seed (its bugs come from the held-out half)."""
    return seed >= HELD_OUT_START


def site_line(source: str, mutation: Mutation) -> int:
    """The 1-based line of `source` where the mutation's change starts."""
    return source.count("\n", 0, mutation.start) + 1


def _text(source: str, line: int) -> str:
    return source.splitlines()[line - 1].strip()


@lru_cache(maxsize=None)
def held_out_texts(source: str) -> frozenset[str]:
    """The texts of the mutable lines of `source` reserved for held-out seeds: every third, in source order."""
    lines = sorted({site_line(source, m) for m in mutations(source)})
    texts = list(dict.fromkeys(_text(source, line) for line in lines))
    return frozenset(text for rank, text in enumerate(texts) if rank % HELD_OUT_EVERY == HELD_OUT_EVERY - 1)


def in_half(source: str, mutation: Mutation, held_out: bool) -> bool:
    """Whether a mutation of `source` belongs to the held-out half (`held_out`) or to the train half."""
    return (_text(source, site_line(source, mutation)) in held_out_texts(source)) == held_out
