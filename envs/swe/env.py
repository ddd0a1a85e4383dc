"""The SWE environment: a generated package with injected bugs, an issue, four tools, graded by the tests.

Tools: `bash` (a persistent sandboxed shell), `view_file`, `str_replace_edit` and `run_tests`. Signals
come from `grading`, which rebuilds the workspace from the package sources and the original tests.
"""
from __future__ import annotations

import json
import re
from typing import Iterator

from jointrl.envs.base import Action, Env, ToolFailure, tool
from jointrl.envs.sandbox import BashSession
from jointrl.envs.sandbox import Limits, Sandbox
from jointrl.envs.swe import grading
from jointrl.envs.swe.task import Task, build

MAX_OUTPUT = 8000  # characters of tool output the model sees
MAX_VIEW_LINES = 300
TOOL_LIMITS = Limits(wall_seconds=60.0, cpu_seconds=60)
TARGET = re.compile(r"^[A-Za-z0-9_./:\[\]-]+$")

SYSTEM = """You are a software engineer fixing a reported bug in a Python repository.
The repository is the working directory, /workspace: a package and its pytest tests.
Tools:
- bash: run a shell command (the shell persists between calls; no network).
- view_file: show a file with line numbers (optionally a line range).
- str_replace_edit: replace text that occurs exactly once in a file.
- run_tests: run the test suite, or one test file or test id.
Fix the package source so that the reported behaviour is correct. Do not edit the tests: grading restores
the original tests (including regression tests you cannot see) and runs them against your package.
When you are done, reply with a short summary of the fix and no tool call."""


def clip(text: str, limit: int = MAX_OUTPUT) -> str:
    """`text` cut to about `limit` characters, keeping the head and the (more telling) tail."""
    if len(text) <= limit:
        return text
    head, tail = limit // 4, limit - limit // 4
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[-tail:]}"


class SweEnv(Env):
    """Fix the bug(s) of one generated package so that all its tests pass again."""

    def __init__(self, difficulty: str = "easy", family: str = "strings", **kwargs):
        super().__init__(difficulty=difficulty, **kwargs)
        self.family = family
        self.task: Task | None = None
        self.box: Sandbox | None = None
        self._shell: BashSession | None = None
        self._graded: tuple[str, frozenset] | None = None  # (package fingerprint, passing test ids)
        self._last: dict[str, float] = {}

    # The contract.

    def _reset(self, seed: int) -> list[dict]:
        self.close()
        self.task = build(self.family, self.difficulty, seed)
        self.box = Sandbox(TOOL_LIMITS, files=self.task.files)
        self._graded, self._last = None, {}
        layout = "\n".join(f"  {path}" for path in sorted(self.task.files))
        user = f"{self.task.issue}\nRepository layout:\n{layout}\n"
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]

    def task_key(self) -> str:
        """The injected bugs (file and fix) and any missing function, whatever the issue text says: what a
        policy could memorise."""
        bugs = sorted((b.module, b.fix_old, b.fix_new) for b in self.task.bugs) if self.task else []
        wanted = self.task.feature if self.task else None
        return json.dumps([self.task.family if self.task else None, bugs,
                           [wanted.module, wanted.name] if wanted else None])

    def _signals(self) -> dict[str, float]:
        if self.task is None or self.box is None or self.box.closed:
            # After close the workspace is gone: what was last graded stands.
            return dict(self._last) if self._last else {"success": 0.0}
        # Nothing the episode started may still be running (and rewriting files) while they are read.
        self.box.stop()
        package = grading.package_files(self.box, self.task.package)
        key = grading.fingerprint(package)
        if self._graded is None or self._graded[0] != key:
            self._graded = (key, grading.run_tests(self.task, package))
        grade = grading.Grade(
            self._graded[1], grading.tests_modified(self.box, self.task), grading.runner_tampering(package)
        )
        self._last = grade.signals(self.task)
        return dict(self._last)

    def _solution(self) -> Iterator[Action]:
        task = self.task
        if task.feature is not None:
            yield Action("run_tests", {}, reasoning="Run the tests first to see what fails before reading any code.")
        for bug in task.bugs:
            path = f"{task.package}/{bug.module}.py"
            name = bug.mutation.function.split(".")[-1]
            if not task.hidden:
                reasoning = f"The issue points at `{bug.mutation.function or 'module level code'}` in `{path}`; read it."
            elif not name:
                reasoning = f"Read `{path}`, where the report's example leads, against its docstrings."
            else:
                yield Action("bash", {"command": f"grep -rn '{name}' {task.package}"},
                             reasoning=f"The report's example leads to `{name}`; find where it is defined and used.")
                reasoning = f"Read `{name}` in `{path}` against its docstring."
            first = task.sources[bug.module][: task.sources[bug.module].index(bug.fix_old)].count("\n") + 1
            yield Action("view_file", {"path": path, "start_line": max(1, first - 6), "end_line": first + 8}, reasoning=reasoning)
            yield Action("str_replace_edit", {"path": path, "old": bug.fix_old, "new": bug.fix_new},
                         reasoning=f"This does not do what the docstring says:\n{bug.fix_old}It should read:\n{bug.fix_new}")
        if task.feature is not None:
            yield from self._write_feature()
        yield Action("run_tests", {}, reasoning="Run the tests to check the fix and that nothing else broke.")
        fixed = ", ".join(f"`{bug.mutation.function or 'the module'}` in `{task.package}/{bug.module}.py`" for bug in task.bugs)
        if task.feature is not None:
            fixed += f" and added `{task.feature.name}` to `{task.package}/{task.feature.module}.py`"
        yield Action(None, answer=f"Fixed {fixed}; the reported examples now give the documented results and the tests pass.",
                     reasoning="The tests pass; summarise the fix.")

    def _write_feature(self) -> Iterator[Action]:
        """Read the tests that specify the missing function, find where it belongs, write it, run its tests."""
        wanted, package = self.task.feature, self.task.package
        tests, path = f"tests/test_{wanted.module}.py", f"{package}/{wanted.module}.py"
        yield Action("view_file", {"path": tests},
                     reasoning=f"The issue asks for `{wanted.name}`; its tests in `{tests}` say what it must return.")
        yield Action("view_file", {"path": path}, reasoning=f"Read `{path}` to see where `{wanted.name}` belongs and the style of its neighbours.")
        yield Action("str_replace_edit", {"path": path, "old": wanted.fix_old, "new": wanted.fix_new},
                     reasoning=f"Add `{wanted.signature}` as the issue's docstring and the tests specify it.")
        yield Action("run_tests", {"target": tests}, reasoning=f"Check `{wanted.name}` against the tests that specify it.")

    def close(self) -> None:
        """Stop the shell and delete the workspace (safe to call twice)."""
        if self._shell is not None:
            self._shell.close()
            self._shell = None
        if self.box is not None:
            self.box.close()

    # Tools.

    def _workspace(self) -> Sandbox:
        if self.box is None or self.box.closed:
            raise ToolFailure("the episode has no workspace (call reset first)")
        return self.box

    def _text(self, path: str) -> str:
        try:
            data = self._workspace().read(path)
        except FileNotFoundError:
            raise ToolFailure(f"{path}: no such file") from None
        except IsADirectoryError:
            raise ToolFailure(f"{path} is a directory; list it with bash (ls {path})") from None
        except (ValueError, OSError) as err:
            hint = " (list a directory with bash: ls)" if "not a regular file" in str(err) else ""
            raise ToolFailure(f"{path}: {err}{hint}") from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolFailure(f"{path} is not UTF-8 text") from None

    @tool("Run a bash command in the repository (a persistent shell in a sandbox without network).",
          {"type": "object", "properties": {"command": {"type": "string", "minLength": 1}}, "required": ["command"]},
          timeout=90.0)
    def bash(self, command: str) -> str:
        box = self._workspace()
        if self._shell is None:
            self._shell = box.shell()
        return clip(self._shell.run(command, timeout=60.0).text())

    @tool("Show a file of the repository with line numbers, optionally only lines start_line..end_line.",
          {"type": "object", "properties": {"path": {"type": "string", "minLength": 1, "maxLength": 1000},
                                            "start_line": {"type": "integer", "minimum": 1},
                                            "end_line": {"type": "integer", "minimum": 1}},
           "required": ["path"]}, timeout=10.0)
    def view_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        lines = self._text(path).splitlines()
        if not lines:
            return f"{path} is empty"
        if start_line > len(lines):
            raise ToolFailure(f"{path} has {len(lines)} lines; start_line {start_line} is past the end")
        last = min(len(lines), end_line or len(lines), start_line + MAX_VIEW_LINES - 1)
        if last < start_line:
            raise ToolFailure(f"end_line {end_line} is before start_line {start_line}")
        shown = "\n".join(f"{n:5}  {lines[n - 1]}" for n in range(start_line, last + 1))
        note = f"\n[lines {start_line}-{last} of {len(lines)}]" if (start_line, last) != (1, len(lines)) else ""
        return clip(shown + note)

    @tool("Replace the text `old` with `new` in a file; `old` must occur exactly once (include context lines).",
          {"type": "object", "properties": {"path": {"type": "string", "minLength": 1, "maxLength": 1000},
                                            "old": {"type": "string", "minLength": 1}, "new": {"type": "string"}},
           "required": ["path", "old", "new"]}, timeout=10.0)
    def str_replace_edit(self, path: str, old: str, new: str) -> str:
        text = self._text(path)
        count = text.count(old)
        if count != 1:
            raise ToolFailure(f"`old` occurs {count} times in {path}; it must occur exactly once"
                              + (" (add surrounding lines to make it unique)" if count else ""))
        start = text.index(old)
        updated = text[:start] + new + text[start + len(old):]
        try:
            self._workspace().write(path, updated)
        except (ValueError, OSError) as err:
            raise ToolFailure(f"{path}: {err}") from None
        first = updated[:start].count("\n") + 1
        lines = updated.splitlines()
        last = min(len(lines), first + new.count("\n") + 2)
        context = "\n".join(f"{n:5}  {lines[n - 1]}" for n in range(max(1, first - 2), last + 1))
        return clip(f"edited {path}; lines {max(1, first - 2)}-{last} now read:\n{context}")

    @tool("Run the tests with pytest: all of them, or one file or test id (e.g. tests/test_x.py::test_y_1).",
          {"type": "object", "properties": {"target": {"type": "string", "maxLength": 1000}}}, timeout=90.0)
    def run_tests(self, target: str = "") -> str:
        box = self._workspace()
        if target and (not TARGET.match(target) or target.startswith("-")):
            raise ToolFailure(f"target {target!r} is not a test path or id (like tests/test_x.py::test_y_1)")
        argv = grading.pytest_argv("-q", "--tb=short", "--timeout=10", *([target] if target else []))
        return clip(box.run(argv, timeout=60.0, env=grading.PYTEST_ENV).text())
