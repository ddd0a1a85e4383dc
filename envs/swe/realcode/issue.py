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


def hard(package: str, topic: str, symptoms: list[tuple[Case, dict]]) -> str:
    """The vague issue: per bug, one call that misbehaves and what it should give, nothing about where."""
    several = len(symptoms) > 1
    lines = [f"# {'Several regressions' if several else 'Wrong result'} in {package} ({topic})", ""]
    for n, (case, want) in enumerate(symptoms, start=1):
        expected = f"return `{want['value']}`" if "value" in want else f"raise `{want['error']}`"
        if several:
            lines += [f"## Report {n}", ""]
        lines += [f"Since a recent change, `{package}` misbehaves. This call:", "", "```python",
                  f">>> from {case.module} import {case.name}", f">>> {case.name}({case.args})", "```", "",
                  f"should {expected}, as it did before, but it does not. Other calls may be affected as well.", ""]
    if several:
        lines.append("The reports may have different causes; fix them all.")
    return "\n".join(lines).rstrip() + "\n"
