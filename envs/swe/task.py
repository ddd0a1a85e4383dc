"""Build one SWE task from (family, difficulty, seed): pick modules, inject verified bugs, split the tests.

A mutant is kept only if the in-process probe sees some test fail with it and nothing run away; the
failing tests become FAIL_TO_PASS, the rest PASS_TO_PASS. Held-out seeds draw their bugs from the held-out
half of the sites (`split`). The long tier also takes one function out of a third module (`feature`):
its tests stay visible and fail until it is written back. Tasks are cached per process, so the many env
instances of one (family, difficulty, seed) build it once.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from jointrl.envs.swe import feature, issue, probe, project, split
from jointrl.envs.swe.bug import Bug
from jointrl.envs.swe.catalog import FAMILIES
from jointrl.envs.swe.family import Family
from jointrl.envs.swe.feature import Feature
from jointrl.envs.swe.mutation import Mutation, inverse_edit, mutations
from jointrl.envs.swe.project import Project, Test


@dataclass(frozen=True)
class Level:
    """What a difficulty changes in the task."""

    modules: int  # modules in the package (the bug modules, what they import, then distractors)
    bugs: int  # bugs, each in its own module
    hide_failing: bool  # FAIL_TO_PASS tests are held back until grading (the issue is all there is)
    pointed: bool  # the issue names the file, function and failing test
    feature: bool = False  # a function of a module without bugs is missing; its visible tests specify it


LEVELS = {
    "easy": Level(modules=2, bugs=1, hide_failing=False, pointed=True),
    "medium": Level(modules=3, bugs=1, hide_failing=True, pointed=False),
    "hard": Level(modules=5, bugs=2, hide_failing=True, pointed=False),
    # Two bugs in modules that depend on each other where the family has such a pair, plus a feature.
    "long": Level(modules=5, bugs=2, hide_failing=True, pointed=False, feature=True),
}
MAX_TRIES = 60  # mutants tried per bug before giving up on a module


@dataclass(frozen=True)
class Task:
    """Everything an episode needs: the workspace files, the issue, the hidden truth for grading."""

    family: str
    difficulty: str
    seed: int
    project: Project
    bugs: tuple[Bug, ...]
    sources: dict  # stem -> buggy source
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    hidden: frozenset  # ids of tests left out of the workspace
    files: dict  # the workspace the model starts from
    issue: str
    feature: Feature | None = None  # the function to write back (long tier)

    @property
    def package(self) -> str:
        return self.project.package


@lru_cache(maxsize=256)
def build(family_name: str, difficulty: str, seed: int) -> Task:
    """The task for (family, difficulty, seed); the same arguments always give the same task."""
    if family_name not in FAMILIES:
        raise ValueError(f"unknown swe family {family_name!r}; known: {', '.join(sorted(FAMILIES))}")
    if difficulty not in LEVELS:
        raise ValueError(f"unknown difficulty {difficulty!r}; known: {', '.join(LEVELS)}")
    family, level = FAMILIES[family_name], LEVELS[difficulty]
    rng = random.Random(f"swe/{family_name}/{difficulty}/{seed}")
    # A module with no viable mutant for this seed's tests is rare; another draw of modules then decides.
    for _ in range(8):
        targets = _targets(family, level, rng)
        included = _choose_modules(family, targets, level.modules, rng)
        built = project.build(family, included, rng.choice(family.package_names), rng)
        task = _inject(built, family_name, difficulty, seed, targets, level, rng)
        if task is not None:
            return task
    raise RuntimeError(f"swe/{family_name}:{difficulty} seed {seed}: no mutant is caught by the generated tests")


def _targets(family: Family, level: Level, rng: random.Random) -> list[str]:
    """The modules that get a bug: for the long tier a module and one it imports, when the family has such a pair."""
    pairs = [(m.name, required) for m in family.modules for required in m.requires]
    if level.feature and level.bugs == 2 and pairs:
        return list(rng.choice(pairs))
    return rng.sample([m.name for m in family.modules], level.bugs)


def _choose_modules(family: Family, targets: list[str], count: int, rng: random.Random) -> list[str]:
    chosen: set[str] = set()

    def add(name: str) -> None:
        if name not in chosen:
            chosen.add(name)
            for required in family.module(name).requires:
                add(required)

    for name in targets:
        add(name)
    others = [m.name for m in family.modules if m.name not in chosen]
    rng.shuffle(others)
    for name in others:
        if len(chosen) >= count:
            break
        add(name)
    return [m.name for m in family.modules if m.name in chosen]


def _failing(built: Project, sources: dict[str, str]) -> tuple[list[probe.Outcome], set[str], bool]:
    """Outcomes of every test on `sources`, the ids that fail, and whether any case ran away."""
    outcomes = probe.run(sources, [(t.case, dict((n, m) for m, n in t.imports)) for t in built.tests])
    failing = {t.id for t, o in zip(built.tests, outcomes) if not probe.passes(t.case, o, t.expected)}
    return outcomes, failing, any(o.exhausted for o in outcomes)


def _candidates(source: str, rng: random.Random, held_out: bool) -> list[Mutation]:
    """Mutation sites of one split half in a seeded order that takes the kinds in turn (so bugs are not mostly one kind)."""
    by_kind: dict[str, list[Mutation]] = {}
    for mutation in mutations(source):
        if not split.in_half(source, mutation, held_out):
            continue
        by_kind.setdefault(mutation.kind, []).append(mutation)
    kinds = sorted(by_kind)
    rng.shuffle(kinds)
    for sites in by_kind.values():
        rng.shuffle(sites)
    ordered = []
    while any(by_kind[k] for k in kinds):
        ordered += [by_kind[k].pop() for k in kinds if by_kind[k]]
    return ordered


def _mutate(built: Project, module: str, rng: random.Random, held_out: bool) -> tuple[Mutation, set[str]] | None:
    """A mutant of `module` from one split half that some tests catch (at most half of them), with the ids it fails."""
    reference = built.sources[module]
    own = {t.id for t in built.tests if t.module == module}
    for mutation in _candidates(reference, rng, held_out)[:MAX_TRIES]:
        outcomes, failing, runaway = _failing(built, {**built.sources, module: mutation.apply(reference)})
        if not failing & own or runaway or len(failing) > len(built.tests) // 2:
            continue
        # A mutant that only ever mixes up types (str -= str) is a crash, not the kind of bug people write.
        errors = {o.error for t, o in zip(built.tests, outcomes) if t.id in failing}
        if errors == {"TypeError"}:
            continue
        # A held-out bug needs a failure no training bug of its function shows the same way (see _inject).
        if held_out and all(_trained_symptom(built, module, mutation, t, o)
                            for t, o in zip(built.tests, outcomes) if t.id in failing):
            continue
        return mutation, failing
    return None


def _inject(built: Project, family: str, difficulty: str, seed: int, targets: list[str], level: Level,
            rng: random.Random) -> Task | None:
    found = []
    for module in targets:
        mutant = _mutate(built, module, rng, split.held_out_seed(seed))
        if mutant is None:
            return None
        found.append((module, *mutant))
    sources = dict(built.sources)
    for module, mutation, _ in found:
        sources[module] = mutation.apply(built.sources[module])
    wanted = None
    if level.feature:
        wanted = feature.choose(built, [m for m in built.modules if m not in targets], rng)
        if wanted is None:
            return None
        sources[wanted.module] = wanted.remove(built.sources[wanted.module])
    specified = frozenset(wanted.tests) if wanted else frozenset()
    outcomes, failing, runaway = _failing(built, sources)
    # Each bug must still show on its own once the others are in place (no bug masks another).
    if runaway or any(not (alone & (failing - specified)) for _, _, alone in found):
        return None
    by_id = {t.id: (t, o) for t, o in zip(built.tests, outcomes)}
    bugs = []
    for module, mutation, alone in found:
        shown = sorted(alone & (failing - specified), key=lambda i: (by_id[i][0].module != module, _length(by_id[i][0]), i))
        if split.held_out_seed(seed):
            # A held-out report must not read like a training one: a different bug can break the same test
            # the same way, and the issue would then repeat a training issue word for word.
            shown = [i for i in shown if not _trained_symptom(built, module, mutation, *by_id[i])]
            if not shown:
                return None
        example = by_id[rng.choice(shown[:3])][0]
        old, new = inverse_edit(built.sources[module], sources[module])
        bugs.append(Bug(module, mutation, old, new, example, by_id[example.id][1]))
    fail_to_pass = tuple(t.id for t in built.tests if t.id in failing)
    pass_to_pass = tuple(t.id for t in built.tests if t.id not in failing)
    # The feature's tests are its specification, so they stay in the workspace even where bug tests are held back.
    hidden = frozenset(fail_to_pass) - specified if level.hide_failing else frozenset()
    text = issue.render(FAMILIES[family], built, bugs, pointed=level.pointed, hidden=bool(hidden), feature=wanted)
    files = built.files({stem: sources[stem] for stem in built.sources}, hidden)
    return Task(family, difficulty, seed, built, tuple(bugs), sources, fail_to_pass, pass_to_pass, hidden, files, text,
                feature=wanted)


def _trained_symptom(built: Project, module: str, mutation: Mutation, test: Test, outcome: probe.Outcome) -> bool:
    """Whether a training-half mutant of the same function makes `test` show the same outcome.

    Only the bug's own function is searched: that is where another bug breaking a test in the same way sits
    (a bug elsewhere that gives the very same wrong value is rare, and searching every function would cost a
    probe run per mutant of the module on every held-out reset).
    """
    reference = built.sources[module]
    imports = dict((name, owner) for owner, name in test.imports)
    report = issue.session(built.package, test, outcome)
    for other in mutations(reference):
        if other.function != mutation.function or split.in_half(reference, other, held_out=True):
            continue
        (result,) = probe.run({**built.sources, module: other.apply(reference)}, [(test.case, imports)])
        if issue.session(built.package, test, result) == report:
            return True
    return False


def _length(test: Test) -> int:
    return len(test.case.expr) + sum(len(s) for s in test.case.setup)
