"""Turn infix expressions into reverse Polish notation (shunting-yard) and evaluate them."""

from .lexer import tokenize

PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "^": 3}
RIGHT_ASSOCIATIVE = ("^",)


def to_rpn(source):
    """'1 + 2 * 3' -> ['1', '2', '3', '*', '+']; '^' groups to the right."""
    output, stack = [], []
    for kind, text in tokenize(source):
        if kind in ("number", "name"):
            output.append(text)
        elif text == "(":
            stack.append(text)
        elif text == ")":
            while stack and stack[-1] != "(":
                output.append(stack.pop())
            if not stack:
                raise ValueError("unbalanced ')'")
            stack.pop()
        elif text in PRECEDENCE:
            while stack and stack[-1] != "(" and (
                PRECEDENCE[stack[-1]] > PRECEDENCE[text]
                or (PRECEDENCE[stack[-1]] == PRECEDENCE[text] and text not in RIGHT_ASSOCIATIVE)
            ):
                output.append(stack.pop())
            stack.append(text)
        else:
            raise ValueError(f"operator {text!r} is not arithmetic")
    while stack:
        top = stack.pop()
        if top == "(":
            raise ValueError("unbalanced '('")
        output.append(top)
    return output


def evaluate(source, variables=None):
    """The value of an arithmetic expression, names looked up in `variables`."""
    variables = variables or {}
    stack = []
    for item in to_rpn(source):
        if item in PRECEDENCE:
            if len(stack) < 2:
                raise ValueError(f"operator {item!r} is missing an operand")
            right, left = stack.pop(), stack.pop()
            if item == "+":
                stack.append(left + right)
            elif item == "-":
                stack.append(left - right)
            elif item == "*":
                stack.append(left * right)
            elif item == "/":
                stack.append(left / right)
            else:
                stack.append(left ** right)
        elif item[0].isdigit() or item[0] == ".":
            stack.append(float(item) if "." in item else int(item))
        else:
            if item not in variables:
                raise KeyError(f"unknown name {item!r}")
            stack.append(variables[item])
    if len(stack) != 1:
        raise ValueError("malformed expression")
    return stack[0]
