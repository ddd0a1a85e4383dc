"""Verifiers that replace reasoning-gym's own where its verifier accepts an answer that does not solve the task.

One function per dataset, `(answer, entry) -> score in [0, 1]`; `VERIFIERS` maps the dataset name to it and
entries.score consults it before the dataset's own verifier. Each replaces a verifier that a shortcut beats:

- puzzle24: upstream checks only that the expression has four numbers in range and makes 24, so one fixed
  expression (`1*3*5 + 9`) solves every task; here it must use exactly the given numbers, each once.
"""
from __future__ import annotations

import ast
import operator
from collections import Counter
from fractions import Fraction
from typing import Callable

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
# An answer longer than this is not an arithmetic expression over four numbers; parsing it is wasted work.
_MAX_EXPRESSION_CHARS = 200


def _arithmetic(node: ast.AST, numbers: list[int]) -> Fraction:
    """The exact value of + - * / over integer literals (collected into `numbers`); ValueError on anything else."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        numbers.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _arithmetic(node.left, numbers), _arithmetic(node.right, numbers)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ValueError("division by zero")
        return _OPERATORS[type(node.op)](left, right)
    raise ValueError(f"not + - * / over integers: {type(node).__name__}")


def puzzle24(answer: str, entry: dict) -> float:
    """1.0 iff the answer is + - * / over exactly the task's numbers, each used once, and equals 24."""
    text = answer.strip()
    if not text or len(text) > _MAX_EXPRESSION_CHARS:
        return 0.0
    try:
        tree = ast.parse(text, mode="eval")
        used: list[int] = []
        value = _arithmetic(tree.body, used)
    except (SyntaxError, ValueError):
        return 0.0
    uses_given_numbers = Counter(used) == Counter(entry["metadata"]["numbers"])
    return 1.0 if uses_given_numbers and value == 24 else 0.0


VERIFIERS: dict[str, Callable[[str, dict], float]] = {
    "puzzle24": puzzle24,
}
