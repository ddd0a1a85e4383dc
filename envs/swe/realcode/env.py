"""The real-code swe environment: a pinned open-source package with one mined bug and an issue.

The tools are the swe domain's (`bash`, `view_file`, `str_replace_edit`, `run_tests`, from `SweEnv`);
reset, grading and the scripted solution are this family's (`task.py`, `grade.py`).
"""
from __future__ import annotations

import json
from typing import Iterator

from jointrl.envs.base import Action
from jointrl.envs.sandbox import Sandbox
from jointrl.envs.swe import grading
from jointrl.envs.swe.env import SYSTEM, TARGET, TOOL_LIMITS, SweEnv
from jointrl.envs.swe.realcode import grade
from jointrl.envs.swe.realcode.task import build


class RealCodeEnv(SweEnv):
    """Fix one bug mined from a real package so that its behaviour is the released one again."""

    def __init__(self, difficulty: str = "easy", family: str = "toolz", **kwargs):
        super().__init__(difficulty=difficulty, family=family, **kwargs)
        self._ended = False  # closed: the workspace is gone and what was last graded stands

    def _reset(self, seed: int) -> list[dict]:
        self.close()
        self.task = build(self.family, self.difficulty, seed)
        self._ended = False
        self._graded, self._last = None, {}
        task = self.task
        user = (f"{task.issue}\nThe repository holds `{task.package}` {task.pin.version} (`{task.package}/`) and its "
                f"test suite (`{task.pin.workspace_tests}/`); it has {len(task.files)} files.\n")
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]

    def _workspace(self) -> Sandbox:
        # The workspace is made on the first tool call: an episode that calls no tool is graded on the task's
        # files as they are, without writing them out.
        if self.box is None and self.task is not None and not self._ended:
            self.box = Sandbox(TOOL_LIMITS, files=self.task.files)
        return super()._workspace()

    def close(self) -> None:
        """Stop the shell and delete the workspace (safe to call twice)."""
        super().close()
        self._ended = True

    def task_key(self) -> str:
        """The bugs (file and fix), whatever the issue says: what a policy could memorise."""
        task = self.task
        return json.dumps([self.family, sorted((f.path, f.old, f.new) for f in task.fixes)] if task else None)

    def _signals(self) -> dict[str, float]:
        if self.task is None or self._ended or (self.box is not None and self.box.closed):
            return dict(self._last) if self._last else {"success": 0.0}
        task = self.task
        if self.box is None:
            package = grade.package_of({p: t for p, t in task.files.items() if p.startswith(task.package + "/")})
            modified = False
        else:
            # Nothing the episode started may still be running (and rewriting files) while they are read.
            self.box.stop()
            package = grading.package_files(self.box, task.package)
            modified = grade.tests_modified(self.box, task)
        key = grading.fingerprint(package)
        if self._graded is None or self._graded[0] != key:
            self._graded = (key, grade.passing(task, package))
        self._last = grade.signals(task, self._graded[1], modified, grading.runner_tampering(package))
        return dict(self._last)

    def _solution(self) -> Iterator[Action]:
        task = self.task
        state = dict(task.files)
        for bug, fix in zip(task.bugs, task.fixes):
            function = bug["function"] or "the module code"
            name = bug["function"].split(".")[-1]
            if self.difficulty != "easy" and name:
                yield Action("bash", {"command": f"grep -rn 'def {name}\\b' {task.package}"},
                             reasoning=f"A reported call goes through `{name}`; find where it is defined.")
            first = state[fix.path][: state[fix.path].index(fix.old)].count("\n") + 1
            yield Action("view_file", {"path": fix.path, "start_line": max(1, first - 8), "end_line": first + 8},
                         reasoning=f"Read `{function}` in `{fix.path}`.")
            yield Action("str_replace_edit", {"path": fix.path, "old": fix.old, "new": fix.new},
                         reasoning=f"This line is wrong:\n{fix.old}It should read:\n{fix.new}")
            state[fix.path] = state[fix.path].replace(fix.old, fix.new)
        test = task.bugs[0]["f2p_tests"][0]
        target = test if TARGET.match(test) else test.split("::")[0]
        yield Action("run_tests", {"target": target}, reasoning="Run a test that failed to check the fix.")
        fixed = ", ".join(f"`{b['function'] or 'module code'}` in `{b['file']}`" for b in task.bugs)
        yield Action(None, answer=f"Fixed {fixed}; the reported behaviour is the released one again.",
                     reasoning="The test passes; summarise the fix.")
