"""Write the issue text of a task: a pointed report (file, function, failing test) or a vaguer symptom,
and for the long tier a feature request that names the missing function and quotes its docstring."""
from __future__ import annotations

import re

from jointrl.envs.swe.bug import Bug
from jointrl.envs.swe.family import Family
from jointrl.envs.swe.feature import Feature
from jointrl.envs.swe.probe import PRIVATE_PREFIX, Outcome
from jointrl.envs.swe.project import Project, Test, literal_repr


def render(family: Family, built: Project, bugs: list[Bug], pointed: bool, hidden: bool,
           feature: Feature | None = None) -> str:
    """The issue for `bugs` (and `feature`): one reproduction per bug, located precisely only when `pointed`."""
    package = built.package
    if pointed:
        (bug,) = bugs
        where = f"`{bug.mutation.function or 'module level code'}` in `{package}/{bug.module}.py`"
        return "\n".join([
            f"# Wrong result from {where}",
            "",
            f"The bug is in {where}. Reproduction:",
            "",
            *session(package, bug.example, bug.actual),
            "",
            f"Expected: {_expected(bug.example)}.",
            f"The test `{bug.example.id}` fails because of it.",
        ]) + "\n"
    title = f"# {'Two problems' if len(bugs) > 1 else 'A problem'} with {family.topic} in `{package}`"
    if feature is not None:
        title += " and a missing function"
    lines = [title, ""]
    for n, bug in enumerate(bugs, start=1):
        if len(bugs) > 1:
            lines += [f"## Report {n}", ""]
        lines += [
            f"Users of `{package}` report this:",
            "",
            *session(package, bug.example, bug.actual),
            "",
            f"Expected: {_expected(bug.example)}.",
            "",
        ]
    if hidden and feature is None:
        lines.append("The regression tests for this report are kept by the maintainers; the tests in the repository pass.")
    if feature is not None:
        doc = "\n".join(f"> {line}".rstrip() for line in feature.doc.splitlines())
        lines += [
            "## Feature request",
            "",
            f"Please add `{feature.signature}` to `{package}/{feature.module}.py`:",
            "",
            doc,
            "",
            f"The tests in `tests/test_{feature.module}.py` already call it and fail until it exists.",
            "",
            "The regression tests for the reports above are kept by the maintainers.",
        ]
    return "\n".join(lines).rstrip() + "\n"


def session(package: str, test: Test, actual: Outcome) -> list[str]:
    """The reproduction as an interactive session, up to the statement where the buggy code went wrong."""
    by_module: dict[str, list[str]] = {}
    for owner, name in test.imports:
        by_module.setdefault(owner, []).append(name)
    lines = ["```python"]
    lines += [f">>> from {package}.{owner} import {', '.join(sorted(names))}" for owner, names in sorted(by_module.items())]
    statements = [*test.case.setup, test.case.expr]
    if actual.error is not None or actual.exhausted:
        statements = statements[: actual.step + 1]
    if actual.error is None and not actual.exhausted and actual.value is None and not test.case.raises:
        # The interpreter prints nothing for None; print it so the wrong result is visible.
        statements[-1] = f"print({statements[-1]})"
    lines += [f">>> {statement}" for statement in statements]
    if actual.exhausted:
        lines.append("(never returns)")
    elif actual.error is not None:
        lines += ["Traceback (most recent call last):", "  ...", f"{actual.error}: {actual.message}".rstrip(": ")]
    elif actual.value is not None or not test.case.raises:
        lines.append(_shown(package, actual.value))
    lines.append("```")
    return lines


def _shown(package: str, value: object) -> str:
    """repr(value) as the user would see it, without what differs between runs: the probe's private package
    name and the object addresses of default reprs (issue texts must be the same in every process)."""
    text = re.sub(rf"\b{PRIVATE_PREFIX}\d+\b", package, literal_repr(value))
    return re.sub(r" at 0x[0-9a-fA-F]+>", ">", text)


def _expected(test: Test) -> str:
    if test.case.raises:
        return f"it raises {test.case.raises}"
    return f"`{literal_repr(test.expected)}`"
