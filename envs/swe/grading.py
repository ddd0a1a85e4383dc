"""Grade an episode without trusting its workspace: rebuild a fresh one from the package sources alone
plus the original tests (hidden ones included), run FAIL_TO_PASS and PASS_TO_PASS there, read the report.

Only regular `.py` files under the package directory are taken from the model's workspace; its tests,
conftest files, pytest settings, stray modules (a `pytest.py` or `sitecustomize.py`) and links never
reach the grading run. What stays open: the package code itself runs inside the test process, so code
written to subvert pytest from within could still forge a report.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import stat
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass

from jointrl.envs.sandbox import Limits, Sandbox
from jointrl.envs.swe.project import PYTEST_INI
from jointrl.envs.swe.task import Task

GRADE_LIMITS = Limits(wall_seconds=30.0, cpu_seconds=30, output_bytes=16 << 10)
TEST_TIMEOUT = 5  # seconds per test, so one hanging test fails alone instead of stalling the run
MAX_FILE_BYTES = 1 << 20
MAX_FILES = 200
PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONHASHSEED": "0"}


def pytest_argv(*args: str) -> list[str]:
    """The interpreter running pytest in a sandbox: no third-party plugins but the per-test timeout."""
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_timeout", *args]


@dataclass(frozen=True)
class Grade:
    """Which graded tests passed, and whether the episode touched the test files."""

    passed: frozenset
    tests_modified: bool

    def signals(self, task: Task) -> dict[str, float]:
        """resolved (= success), the pass fractions of FAIL_TO_PASS and PASS_TO_PASS, tests_modified."""
        f2p = sum(i in self.passed for i in task.fail_to_pass) / len(task.fail_to_pass)
        p2p = sum(i in self.passed for i in task.pass_to_pass) / len(task.pass_to_pass) if task.pass_to_pass else 1.0
        resolved = float(f2p == 1.0 and p2p == 1.0)
        return {"success": resolved, "resolved": resolved, "f2p_fraction": f2p, "p2p_fraction": p2p,
                "tests_modified": float(self.tests_modified)}


def package_files(box: Sandbox, package: str) -> dict[str, bytes]:
    """The regular .py files under the package directory of a workspace (links and oversized files left out)."""
    top = box.workspace / package
    try:
        if not stat.S_ISDIR(os.lstat(top).st_mode):
            return {}
    except FileNotFoundError:
        return {}
    found: dict[str, bytes] = {}
    for directory, dirs, files in os.walk(top, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if name.endswith(".py") and stat.S_ISREG(info.st_mode) and info.st_size <= MAX_FILE_BYTES:
                relative = os.path.relpath(path, box.workspace)
                try:
                    found[relative] = box.read(relative)
                except (OSError, ValueError):
                    continue  # replaced by a link or removed since the walk: not part of the package
            if len(found) >= MAX_FILES:
                return found
    return found


def tests_modified(box: Sandbox, task: Task) -> bool:
    """Whether the workspace's test files, pytest settings or conftest files differ from what it started with."""
    given = {p: t.encode() for p, t in task.files.items() if p.startswith("tests/") or p == "pytest.ini"}
    present: dict[str, bytes | None] = {}
    for directory, dirs, files in os.walk(box.workspace, followlinks=False):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        relative_dir = os.path.relpath(directory, box.workspace)
        for name in files:
            relative = os.path.normpath(os.path.join(relative_dir, name))
            if relative.startswith("tests/") or relative == "pytest.ini" or name == "conftest.py":
                try:
                    present[relative] = box.read(relative)
                except (OSError, ValueError):
                    present[relative] = None
    return present != given


def fingerprint(files: dict[str, bytes]) -> str:
    """A digest of a set of files (names and contents)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    return digest.hexdigest()


def buggy_package(task: Task) -> dict[str, bytes]:
    """The package files exactly as the episode started."""
    return {f"{task.package}/{stem}.py": text.encode() for stem, text in task.sources.items()}


def reference_package(task: Task) -> dict[str, bytes]:
    """The package files without the bugs."""
    return {f"{task.package}/{stem}.py": text.encode() for stem, text in task.project.sources.items()}


def known_results(task: Task) -> dict[str, frozenset]:
    """Two package states whose results are known by construction (fingerprint -> passing ids).

    The expected values were computed on the reference sources, so the reference passes every test,
    and task building found exactly FAIL_TO_PASS failing on the buggy sources; the tests of this
    module check both against real pytest runs.
    """
    return {fingerprint(buggy_package(task)): frozenset(task.pass_to_pass),
            fingerprint(reference_package(task)): frozenset(task.fail_to_pass + task.pass_to_pass)}


def run_tests(task: Task, package: dict[str, bytes], use_known: bool = True) -> frozenset:
    """Ids of the graded tests that pass with `package` and the original tests, in a fresh sandbox."""
    if use_known:
        known = known_results(task).get(fingerprint(package))
        if known is not None:
            return known
    report = f".grade-{secrets.token_hex(8)}.xml"
    files: dict[str, str | bytes] = dict(package)
    files.update(task.project.test_files())
    files["pytest.ini"] = PYTEST_INI
    test_paths = sorted(p for p in files if isinstance(p, str) and p.startswith("tests/"))
    with Sandbox(GRADE_LIMITS, files=files) as box:
        argv = pytest_argv("-q", "-o", "addopts=", f"--timeout={TEST_TIMEOUT}", f"--junitxml={report}", *test_paths)
        box.run(argv, env=PYTEST_ENV)
        try:
            xml = box.read(report)
        except (OSError, ValueError):
            return frozenset()
    return _passed(xml)


def _passed(xml: bytes) -> frozenset:
    """Test ids a JUnit XML report marks as passed (no failure, error or skip)."""
    if len(xml) > 8 * MAX_FILE_BYTES:
        return frozenset()
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError:
        return frozenset()
    passed = set()
    for case in root.iter("testcase"):
        if any(child.tag in ("failure", "error", "skipped") for child in case):
            continue
        module, name = case.get("classname", ""), case.get("name", "")
        passed.add(f"{module.replace('.', '/')}.py::{name}")
    return frozenset(passed)


def grade(box: Sandbox, task: Task) -> Grade:
    """Grade the episode whose workspace is `box`."""
    return Grade(run_tests(task, package_files(box, task.package)), tests_modified(box, task))
