"""Graded cases of a real package: calls of its functions with literal arguments, and their outcomes.

A case is a recorded call from the package's own test suite (what the visible tests do) or a variant of
one with a single argument changed (inputs no visible test uses, so hard-coding the tests' inputs cannot
pass them). Every case runs through the swe harness (`envs/swe/harness.py`) in a sandbox; its outcome
there on the pristine package, the same under two string-hash seeds, is the reference the host keeps.
"""
from __future__ import annotations

import ast
import json
import random
import secrets
from dataclasses import dataclass
from pathlib import Path

from jointrl.envs.sandbox import PYTHON, Limits, Sandbox
from jointrl.envs.sandbox.runtime import SITE
from jointrl.envs.swe.grading import HARNESS

REACH = (Path(__file__).parent / "reach.py").read_text()

MAX_RECORDED = 8  # recorded calls kept per function
MAX_VARIANTS = 8  # changed-argument variants kept per function
# Iterators (generators, map objects) are drained into a list so their items are compared.
MATERIALIZE = ("def _materialize(value):\n"
               "    if hasattr(value, '__next__'):\n"
               "        return list(__import__('itertools').islice(value, 200))\n"
               "    return value\n")
# The harness runs isolated (-I ignores PYTHONPATH); a package's own dependencies (pydash needs
# typing_extensions) are in the sandbox's read-only site, so cases put it back on the path.
SITE_PATH = f"import sys\nif {SITE!r} not in sys.path: sys.path.append({SITE!r})\n"
ENTRY_POINTS = ("__main__", "cli")  # command-line front ends exit the process: no cases from them
HARNESS_LIMITS = Limits(wall_seconds=120.0, cpu_seconds=120, output_bytes=4 << 20)


@dataclass(frozen=True)
class Case:
    """One call: `from module import name; name(args)`; `visible` when the package's tests make this call."""

    module: str
    name: str
    args: str
    visible: bool

    def spec(self) -> dict:
        """The case as the harness reads it."""
        return {"imports": {}, "setup": [SITE_PATH, f"from {self.module} import {self.name}", MATERIALIZE],
                "expr": f"_materialize({self.name}({self.args}))"}

    def key(self) -> str:
        """A stable identity of the case."""
        return f"{self.module}.{self.name}({self.args})"


def _split(args: str) -> tuple[list, dict] | None:
    """Positional and keyword argument values of a call text, or None when it is not all literals."""
    try:
        call = ast.parse(f"f({args})", mode="eval").body
        return [ast.literal_eval(a) for a in call.args], {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    except (ValueError, SyntaxError, TypeError):
        return None


def _changed(value) -> list:
    """A few values close to `value` that a function may treat differently."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int):
        return [value + 1, value - 1, value * 2]
    if isinstance(value, float):
        return [value + 0.5, -value]
    if isinstance(value, (str, bytes)):
        return [value[::-1], value + value[:1], value[1:], value.upper()] if value else [value + value.__class__(b"a" if isinstance(value, bytes) else "a")]
    if isinstance(value, (list, tuple)):
        return [value[::-1], value + value[:1], value[1:]] if value else []
    return []


def variants(args: str, rng: random.Random) -> list[str]:
    """Call texts that change one argument of `args` each, in a seeded order."""
    split = _split(args)
    if split is None:
        return []
    positional, keywords = split
    found = []
    for index, value in enumerate(positional):
        for other in _changed(value):
            changed = positional[:index] + [other] + positional[index + 1:]
            found.append(", ".join([repr(v) for v in changed] + [f"{k}={v!r}" for k, v in keywords.items()]))
    for name, value in keywords.items():
        for other in _changed(value):
            changed = {**keywords, name: other}
            found.append(", ".join([repr(v) for v in positional] + [f"{k}={v!r}" for k, v in changed.items()]))
    found = [text for text in dict.fromkeys(found) if text != args]
    rng.shuffle(found)
    return found


def candidates(calls: list[dict], seed: str) -> list[Case]:
    """Recorded calls and their variants, per function, before their outcomes are known."""
    found: list[Case] = []
    for record in calls:
        if record["name"] == "main" or record["module"].rsplit(".", 1)[-1] in ENTRY_POINTS:
            continue
        rng = random.Random(f"{seed}/{record['module']}.{record['name']}")
        recorded = record["args"][:MAX_RECORDED]
        found += [Case(record["module"], record["name"], args, True) for args in recorded]
        seen = set(recorded)
        changed = []
        for args in recorded:
            changed += [v for v in variants(args, rng) if v not in seen]
        changed = list(dict.fromkeys(changed))
        rng.shuffle(changed)
        found += [Case(record["module"], record["name"], args, False) for args in changed[:MAX_VARIANTS]]
    return found


def outcomes(box: Sandbox, cases: list[Case], package: str, timeout: float = 5.0,
             hash_seed: str = "0") -> list[dict | None]:
    """Each case's outcome in `box`'s workspace, as the harness reports it; None where no valid line came."""
    nonce = secrets.token_hex(16)
    spec = json.dumps({"nonce": nonce, "package": package, "timeout": timeout, "cases": [c.spec() for c in cases]})
    # -B: a mutant written within the same second as the file it replaces must not be read from a stale .pyc.
    result = box.run([PYTHON, "-I", "-B", "-c", HARNESS], stdin=spec, env={"PYTHONHASHSEED": hash_seed})
    found: list[dict | None] = [None] * len(cases)
    for line in result.stdout.splitlines():
        head, _, rest = line.partition(" ")
        index, _, payload = rest.partition(" ")
        if head == nonce and index.isdigit() and int(index) < len(cases) and found[int(index)] is None:
            found[int(index)] = comparable(payload)
    return found


def comparable(payload: str) -> dict | None:
    """An outcome line's payload reduced to what grading compares ({"value"} or {"error", "lineage"})."""
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("value"), str):
        try:
            ast.literal_eval(data["value"])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
        return {"value": data["value"]}
    if isinstance(data.get("error"), str) and isinstance(data.get("lineage"), list):
        return {"error": data["error"], "lineage": [str(c) for c in data["lineage"][:64]]}
    return None


def reached(box: Sandbox, cases: list[Case], package: str, timeout: float = 5.0) -> list[set[tuple[str, str]]]:
    """Per case, the (file, qualified name) of every package function it calls, in `box`'s workspace."""
    spec = json.dumps({"package": package, "timeout": timeout, "cases": [c.spec() for c in cases]})
    result = box.run([PYTHON, "-I", "-B", "-c", REACH], stdin=spec, env={"PYTHONHASHSEED": "0"})
    found = json.loads(result.stdout.strip().splitlines()[-1])
    if len(found) != len(cases):
        raise RuntimeError(f"tracing the cases of {package} reported {len(found)} of {len(cases)}")
    return [{tuple(pair) for pair in pairs} for pairs in found]


def reference(files: dict[str, str], cases: list[Case], package: str) -> list[tuple[Case, dict]]:
    """The cases whose pristine outcome is a value or an error, the same under two string-hash seeds."""
    with Sandbox(HARNESS_LIMITS, files=files) as box:
        first = outcomes(box, cases, package, hash_seed="0")
        second = outcomes(box, cases, package, hash_seed="1")
    return [(c, a) for c, a, b in zip(cases, first, second) if a is not None and a == b]
