"""Run a package's own test suite once, pristine, in a sandbox: passing tests, per-function coverage, calls.

The result decides what mining may touch: only functions that passing tests call are mutated, only those
tests are rerun for a mutant, and the recorded literal calls become the graded cases.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from jointrl.envs.sandbox import PYTHON, Limits, Sandbox

TRACER = (Path(__file__).parent / "tracer.py").read_text()
TRACE_LIMITS = Limits(wall_seconds=600.0, cpu_seconds=600, output_bytes=1 << 20)
PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
OUT = "jointrl_trace.json"


@dataclass(frozen=True)
class Trace:
    """What the pristine suite did."""

    passed: tuple[str, ...]  # test ids that pass on the pristine package
    coverage: dict  # file -> qualname -> ids of tests that call it
    calls: list  # [{"module", "name", "generator", "args": [call text]}]


def pytest_argv(*args: str) -> list[str]:
    """pytest in a sandbox: no plugins but the per-test timeout (and what `args` load), no cache, no rewrite noise."""
    return [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_timeout", "--timeout=20", *args]


def trace(files: dict[str, str], package: str, tests: str) -> Trace:
    """Run the whole suite of a workspace (files) under the tracer; raises when it produced nothing."""
    with Sandbox(TRACE_LIMITS, files={**files, "jointrl_tracer.py": TRACER}) as box:
        env = {**PYTEST_ENV, "TRACE_PACKAGE": package, "TRACE_OUT": OUT}
        result = box.run(pytest_argv("-q", "--continue-on-collection-errors", "-p", "jointrl_tracer", tests), env=env)
        if not box.exists(OUT):
            raise RuntimeError(f"tracing {package} produced no report: {result.text()[-500:]}")
        data = json.loads(box.read(OUT))
    return Trace(tuple(data["passed"]), data["coverage"], data["calls"])
