"""Issue texts for a mined bug, written from what its failing tests printed.

easy: the failing test by name, its assertion output and the function to look at; hard (and long, one
report per bug): only a symptom a user would see (a call of the package that no longer gives the released
result), no test, file or function named.
"""
from __future__ import annotations

from jointrl.envs.swe.realcode.cases import Case


def easy(package: str, bug: dict) -> str:
    """The pointed issue: failing test, pytest's error lines, and where the bug is."""
    test = bug["f2p_tests"][0]
    lines = [f"# `{test}` fails", "", f"After a recent change, the test `{test}` of `{package}` fails:", "", "```"]
    lines.append(f"FAILED {test}" + (f" - {bug['reason']}" if bug["reason"] else ""))
    lines += bug["errors"]
    lines += ["```", ""]
    others = len(bug["f2p_tests"]) - 1
    if others:
        lines += [f"{others} other test{'s' if others > 1 else ''} fail{'' if others > 1 else 's'} with it.", ""]
    lines.append(f"The cause is in `{bug['function'] or 'module level code'}` in `{bug['file']}`.")
    return "\n".join(lines) + "\n"


def _shown(outcome: dict | None) -> str:
    if outcome is None:
        return "does not return a plain value (it runs away or gives an object)"
    return f"returns `{outcome['value']}`" if "value" in outcome else f"raises `{outcome['error']}`"


def hard(package: str, topic: str, reports: list[list[tuple[Case, dict, dict | None]]]) -> str:
    """The vague issue: per bug, calls that misbehave, what they give and what they should give; nothing about
    where."""
    several = len(reports) > 1
    lines = [f"# {'Several regressions' if several else 'Wrong results'} in {package} ({topic})", ""]
    for n, report in enumerate(reports, start=1):
        if several:
            lines += [f"## Report {n}", ""]
        lines += [f"Since a recent change, `{package}` misbehaves.", ""]
        for case, want, got in report:
            expected = f"return `{want['value']}`" if "value" in want else f"raise `{want['error']}`"
            lines += ["```python", f">>> from {case.module} import {case.name}", f">>> {case.name}({case.args})", "```",
                      "", f"now {_shown(got)}; it should {expected}, as it did before.", ""]
        lines += ["Other calls may be affected as well.", ""]
    if several:
        lines.append("The reports may have different causes; fix them all.")
    return "\n".join(lines).rstrip() + "\n"
