"""Run generated cases in-process against a package given as source text, with a line budget per case.

This is how a task is built quickly: expected values come from the reference sources, and a mutant is
kept only if some case now disagrees. Only the project's own (reference or mutated) code runs here;
anything the model writes runs in the sandbox.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import itertools
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from jointrl.envs.swe.case import Case

# Far above what any reference case needs, low enough that a mutant stuck in a loop is caught fast.
LINE_BUDGET = 20_000
# A mutant can also run away inside few lines (squaring numbers that double in size each turn); past the
# grader's own per-case timeout it could never pass anyway. Reference cases take milliseconds.
CASE_SECONDS = 5.0
PRIVATE_PREFIX = "_jointrl_swe_probe_"  # + a serial number: the name each probed package is imported under
_serial = itertools.count()


class BudgetExceeded(BaseException):
    """A case ran more lines than the budget (a BaseException, so code under test cannot swallow it)."""


@dataclass(frozen=True)
class Outcome:
    """What one case did: its value, or the exception it raised, or that it ran out of budget."""

    value: object = None
    error: str | None = None  # exception class name
    lineage: tuple[str, ...] = ()  # names of the exception's classes, itself first (for pytest.raises semantics)
    message: str = ""
    exhausted: bool = False
    step: int = -1  # which statement stopped it: an index into the set-up, len(setup) for the expression

    def show(self) -> str:
        """How the outcome reads in an issue ('[1, 2]' or 'raises ValueError: ...')."""
        if self.exhausted:
            return "never returns"
        if self.error is not None:
            return f"raises {self.error}: {self.message}" if self.message else f"raises {self.error}"
        return repr(self.value)


class _SourceFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves one package's modules from a dict of sources under a private name."""

    def __init__(self, root: str, sources: dict[str, str]):
        self.root = root
        self.sources = sources

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.root:
            spec = importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            spec.submodule_search_locations = []
            return spec
        head, _, stem = fullname.rpartition(".")
        if head == self.root and stem in self.sources:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        stem = "__init__" if module.__name__ == self.root else module.__name__.rpartition(".")[2]
        code = compile(self.sources.get(stem, ""), f"<{self.root}/{stem}.py>", "exec")
        exec(code, module.__dict__)


@contextmanager
def loaded(sources: dict[str, str]) -> Iterator[tuple[str, dict[str, object]]]:
    """Import a package from `sources` (stem -> text) under a private name; yield it and stem -> module or exception."""
    root = f"{PRIVATE_PREFIX}{next(_serial)}"
    finder = _SourceFinder(root, sources)
    sys.meta_path.insert(0, finder)
    modules: dict[str, object] = {}
    try:
        for stem in sources:
            if stem == "__init__":
                continue
            try:
                modules[stem] = _traced(lambda: importlib.import_module(f"{root}.{stem}"), root)
            except (Exception, BudgetExceeded) as err:
                modules[stem] = err
        yield root, modules
    finally:
        sys.meta_path.remove(finder)
        # A snapshot: demos are played in threads, and another thread importing changes sys.modules meanwhile.
        for name in [n for n in list(sys.modules) if n == root or n.startswith(root + ".")]:
            del sys.modules[name]


def _traced(fn, root: str):
    left = [LINE_BUDGET]
    deadline = time.monotonic() + CASE_SECONDS

    def local(frame, event, arg):
        if event == "line":
            left[0] -= 1
            if left[0] < 0 or time.monotonic() > deadline:
                raise BudgetExceeded()
        return local

    def on_call(frame, event, arg):
        # Only the package's own frames count: library internals are not what a mutant can break.
        return local if frame.f_globals.get("__name__", "").startswith(root + ".") else None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        return fn()
    finally:
        sys.settrace(previous)


def run(sources: dict[str, str], cases: list[tuple[Case, dict[str, str]]]) -> list[Outcome]:
    """Evaluate each case against the package in `sources`, given what it imports (name -> module stem).

    After one case runs out of budget the rest are reported as exhausted unrun: such a package is
    rejected whole, and running more of it would only spend the budget again.
    """
    outcomes: list[Outcome] = []
    with loaded(sources) as (root, modules):
        for case, imports in cases:
            if outcomes and outcomes[-1].exhausted:
                outcomes.append(outcomes[-1])
            else:
                outcomes.append(_evaluate(case, imports, modules, root))
    return outcomes


def _evaluate(case: Case, imports: dict[str, str], modules: dict, root: str) -> Outcome:
    namespace: dict[str, object] = {}
    for name, stem in imports.items():
        owner = modules[stem]
        if isinstance(owner, BaseException):
            return _failure(owner)
        if not hasattr(owner, name):
            return Outcome(error="ImportError", lineage=("ImportError", "Exception"), message=f"cannot import {name}")
        namespace[name] = getattr(owner, name)

    step = [0]

    def body():
        for statement in case.setup:
            exec(statement, namespace)
            step[0] += 1
        return eval(case.expr, namespace)

    try:
        value = _traced(body, root)
    except (Exception, BudgetExceeded) as err:
        return _failure(err, step[0])
    return Outcome(value=value)


def _failure(err: BaseException, step: int = 0) -> Outcome:
    if isinstance(err, BudgetExceeded):
        return Outcome(exhausted=True, step=step)
    lineage = tuple(c.__name__ for c in type(err).__mro__)
    return Outcome(error=type(err).__name__, lineage=lineage, message=str(err)[:200], step=step)


def passes(case: Case, outcome: Outcome, expected: object) -> bool:
    """Whether an outcome is what the rendered test accepts: `== expected`, or an instance of the named exception."""
    if outcome.exhausted:
        return False
    if case.raises is not None:
        return case.raises in outcome.lineage
    if outcome.error is not None:
        return False
    if expected is None:
        return outcome.value is None
    try:
        return bool(outcome.value == expected)
    except Exception:
        return False
