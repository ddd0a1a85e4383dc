"""Generate a package from a family: the chosen reference modules, their rendered tests and expected values."""
from __future__ import annotations

import ast
import random
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from jointrl.envs.swe import probe
from jointrl.envs.swe.case import Case
from jointrl.envs.swe.family import Family

PROJECTS = Path(__file__).parent / "projects"
PYTEST_INI = "[pytest]\ntestpaths = tests\npythonpath = .\n"


@lru_cache(maxsize=None)
def reference_source(family: str, stem: str) -> str:
    """The reference text of one module ('__init__' for the package docstring)."""
    path = PROJECTS / family / f"{stem}.py"
    if not path.is_file():
        raise KeyError(f"family {family!r} has no reference module {stem!r} (looked for {path})")
    return path.read_text()


@lru_cache(maxsize=None)
def public_names(source: str) -> tuple[str, ...]:
    """Top-level functions, classes and constants of a module that do not start with '_'."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return tuple(n for n in names if not n.startswith("_"))


@dataclass(frozen=True)
class Test:
    """One rendered test: its case, where it lives, what it imports and the value it expects."""

    module: str
    function: str  # "test_slugify_2"
    case: Case
    imports: tuple[tuple[str, str], ...]  # (module stem, name) pairs
    expected: object  # None for a raises-test

    @property
    def path(self) -> str:
        return f"tests/test_{self.module}.py"

    @property
    def id(self) -> str:
        return f"{self.path}::{self.function}"


@dataclass(frozen=True)
class Project:
    """A generated package before any bug: its sources (reference text) and its tests."""

    family: str
    package: str
    modules: tuple[str, ...]
    sources: dict  # stem -> source text, '__init__' included
    tests: tuple[Test, ...]

    def test_files(self, hidden: frozenset[str] = frozenset()) -> dict[str, str]:
        """Rendered test files (path -> text), leaving out the test functions in `hidden` by id."""
        out = {}
        for module in self.modules:
            shown = [t for t in self.tests if t.module == module and t.id not in hidden]
            if shown:
                out[f"tests/test_{module}.py"] = _render(self.package, module, shown)
        return out

    def files(self, sources: dict[str, str], hidden: frozenset[str] = frozenset()) -> dict[str, str]:
        """The workspace: package sources (as given), test files, pytest settings and a README."""
        out = {f"{self.package}/{stem}.py": text for stem, text in sources.items()}
        out.update(self.test_files(hidden))
        out["pytest.ini"] = PYTEST_INI
        out["README.md"] = self.readme()
        return out

    def readme(self) -> str:
        """A short description of the package and how to run its tests."""
        lines = [f"# {self.package}", "", _first_line(self.sources["__init__"]), "", "Modules:", ""]
        lines += [f"- `{self.package}/{m}.py`: {_first_line(self.sources[m])}" for m in self.modules]
        lines += ["", "Run the tests with `python -m pytest` from this directory.", ""]
        return "\n".join(lines)


def build(family: Family, modules: list[str], package: str, rng: random.Random) -> Project:
    """Generate the tests of `modules` from `rng` and compute their expected values on the reference code."""
    sources = {"__init__": reference_source(family.name, "__init__")}
    sources.update({m: reference_source(family.name, m) for m in modules})
    defined = {m: public_names(sources[m]) for m in modules}
    drafts: list[tuple[str, Case, tuple[tuple[str, str], ...]]] = []
    for module in modules:
        for case in family.module(module).cases(rng):
            drafts.append((module, case, _imports(case, module, modules, defined)))
    outcomes = probe.run(sources, [(case, dict((n, m) for m, n in imports)) for _, case, imports in drafts])
    tests, seen = [], Counter()
    for (module, case, imports), outcome in zip(drafts, outcomes):
        seen[(module, case.name)] += 1
        function = f"test_{case.name}_{seen[(module, case.name)]}"
        tests.append(Test(module, function, case, imports, _expected(family.name, module, case, outcome)))
    return Project(family.name, package, tuple(modules), sources, tuple(tests))


def literal_repr(value: object) -> str:
    """repr(value) with the items of every set in sorted order, so the text is the same under any string hash seed."""
    if isinstance(value, (set, frozenset)):
        if not value:
            return f"{type(value).__name__}()"
        body = "{" + ", ".join(sorted(literal_repr(item) for item in value)) + "}"
        return body if isinstance(value, set) else f"frozenset({body})"
    if isinstance(value, list):
        return "[" + ", ".join(literal_repr(item) for item in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(literal_repr(item) for item in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal_repr(k)}: {literal_repr(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _imports(case: Case, module: str, modules: list[str], defined: dict) -> tuple[tuple[str, str], ...]:
    found = []
    for name in sorted(case.names()):
        owner = module if name in defined[module] else next((m for m in modules if name in defined[m]), None)
        if owner is not None:
            found.append((owner, name))
    return tuple(found)


def _expected(family: str, module: str, case: Case, outcome: probe.Outcome) -> object:
    where = f"{family}/{module}: {case.setup} {case.expr}"
    if case.raises is not None:
        assert case.raises in outcome.lineage, f"{where} should raise {case.raises}, got {outcome.show()}"
        return None
    assert outcome.error is None and not outcome.exhausted, f"{where} failed on the reference: {outcome.show()}"
    assert ast.literal_eval(repr(outcome.value)) == outcome.value, f"{where}: {outcome.value!r} is not a literal"
    return outcome.value


def _render(package: str, module: str, tests: list[Test]) -> str:
    lines = [f'"""Tests for {package}.{module}."""']
    if any(t.case.raises for t in tests):
        lines.append("import pytest")
        lines.append("")
    by_module: dict[str, set[str]] = {}
    for test in tests:
        for owner, name in test.imports:
            by_module.setdefault(owner, set()).add(name)
    for owner in sorted(by_module):
        lines.append(f"from {package}.{owner} import {', '.join(sorted(by_module[owner]))}")
    for test in tests:
        lines += ["", "", f"def {test.function}():"]
        lines += [f"    {statement}" for statement in test.case.setup]
        if test.case.raises:
            lines += [f"    with pytest.raises({test.case.raises}):", f"        {test.case.expr}"]
        elif test.expected is None:
            lines.append(f"    assert {test.case.expr} is None")
        else:
            lines.append(f"    assert {test.case.expr} == {literal_repr(test.expected)}")
    return "\n".join(lines) + "\n"


def _first_line(source: str) -> str:
    doc = ast.get_docstring(ast.parse(source)) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
