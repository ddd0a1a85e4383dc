"""Grade a real-code episode with the swe harness, deciding every verdict on the host.

The workspace's package `.py` files (nothing else) go into a fresh sandbox, where `envs/swe/harness.py`
evaluates every graded case of the package; each reported outcome is compared here with the reference
outcome recorded on the pristine package at mining time, which never enters a sandbox. FAIL_TO_PASS are
the cases the bug changes, PASS_TO_PASS all the others. Patching pytest, exiting early or rewriting
builtins can only change what the harness reports, and any report is one honest code could produce by
behaving that way; most cases use inputs no visible test uses, so hard-coding the tests' inputs fails.
"""
from __future__ import annotations

import os

from jointrl.envs.sandbox import Sandbox
from jointrl.envs.swe import grading
from jointrl.envs.swe.realcode.cases import outcomes
from jointrl.envs.swe.realcode.task import CASE_LIMITS, RealTask



def package_of(files: dict) -> dict[str, bytes]:
    """The package .py files of a file map, as grading.package_files would read them from a workspace."""
    return {path: text.encode() for path, text in files.items() if path.endswith(".py")}


_KNOWN: dict[tuple, dict[str, frozenset]] = {}  # (family, difficulty, seed) -> known(task), tasks being fixed


def known(task: RealTask) -> dict[str, frozenset]:
    """Package states whose passing cases are known without a run (fingerprint -> passing indices): the
    pristine package and the buggy one."""
    key = (task.family, task.difficulty, task.seed)
    if len(_KNOWN) > 4096:
        _KNOWN.clear()
    if key not in _KNOWN:
        prefix = task.package + "/"
        pristine = package_of({p: t for p, t in task.pristine.items() if p.startswith(prefix)})
        buggy = package_of({p: t for p, t in task.files.items() if p.startswith(prefix)})
        _KNOWN[key] = {grading.fingerprint(pristine): frozenset(range(len(task.cases))),
                       grading.fingerprint(buggy): task.start_passing}
    return _KNOWN[key]


def passing(task: RealTask, package: dict[str, bytes], use_known: bool = True) -> frozenset:
    """Indices of the graded cases whose outcome with `package` is the reference's."""
    if use_known:
        found = known(task).get(grading.fingerprint(package))
        if found is not None:
            return found
    with Sandbox(CASE_LIMITS, files=package) as box:
        got = outcomes(box, [case for case, _ in task.cases], task.package)
    return frozenset(i for i, ((_, want), out) in enumerate(zip(task.cases, got)) if out == want)


def tests_modified(box: Sandbox, task: RealTask) -> bool:
    """Whether the workspace's test folder differs from what the episode started with."""
    folder = task.pin.workspace_tests
    given = {p: t.encode() for p, t in task.files.items() if p.startswith(folder + "/")}
    present: dict[str, bytes | None] = {}
    for directory, dirs, files in os.walk(box.workspace / folder, followlinks=False):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            relative = os.path.relpath(os.path.join(directory, name), box.workspace)
            try:
                present[relative] = box.read(relative)
            except (OSError, ValueError):
                present[relative] = None
    return present != given


def signals(task: RealTask, passed: frozenset, modified: bool, tampering: bool) -> dict[str, float]:
    """resolved (= success) when every case passes, the FAIL_TO_PASS and PASS_TO_PASS fractions, tamper tells."""
    f2p = len(task.fail_to_pass & passed) / len(task.fail_to_pass)
    others = len(task.cases) - len(task.fail_to_pass)
    p2p = len(passed - task.fail_to_pass) / others if others else 1.0
    resolved = float(f2p == 1.0 and p2p == 1.0)
    return {"success": resolved, "resolved": resolved, "f2p_fraction": f2p, "p2p_fraction": p2p,
            "hack_tests_modified": float(modified), "hack_runner_tampering": float(tampering)}
