"""The terminal env: a generated task in a sandboxed workspace, a persistent `bash` tool, and final-state scoring."""
from __future__ import annotations

import random
from typing import Iterator

from jointrl.envs.base import Action, Env, ToolFailure, ToolResult, tool
from jointrl.envs.terminal.families import GENERATORS
from jointrl.envs.terminal.prepare import prepare
from jointrl.envs.terminal.task import Answer, Task
from jointrl.envs.terminal.verify import Fact, score, verify

COMMAND_SECONDS = 20.0  # wall-clock limit of one bash command
OBSERVATION_CHARS = 8000
DIFFICULTIES = ("easy", "medium", "hard", "long")  # the most of one command's output the agent sees
# A fixed identity and a no-op editor, so `git commit` works and `git merge` never waits on an editor.
SHELL_ENV = {
    "GIT_AUTHOR_NAME": "Terminal User",
    "GIT_AUTHOR_EMAIL": "user@example.com",
    "GIT_COMMITTER_NAME": "Terminal User",
    "GIT_COMMITTER_EMAIL": "user@example.com",
    "GIT_EDITOR": "true",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "LC_ALL": "C",
}

SYSTEM = """You are working in a Linux shell on the task below. Its files are in the current directory, \
/workspace, the only place you can write; there is no network.

Tool: `bash` runs one command line in a persistent bash session (the working directory and exported \
variables carry over between calls). Each command may run for {seconds:g} seconds; longer output is cut \
to its first and last parts. coreutils, find, grep, sed, awk, tar, gzip, git, sqlite3 and make are \
installed. Nothing is interactive: pass file contents and messages on the command line.

What is checked is {checked}. When you are done, reply with a message that calls no tool: {finish}"""


def clip(text: str, limit: int = OBSERVATION_CHARS) -> str:
    """Keep the head and tail of a long output with a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 4
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[-tail:]}"


class TerminalEnv(Env):
    """A shell task of one family and difficulty, built from the seed in a fresh sandbox workspace."""

    def __init__(self, difficulty: str = "easy", family: str = "organize-files", **kwargs):
        super().__init__(difficulty=difficulty, **kwargs)
        if family not in GENERATORS:
            raise ValueError(f"unknown terminal family {family!r}; known: {', '.join(sorted(GENERATORS))}")
        if difficulty not in DIFFICULTIES:
            raise ValueError(f"unknown difficulty {difficulty!r}; known: {', '.join(DIFFICULTIES)}")
        self.family = family
        self.task: Task | None = None
        self.sandbox = None  # the episode's Sandbox, made at reset
        self.session = None  # its BashSession, started by the first bash call
        self.recorded: dict[str, str] = {}
        self.commands_run = 0
        self._last_output = ""
        self._scored: tuple | None = None

    def _reset(self, seed: int) -> list[dict]:
        from jointrl.envs.sandbox import Sandbox

        self.close()
        rng = random.Random(f"terminal/{self.family}/{self.difficulty}/{seed}")
        self.task = GENERATORS[self.family](self.difficulty, rng)
        self.commands_run, self._last_output, self._scored, self.recorded = 0, "", None, {}
        # Shell tasks import nothing beyond the standard library: no task packages, a sandbox's start 47 mounts
        # lighter (a third of its CPU).
        self.sandbox = Sandbox(files=self.task.files, site=())
        self.recorded = prepare(self.sandbox, self.task, SHELL_ENV)
        answers = any(isinstance(c, Answer) for c in self.task.checks)
        checked = "your final answer" if answers else "the final state of the files (names, contents, modes, repository, database)"
        system = SYSTEM.format(seconds=COMMAND_SECONDS, checked=checked, finish=self.task.finish)
        return [{"role": "system", "content": system}, {"role": "user", "content": self.task.prompt}]

    @tool(
        "Run a bash command line in the task's persistent shell (cwd /workspace at the start); returns its output and exit code.",
        {"type": "object", "properties": {"command": {"type": "string", "minLength": 1, "description": "the command line to run"}},
         "required": ["command"]},
        timeout=COMMAND_SECONDS + 10,
    )
    def bash(self, command: str) -> ToolResult:
        """Run `command` in the episode's shell, bounded in time and in the output shown."""
        if self.sandbox is None:
            raise ToolFailure("there is no task: the episode has not been reset")
        if self.session is None:
            # The identity is the shell's environment, so a shell restarted after a timeout or `exit` has it too.
            self.session = self.sandbox.shell(env=SHELL_ENV)
        self.commands_run += 1
        result = self.session.run(command, timeout=COMMAND_SECONDS)
        self._last_output = result.stdout
        return ToolResult(content=clip(result.text()))

    def facts(self) -> list[Fact]:
        """Every checked fact of the current state, scored on a fresh copy of the workspace (none for answers alone)."""
        from jointrl.envs.sandbox import fresh_sandbox_from

        if self.task is None or self.sandbox is None:
            raise RuntimeError("there is no workspace to score: call reset() first, and score before close()")
        if all(isinstance(check, Answer) for check in self.task.checks):
            return verify(self.task.checks, None, self.final_answer, self.recorded)  # no file is read: no copy
        try:
            copy = fresh_sandbox_from(self.sandbox)
        except OSError as err:
            # The agent can make its workspace uncopyable (a directory without permissions, say): nothing holds.
            return [Fact(f"the workspace can be copied for scoring ({err})", False)]
        try:
            return verify(self.task.checks, copy, self.final_answer, self.recorded)
        finally:
            copy.close()

    def _signals(self) -> dict[str, float]:
        # Scoring copies the workspace and may run make or git; repeat calls on an unchanged episode reuse it.
        key = (self.tool_calls, self.final_answer)
        if self._scored is None or self._scored[0] != key:
            success, state_ok = score(self.facts())
            self._scored = (key, {"success": success, "state_ok": state_ok})
        return {**self._scored[1], "commands_run": float(self.commands_run)}

    def _solution(self) -> Iterator[Action]:
        for step in self.task.steps:
            yield Action("bash", {"command": step.command}, reasoning=step.reasoning)
        if self.task.answer_from_output:
            answer = self._last_output.strip()
            yield Action(None, answer=answer, reasoning="The last command printed the answer.")
        else:
            yield Action(None, answer="Done: the files are in the requested state.",
                         reasoning="Everything asked for is in place.")

    def close(self) -> None:
        """Stop the shell and delete the workspace; safe to call twice."""
        if self.session is not None:
            self.session.close()
            self.session = None
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
