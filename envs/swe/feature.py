"""A missing feature of a swe task: one public function or method taken out of a module, specified by its
failing tests.

Only one nothing else in the package calls can go (its removal must break its own tests and no others), and
it must be small enough to write back from its docstring and tests.
"""
from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass

from jointrl.envs.swe.mutation import inverse_edit
from jointrl.envs.swe.project import Project, Test

MAX_LINES = 16  # lines of the removed function, its docstring included
MIN_TESTS = 2  # tests that must specify it


@dataclass(frozen=True)
class Feature:
    """A function removed from `module`: what the issue asks for, the edit that adds it, the tests that need it."""

    module: str
    name: str  # "name", or "Class.name" for a method
    signature: str  # "name(a, b=1)", "Class.name(self, a)"
    doc: str  # its docstring, the specification the issue quotes
    fix_old: str  # text in the file without it, unique there
    fix_new: str  # the same text with the function written back
    tests: tuple[str, ...]  # ids of the tests that call it

    def remove(self, source: str) -> str:
        """`source` (the module's reference text) without the function."""
        return source.replace(self.fix_new, self.fix_old, 1)


def choose(built: Project, modules: list[str], rng: random.Random) -> Feature | None:
    """A seeded choice of a removable function among `modules`; None when none of them has one."""
    options = [feature for module in modules for feature in _removable(built, module)]
    return rng.choice(options) if options else None


def _definitions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef]]:
    """Public top-level functions and public methods of top-level classes, with their qualified names."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found.append((node.name, node))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            found += [(f"{node.name}.{item.name}", item) for item in node.body if isinstance(item, ast.FunctionDef)]
    return [(name, node) for name, node in found if not node.name.startswith("_") and not node.decorator_list]


def _calls(test: Test, module: str, name: str) -> bool:
    """Whether a test uses the function (imports it) or the method (imports its class and calls it)."""
    owner, _, method = name.rpartition(".")
    if not owner:
        return (module, name) in test.imports
    code = "\n".join((*test.case.setup, test.case.expr))
    return (module, owner) in test.imports and re.search(rf"\.{re.escape(method)}\(", code) is not None


def _removable(built: Project, module: str) -> list[Feature]:
    source = built.sources[module]
    others = "\n".join(text for stem, text in built.sources.items() if stem != module)
    found = []
    for name, node in _definitions(ast.parse(source)):
        if node.end_lineno - node.lineno + 1 > MAX_LINES or ast.get_docstring(node) is None:
            continue
        word = re.compile(rf"\b{re.escape(node.name)}\b")
        own = ast.get_source_segment(source, node)
        # Used nowhere but in its own definition, so taking it out breaks only the tests that call it.
        if len(word.findall(source)) != len(word.findall(own)) or word.search(others):
            continue
        tests = tuple(t.id for t in built.tests if _calls(t, module, name))
        if len(tests) < MIN_TESTS:
            continue
        old, new = inverse_edit(source, _without(source, node))
        signature = f"{name}({ast.unparse(node.args)})"
        found.append(Feature(module, name, signature, ast.get_docstring(node), old, new, tests))
    return found


def _without(source: str, node: ast.FunctionDef) -> str:
    """`source` without the definition, the comments right above it and the blank lines that set it apart
    from what comes before (the gap after it then separates its neighbours as before)."""
    lines = source.splitlines(keepends=True)
    first, last = node.lineno - 1, node.end_lineno  # [first, last) in 0-based line indices
    while first > 0 and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    while first > 0 and not lines[first - 1].strip():
        first -= 1
    return "".join(lines[:first] + lines[last:])
