"""A missing feature of a swe task: one public function taken out of a module, specified by its failing tests.

Only a function nothing else in the package calls can go (its removal must break its own tests and no
others), and it must be small enough to write back from its docstring and tests.
"""
from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass

from jointrl.envs.swe.mutation import inverse_edit
from jointrl.envs.swe.project import Project

MAX_LINES = 16  # lines of the removed function, its docstring included
MIN_TESTS = 2  # tests that must specify it


@dataclass(frozen=True)
class Feature:
    """A function removed from `module`: what the issue asks for, the edit that adds it, the tests that need it."""

    module: str
    name: str
    signature: str  # "name(a, b=1)"
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


def _removable(built: Project, module: str) -> list[Feature]:
    source = built.sources[module]
    tree = ast.parse(source)
    others = "\n".join(text for stem, text in built.sources.items() if stem != module)
    found = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_") or node.decorator_list:
            continue
        if node.end_lineno - node.lineno + 1 > MAX_LINES or ast.get_docstring(node) is None:
            continue
        word = re.compile(rf"\b{re.escape(node.name)}\b")
        own = ast.get_source_segment(source, node)
        # Used nowhere but in its own definition, so taking it out breaks only the tests that call it.
        if len(word.findall(source)) != len(word.findall(own)) or word.search(others):
            continue
        tests = tuple(t.id for t in built.tests if (module, node.name) in t.imports)
        if len(tests) < MIN_TESTS:
            continue
        without = _without(source, node)
        old, new = inverse_edit(source, without)
        signature = f"{node.name}({ast.unparse(node.args)})"
        found.append(Feature(module, node.name, signature, ast.get_docstring(node), old, new, tests))
    return found


def _without(source: str, node: ast.FunctionDef) -> str:
    """`source` with the function's lines and the blank lines that set it apart taken out."""
    lines = source.splitlines(keepends=True)
    first, last = node.lineno - 1, node.end_lineno  # [first, last) in 0-based line indices
    while first > 0 and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    after = last
    while after < len(lines) and not lines[after].strip():
        after += 1
    if after < len(lines):
        last = after
    else:
        # The last function of the file: drop the blank lines before it instead.
        while first > 0 and not lines[first - 1].strip():
            first -= 1
    return "".join(lines[:first] + lines[last:])
