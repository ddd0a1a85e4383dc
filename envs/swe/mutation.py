"""Bug injection by AST mutation: find the mutable sites of a module and splice one small textual change.

The `ast` module finds the sites; the change is made on the source text (an operator token, a constant,
an argument pair, whole lines of a branch), so the buggy file keeps the reference formatting and the
fix is the exact inverse edit.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

ARITHMETIC = {ast.Add: "-", ast.Sub: "+", ast.Mult: "/", ast.Div: "*", ast.FloorDiv: "/", ast.Mod: "//", ast.Pow: "*"}
SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
COMPARISONS = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
               ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="), ast.In: ("in", "not in"), ast.NotIn: ("not in", "in"),
               ast.Is: ("is", "is not"), ast.IsNot: ("is not", "is")}
# Mistakes people actually make with these numbers, tried before a plain +1.
CONSTANT_SLIPS = {1024: 1000, 1000: 1024, 60: 100, 100: 1000, 24: 12, 12: 10, 365: 366, 7: 5, 3600: 60, 10: 100}
STRING_SLIPS = {"-": "_", "_": "-", ",": ";", ";": ",", " ": "", ":": "=", ".": ",", "": " ", "=": ":", "|": "/"}
# Operands of `+ 1` that keep their meaning without parentheses.
_TIGHT = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)


@dataclass(frozen=True)
class Mutation:
    """One injected change: replace source[start:end] with `replacement`."""

    kind: str  # operator | comparison | boolean | negation | off_by_one | constant | drop_branch | swap_args
    start: int
    end: int
    replacement: str
    function: str  # enclosing function, method or module-level constant ('' elsewhere)
    line: int  # 1-based line of the change in the reference source
    what: str  # a short human description ("'<' became '<='")

    def apply(self, source: str) -> str:
        """The mutated source."""
        return source[: self.start] + self.replacement + source[self.end :]


def mutations(source: str) -> list[Mutation]:
    """Every mutation site of `source`, in source order."""
    if not source.isascii():
        raise ValueError("mutation offsets assume ASCII sources")
    finder = _Sites(source)
    finder.visit(ast.parse(source))
    return sorted(finder.found, key=lambda m: (m.start, m.kind, m.replacement))


class _Sites(ast.NodeVisitor):
    def __init__(self, source: str):
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.found: list[Mutation] = []
        self.scope: list[str] = []
        self.skip: set[int] = set()  # ids of nodes never mutated (docstrings)
        self.shifted: set[int] = set()  # ids of constants already given ±1 as a bound or index

    # Positions.

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    def add(self, kind: str, start: int, end: int, replacement: str, line: int, what: str) -> None:
        self.found.append(Mutation(kind, start, end, replacement, ".".join(self.scope), line, what))

    def token_between(self, left: ast.AST, right: ast.AST, pattern: str) -> tuple[int, int] | None:
        """Offsets of the operator token between two nodes, if only brackets and spaces surround it."""
        a, b = self.span(left)[1], self.span(right)[0]
        between = self.source[a:b]
        match = re.fullmatch(r"[\s()\\]*(" + pattern + r")[\s()\\]*", between)
        return (a + match.start(1), a + match.end(1)) if match else None

    # Scopes and places never touched.

    def _docstring(self, body: list[ast.stmt]) -> None:
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            self.skip.add(id(body[0].value))

    def visit_Module(self, node):
        self._docstring(node.body)
        self.generic_visit(node)

    def visit_ClassDef(self, node):
        self._docstring(node.body)
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node):
        self._docstring(node.body)
        self.scope.append(node.name)
        self.visit_body_holders(node)
        self.generic_visit(node)
        self.scope.pop()

    def visit_Assign(self, node):
        # A module-level constant is named after itself, so reports can point at it like at a function.
        named = not self.scope and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        if named:
            self.scope.append(node.targets[0].id)
        self.generic_visit(node)
        if named:
            self.scope.pop()

    def visit_Raise(self, node):
        # An error message is not behaviour; mutate only what decides whether to raise.
        return

    def visit_JoinedStr(self, node):
        return

    def generic_visit(self, node):
        for child in ast.iter_child_nodes(node):
            if id(child) not in self.skip:
                self.visit(child)

    # Operators.

    def visit_BinOp(self, node):
        op = type(node.op)
        if op in ARITHMETIC and not _builds_string(node):
            span = self.token_between(node.left, node.right, re.escape(SYMBOLS[op]))
            if span:
                self.add("operator", *span, ARITHMETIC[op], node.lineno, f"'{SYMBOLS[op]}' became '{ARITHMETIC[op]}'")
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        op = type(node.op)
        if op in (ast.Add, ast.Sub) and not _builds_string(node.value):
            symbol, other = SYMBOLS[op] + "=", ARITHMETIC[op] + "="
            span = self.token_between(node.target, node.value, re.escape(symbol))
            if span:
                self.add("operator", *span, other, node.lineno, f"'{symbol}' became '{other}'")
        self.generic_visit(node)

    def visit_Compare(self, node):
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            symbol, other = COMPARISONS[type(op)]
            span = self.token_between(left, right, symbol.replace(" ", r"\s+"))
            if span:
                kind = "off_by_one" if {symbol, other} in ({"<", "<="}, {">", ">="}) else "comparison"
                self.add(kind, *span, other, right.lineno, f"'{symbol}' became '{other}'")
            left = right
        self.generic_visit(node)

    def visit_BoolOp(self, node):
        word, other = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        for left, right in zip(node.values, node.values[1:]):
            span = self.token_between(left, right, word)
            if span:
                self.add("boolean", *span, other, right.lineno, f"'{word}' became '{other}'")
        self.generic_visit(node)

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.Not):
            start = self.span(node)[0]
            # Only the keyword goes: the operand's span leaves out any bracket that follows it.
            keyword = re.match(r"not\s+", self.source[start:])
            if keyword:
                self.add("negation", start, start + keyword.end(), "", node.lineno, "a 'not' was dropped")
        self.generic_visit(node)

    # Numbers, strings, bounds.

    def visit_Constant(self, node):
        value, (start, end) = node.value, self.span(node)
        if id(node) in self.shifted:
            return
        if isinstance(value, bool):
            self.add("constant", start, end, str(not value), node.lineno, f"{value} became {not value}")
        elif isinstance(value, int):
            slip = CONSTANT_SLIPS.get(value, value + 1)
            self.add("constant", start, end, str(slip), node.lineno, f"{value} became {slip}")
        elif isinstance(value, float) and value:
            self.add("constant", start, end, repr(value * 2), node.lineno, f"{value!r} became {value * 2!r}")
        elif isinstance(value, str) and value in STRING_SLIPS:
            token = self.source[start:end]
            quote = token[0]
            if quote in "'\"" and token == quote + value + quote:
                slip = STRING_SLIPS[value]
                self.add("constant", start, end, quote + slip + quote, node.lineno, f"{value!r} became {slip!r}")

    def _shift(self, node: ast.AST, why: str) -> None:
        """Add ±1 to an index, bound or count expression."""
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            self.shifted.add(id(node))
            start, end = self.span(node)
            for delta in (-1, 1):
                if node.value + delta >= 0:
                    new = node.value + delta
                    self.add("off_by_one", start, end, str(new), node.lineno, f"{why} {node.value} became {new}")
            return
        # `n + 1` already gets its constant changed; `n + 1 - 1` would read as nonsense.
        if isinstance(node, ast.BinOp) and isinstance(node.right, ast.Constant):
            return
        if isinstance(node, _TIGHT) or (isinstance(node, ast.BinOp) and type(node.op) in SYMBOLS):
            end = self.span(node)[1]
            for sign in ("+", "-"):
                self.add("off_by_one", end, end, f" {sign} 1", node.end_lineno, f"{why} {self.text(node)} became {self.text(node)} {sign} 1")

    def visit_Subscript(self, node):
        index = node.slice
        if isinstance(index, ast.Slice):
            for bound in (index.lower, index.upper):
                if bound is not None:
                    self._shift(bound, "slice bound")
        elif not (isinstance(index, ast.Constant) and isinstance(index.value, str)) and not isinstance(index, ast.Tuple):
            self._shift(index, "index")
        self.generic_visit(node)

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id == "range":
            for arg in node.args:
                self._shift(arg, "range bound")
        positional = [a for a in node.args if not isinstance(a, ast.Starred)]
        if len(positional) == len(node.args) >= 2:
            first, second = node.args[0], node.args[1]
            if self.text(first) != self.text(second):
                start, end = self.span(first)[0], self.span(second)[1]
                middle = self.source[self.span(first)[1] : self.span(second)[0]]
                callee = self.text(node.func)
                self.add("swap_args", start, end, self.text(second) + middle + self.text(first), node.lineno,
                         f"the first two arguments of {callee}() were swapped")
        self.generic_visit(node)

    # Branches.

    def _whole_lines(self, first: int, last: int) -> tuple[int, int]:
        """Offsets spanning lines first..last (1-based, inclusive) with their line ends."""
        return self.starts[first - 1], self.starts[last]

    def _visit_body(self, body: list[ast.stmt]) -> None:
        if len(body) < 2:
            return
        for statement in body:
            if isinstance(statement, ast.If) and not statement.orelse and self._alone(statement):
                start, end = self._whole_lines(statement.lineno, statement.end_lineno)
                self.add("drop_branch", start, end, "", statement.lineno, f"the branch 'if {self.text(statement.test)}:' was dropped")

    def _alone(self, statement: ast.stmt) -> bool:
        before = self.lines[statement.lineno - 1][: statement.col_offset]
        after = self.lines[statement.end_lineno - 1][statement.end_col_offset :]
        return not before.strip() and not after.strip()

    def visit_If(self, node):
        orelse = node.orelse
        if len(orelse) == 1 and isinstance(orelse[0], ast.If) and not orelse[0].orelse and self._alone(orelse[0]):
            elif_ = orelse[0]
            if self.lines[elif_.lineno - 1].lstrip().startswith("elif"):
                start, end = self._whole_lines(elif_.lineno, elif_.end_lineno)
                self.add("drop_branch", start, end, "", elif_.lineno, f"the branch 'elif {self.text(elif_.test)}:' was dropped")
        elif orelse and not isinstance(orelse[0], ast.If) and self._alone(orelse[-1]):
            else_line = orelse[0].lineno - 1
            if self.lines[else_line - 1].strip() == "else:":
                start, end = self._whole_lines(else_line, orelse[-1].end_lineno)
                self.add("drop_branch", start, end, "", else_line, "the 'else:' branch was dropped")
        self.generic_visit(node)

    def visit_body_holders(self, node):
        for field in ("body", "orelse", "finalbody"):
            self._visit_body(getattr(node, field, []) or [])

    def visit(self, node):
        # Function bodies are handled inside the function's scope (visit_FunctionDef).
        if isinstance(node, (ast.Module, ast.For, ast.While, ast.If, ast.With, ast.Try)):
            self.visit_body_holders(node)
        return super().visit(node)


def _builds_string(node: ast.AST) -> bool:
    """Whether an expression visibly concatenates strings (flipping its '+' would only crash)."""
    return any(isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Constant) and isinstance(n.value, str)) for n in ast.walk(node))


def inverse_edit(reference: str, mutant: str) -> tuple[str, str]:
    """The (old, new) pair of whole lines that turns `mutant` back into `reference`; `old` occurs once in `mutant`."""
    ref, mut = reference.splitlines(keepends=True), mutant.splitlines(keepends=True)
    top = 0
    while top < min(len(ref), len(mut)) and ref[top] == mut[top]:
        top += 1
    bottom = 0
    while bottom < min(len(ref), len(mut)) - top and ref[-1 - bottom] == mut[-1 - bottom]:
        bottom += 1
    # Grow the window by context lines until the old text is non-blank and unique in the mutant.
    up = down = 0
    while True:
        old = "".join(mut[top - up : len(mut) - bottom + down])
        if old.strip() and mutant.count(old) == 1:
            return old, "".join(ref[top - up : len(ref) - bottom + down])
        can_down, can_up = down < bottom, up < top
        assert can_down or can_up, "the mutant differs from the reference nowhere unique"
        if can_down and (down <= up or not can_up):
            down += 1
        else:
            up += 1
