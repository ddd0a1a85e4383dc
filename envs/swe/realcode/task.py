"""Build one real-code swe task from (family, difficulty, seed): mined bugs, their workspace and the issue.

Train seeds (< HELD_OUT_START) draw from bugs in the package's training files, held-out seeds from bugs in
its held-out files (manifest `held_out_files`), each in a seeded order; no held-out bug sits in a file a
training bug mutates. `long` puts three bugs of one split, in three functions, into the package at once.
The hard and long tiers leave out held-out bugs whose report would show the calls a training bug's report
shows, so no held-out issue repeats a training one.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from jointrl.envs.audit import HELD_OUT_START
from jointrl.envs.sandbox import Limits, Sandbox
from jointrl.envs.swe.mutation import inverse_edit
from jointrl.envs.swe.realcode import issue, manifest
from jointrl.envs.swe.realcode.cases import Case, outcomes
from jointrl.envs.swe.realcode.prepare import workspace_files
from jointrl.envs.swe.realcode.sources import Source, source

# difficulty: (bugs, whether the issue points at the failing test and the function)
LEVELS = {"easy": (1, True), "hard": (1, False), "long": (3, False)}
SYMPTOMS = 2  # misbehaving calls reported per bug in a hard issue
MIN_LINES_APART = 30  # two bugs of one file this far apart keep their fixes separate edits
CASE_LIMITS = Limits(wall_seconds=60.0, cpu_seconds=60, output_bytes=4 << 20)
MAX_DRAWS = 40  # bugs looked at, from the seed's place in the pool on, to complete a long task


@dataclass(frozen=True)
class Fix:
    """The edit that removes one bug: replace `old` (unique in the file while the bug is there) by `new`."""

    path: str
    old: str
    new: str


@dataclass(frozen=True)
class RealTask:
    """Everything an episode needs; `cases` and the bugs stay on the host."""

    family: str
    difficulty: str
    seed: int
    pin: Source
    bugs: tuple  # the manifest records of the injected bugs
    fixes: tuple  # Fix per bug, in the order the demo applies them
    files: dict  # the workspace: the package with the bugs in place, and its tests
    pristine: dict  # the same without the bugs
    issue: str
    cases: tuple  # ((Case, reference outcome), ...): every graded case of the package
    fail_to_pass: frozenset  # indices into cases the bugs change
    start_passing: frozenset  # cases passing on the buggy package (from mining, or measured when building)

    @property
    def package(self) -> str:
        return self.pin.package


@lru_cache(maxsize=16)
def pristine_files(family: str) -> dict:
    """The unbugged workspace of a family (read once per process from the cache)."""
    return workspace_files(source(family))


def pool(family: str, held_out: bool, distinct_symptoms: bool = False) -> list[dict]:
    """The bugs of one split in the seeded order seeds index.

    With `distinct_symptoms` (the hard and long tiers, whose issues show only calls and outcomes), held-out
    bugs whose reported calls are the ones some training bug reports are left out: their issue could read
    word for word like a training issue, so the held-out prompt would not be new.
    """
    package = manifest.load()[family]
    held = set(package["held_out_files"])
    chosen = [b for b in package["bugs"] if (b["file"] in held) == held_out]
    if held_out and distinct_symptoms:
        cases, shared = tuple(manifest.graded_cases(family)), shared_counts(family)
        seen = {tuple(_ranked(cases, b["f2p_cases"], shared)[:SYMPTOMS]) for b in package["bugs"] if b["file"] not in held}
        chosen = [b for b in chosen if tuple(_ranked(cases, b["f2p_cases"], shared)[:SYMPTOMS]) not in seen]
    random.Random(f"realcode/{family}/{'held-out' if held_out else 'train'}").shuffle(chosen)
    return chosen


def _ranked(cases: tuple, changed, shared: dict[int, int]) -> list[int]:
    """Changed cases in report order: cases few other bugs of the package change first (so reports of
    different bugs differ), then visible ones, public modules, short calls."""
    return sorted(changed, key=lambda i: (shared.get(i, 0), not cases[i][0].visible, "._" in cases[i][0].module,
                                          len(cases[i][0].args) + len(str(cases[i][1])), cases[i][0].key()))


def symptoms(cases: tuple, changed: list[int], got: list, shared: dict[int, int]) -> list[tuple[Case, dict, dict | None]]:
    """Up to SYMPTOMS changed cases to report (in `_ranked` order), with reference and buggy outcomes."""
    return [(cases[i][0], cases[i][1], got[i]) for i in _ranked(cases, changed, shared)[:SYMPTOMS]]


@lru_cache(maxsize=16)
def shared_counts(family: str) -> dict[int, int]:
    """Per case index, how many mined bugs of the family change it."""
    counts: dict[int, int] = {}
    for bug in manifest.load()[family]["bugs"]:
        for i in bug["f2p_cases"]:
            counts[i] = counts.get(i, 0) + 1
    return counts


def _apply(text: str, bugs: list[dict]) -> str:
    """`text` with the bugs of one file spliced in (from the last offset back, so earlier offsets hold)."""
    for bug in sorted(bugs, key=lambda b: b["start"], reverse=True):
        text = text[: bug["start"]] + bug["replacement"] + text[bug["end"]:]
    return text


def _choose(bugs: list[dict], start: int, count: int) -> list[dict]:
    """`count` bugs from `start` on (wrapping): distinct functions, bugs of one file far apart."""
    chosen: list[dict] = []
    for offset in range(min(len(bugs), MAX_DRAWS)):
        bug = bugs[(start + offset) % len(bugs)]
        clash = any((b["file"], b["function"]) == (bug["file"], bug["function"])
                    or (b["file"] == bug["file"] and abs(b["line"] - bug["line"]) < MIN_LINES_APART) for b in chosen)
        if not clash:
            chosen.append(bug)
        if len(chosen) == count:
            return chosen
    raise RuntimeError(f"no {count} separable bugs from position {start} of a pool of {len(bugs)}")


def _outcomes(pin: Source, files: dict, cases: tuple) -> list:
    """Each case's outcome on the package in `files` (run in a sandbox; None where none came back)."""
    package = {p: t for p, t in files.items() if p.startswith(pin.package + "/") and p.endswith(".py")}
    with Sandbox(CASE_LIMITS, files=package) as box:
        return outcomes(box, [case for case, _ in cases], pin.package)


def _fixes(pristine: dict, bugs: list[dict], files: dict) -> list[Fix] | None:
    """One fix per bug, each the inverse edit of its bug alone; None when applied in turn they do not restore
    the package exactly (a fix's text would no longer be unique)."""
    fixes = []
    for bug in bugs:
        others = [b for b in bugs if b is not bug and b["file"] == bug["file"]]
        old, new = inverse_edit(_apply(pristine[bug["file"]], others), files[bug["file"]])
        fixes.append(Fix(bug["file"], old, new))
    state = dict(files)
    for fix in fixes:
        if state[fix.path].count(fix.old) != 1:
            return None
        state[fix.path] = state[fix.path].replace(fix.old, fix.new)
    return fixes if all(state[p] == pristine[p] for p in files) else None


@lru_cache(maxsize=512)
def build(family: str, difficulty: str, seed: int) -> RealTask:
    """The task for (family, difficulty, seed); the same arguments always give the same task."""
    if difficulty not in LEVELS:
        raise ValueError(f"unknown difficulty {difficulty!r}; known: {', '.join(LEVELS)}")
    if seed < 0:
        raise ValueError(f"seed {seed} is negative")
    count, pointed = LEVELS[difficulty]
    pin = source(family)
    pristine = pristine_files(family)
    held_out = seed >= HELD_OUT_START
    bugs = pool(family, held_out, distinct_symptoms=not pointed)
    index = seed - HELD_OUT_START if held_out else seed
    cases = tuple(manifest.graded_cases(family))
    for attempt in range(len(bugs)):
        chosen = _choose(bugs, index + attempt, count)
        files = dict(pristine)
        for path in sorted({b["file"] for b in chosen}):
            files[path] = _apply(pristine[path], [b for b in chosen if b["file"] == path])
        fixes = _fixes(pristine, chosen, files)
        changed = frozenset(i for b in chosen for i in b["f2p_cases"])
        if fixes is None:
            continue
        # Mining measured each bug alone; bugs together are measured here, once per task, and must each still
        # change a case of their own (no bug masks another).
        # The hard issues show what the buggy package returns, so the package is run once per task.
        got = None if pointed else _outcomes(pin, files, cases)
        start = frozenset(range(len(cases))) - changed if got is None else frozenset(
            i for i, ((_, want), out) in enumerate(zip(cases, got)) if out == want)
        if all(set(b["f2p_cases"]) - start for b in chosen):
            break
    else:
        raise RuntimeError(f"swe/{family}:{difficulty} seed {seed}: no bugs that stay separate")
    if pointed:
        text = issue.easy(pin.package, chosen[0])
    else:
        text = issue.hard(pin.package, pin.topic, [symptoms(cases, sorted(set(b["f2p_cases"]) - start), got, shared_counts(family)) for b in chosen])
    return RealTask(family, difficulty, seed, pin, tuple(chosen), tuple(fixes), files, pristine, text, cases, changed,
                    start)
