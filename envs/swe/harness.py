"""The program a swe grading sandbox runs: evaluate every graded case against the workspace's package.

It runs inside the sandbox as `python -I -c <this file's text>`, standard library only, with a JSON spec on
stdin ({"nonce", "package", "timeout", "cases": [{"imports": {name: module}, "setup": [...], "expr"}]})
and prints one line per case, `<nonce> <index> <outcome JSON>`, on a private copy of stdout (the package's
own prints go to /dev/null). An outcome is {"value": repr} for a value made only of literal types,
{"error": class name, "lineage": [class names of its MRO]}, {"timeout": true} or {"unencodable": type}.

Nothing this program reports is trusted, because it cannot be: the package code it imports runs in the
same process and can rewrite anything here. The grader (`grading.py`) instead compares each reported
outcome, parsed on the host as a plain literal, with the outcome of the reference sources computed on the
host. Every report a subverted harness could print (a value, an exception name) is one that honest
package code could also produce by returning that value or raising that exception for that case, so
forging the report buys nothing that fixing the code would not. The nonce only frames the lines.
"""
import importlib
import json
import os
import signal
import sys

MAX_REPR = 4096  # characters of one value's repr; a longer value is reported unencodable
LITERAL_SCALARS = (bool, int, float, complex, str, bytes, type(None))


class CaseTimeout(BaseException):
    """A case ran past its time (a BaseException, so that `except Exception` in package code lets it through)."""


class Unencodable(Exception):
    """A value that is not made only of Python literals (the reference's values always are)."""


def literal(value, depth=0):
    """repr(value) when value is built only from exact literal types (no subclasses, no NaN), else Unencodable."""
    if depth > 50:
        raise Unencodable("nested too deep")
    kind = type(value)
    if kind in LITERAL_SCALARS:
        if kind is float and value != value:
            raise Unencodable("nan")
        text = repr(value)
        if kind in (float, complex) and ("inf" in text or "nan" in text):
            raise Unencodable(text)
        return text
    if kind in (list, tuple, set, frozenset):
        items = [literal(item, depth + 1) for item in value]
        if kind is list:
            return "[" + ", ".join(items) + "]"
        if kind is tuple:
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if not items:
            return "set()" if kind is set else "frozenset()"
        body = "{" + ", ".join(sorted(items)) + "}"
        return body if kind is set else f"frozenset({body})"
    if kind is dict:
        pairs = sorted(f"{literal(k, depth + 1)}: {literal(v, depth + 1)}" for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    raise Unencodable(kind.__name__)


def evaluate(case, package):
    """Run one case's imports, set-up and expression; return its outcome as a dict."""
    namespace = {}
    try:
        for name, stem in case["imports"].items():
            namespace[name] = getattr(importlib.import_module(f"{package}.{stem}"), name)
        for statement in case["setup"]:
            exec(statement, namespace)
        value = eval(case["expr"], namespace)
    except CaseTimeout:
        return {"timeout": True}
    except Exception as err:
        return {"error": type(err).__name__, "lineage": [c.__name__ for c in type(err).__mro__]}
    try:
        text = literal(value)
    except Unencodable as err:
        return {"unencodable": str(err)}
    return {"value": text} if len(text) <= MAX_REPR else {"unencodable": "too long"}


def main():
    """Read the spec, silence the package's output, evaluate every case in order."""
    spec = json.loads(sys.stdin.read())
    out = os.fdopen(os.dup(1), "w")
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    sys.path.insert(0, os.getcwd())

    def on_alarm(signum, frame):
        raise CaseTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    for index, case in enumerate(spec["cases"]):
        signal.setitimer(signal.ITIMER_REAL, spec["timeout"])
        try:
            outcome = evaluate(case, spec["package"])
        except CaseTimeout:
            outcome = {"timeout": True}
        signal.setitimer(signal.ITIMER_REAL, 0)
        out.write(f"{spec['nonce']} {index} {json.dumps(outcome)}\n")
        out.flush()


if __name__ == "__main__":
    main()
