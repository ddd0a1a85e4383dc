"""Test cases as data: one checked expression (after optional set-up statements) per generated test."""
from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """One generated test: run `setup`, then check the value of `expr` (or that it raises `raises`)."""

    name: str  # base of the test function's name; the renderer numbers repeats
    expr: str
    setup: tuple[str, ...] = ()
    raises: str | None = None  # an exception class name (builtin or exported by the package)

    def names(self) -> set[str]:
        """Every bare name the case's code reads (to know what the test module must import)."""
        found: set[str] = set()
        for code in (*self.setup, self.expr, self.raises or "None"):
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.Name):
                    found.add(node.id)
        return found


def _arguments(args: tuple, kwargs: dict) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return ", ".join(parts)


def call(fn: str, *args, **kwargs) -> Case:
    """A case checking the value of `fn(*args, **kwargs)` (arguments given as Python values)."""
    return Case(name=fn.split(".")[-1], expr=f"{fn}({_arguments(args, kwargs)})")


def raises(exception: str, fn: str, *args, **kwargs) -> Case:
    """A case checking that `fn(*args, **kwargs)` raises `exception`."""
    return Case(name=f"{fn.split('.')[-1]}_rejects", expr=f"{fn}({_arguments(args, kwargs)})", raises=exception)


def script(name: str, setup: list[str] | tuple[str, ...], expr: str, raises: str | None = None) -> Case:
    """A case that runs set-up statements (building objects) before checking `expr`."""
    return Case(name=name, expr=expr, setup=tuple(setup), raises=raises)


def expr(name: str, text: str, raises: str | None = None) -> Case:
    """A case checking one expression written out as code (objects built inline)."""
    return Case(name=name, expr=text, raises=raises)
