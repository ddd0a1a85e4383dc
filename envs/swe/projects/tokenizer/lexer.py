"""Split arithmetic expressions into (kind, text) tokens: numbers, names, operators and brackets."""

OPERATORS = ("<=", ">=", "==", "!=", "+", "-", "*", "/", "^", "<", ">", "(", ")", ",")


class LexError(ValueError):
    """A character that starts no token."""


def tokenize(source):
    """'x1 + 2.5*(y - 3)' -> [('name', 'x1'), ('op', '+'), ('number', '2.5'), ...]; spaces are skipped."""
    tokens = []
    i = 0
    while i < len(source):
        char = source[i]
        if char.isspace():
            i += 1
        elif char.isdigit() or (char == "." and i + 1 < len(source) and source[i + 1].isdigit()):
            start = i
            seen_dot = False
            while i < len(source) and (source[i].isdigit() or (source[i] == "." and not seen_dot)):
                seen_dot = seen_dot or source[i] == "."
                i += 1
            tokens.append(("number", source[start:i]))
        elif char.isalpha() or char == "_":
            start = i
            while i < len(source) and (source[i].isalnum() or source[i] == "_"):
                i += 1
            tokens.append(("name", source[start:i]))
        else:
            op = next((op for op in OPERATORS if source.startswith(op, i)), None)
            if op is None:
                raise LexError(f"unexpected {char!r} at position {i}")
            tokens.append(("op", op))
            i += len(op)
    return tokens


def names(source):
    """The distinct names an expression mentions, in order of first appearance."""
    seen = []
    for kind, text in tokenize(source):
        if kind == "name" and text not in seen:
            seen.append(text)
    return seen


def balanced(source):
    """Whether the brackets of an expression pair up."""
    depth = 0
    for kind, text in tokenize(source):
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0
