"""What a terminal task is: its starting workspace, prompt, scripted commands, and the checks on the final state.

A generator returns a `Task`. Checks are plain data evaluated by `verify.py` against a copy of the
workspace taken when the episode is scored; every expected value in them is computed by the generator
from the seed, never read back from a file the agent could edit. A check with `keep=True` guards
something that held at the start and must still hold (an untouched distractor); the others are goals.
"""
from __future__ import annotations

import base64
import shlex
from dataclasses import dataclass, field
from typing import Union

Content = Union[str, bytes]


@dataclass(frozen=True)
class Answer:
    """The final answer, normalised (case, surrounding quotes/backticks, spacing), equals `expected`."""

    expected: str
    keep: bool = field(default=False, kw_only=True)


@dataclass(frozen=True)
class File:
    """`path` is a regular file whose content matches: 'exact' bytes, 'text' (trailing blanks ignored), or 'table'."""

    path: str
    content: Content
    match: str = "text"
    delimiter: str = ","  # for match='table': cells are split on this; numeric cells compare within `tolerance`
    tolerance: float = 0.006
    keep: bool = field(default=False, kw_only=True)


@dataclass(frozen=True)
class Missing:
    """Nothing exists at `path`."""

    path: str
    keep: bool = field(default=False, kw_only=True)


@dataclass(frozen=True)
class Mode:
    """`path` exists, is not a symlink, and its permission bits (including setuid/setgid/sticky) equal `mode`."""

    path: str
    mode: int
    keep: bool = field(default=False, kw_only=True)


@dataclass(frozen=True)
class Only:
    """Under `root` lie exactly the files `paths` (workspace-relative) and, if given, exactly the directories `dirs`."""

    root: str
    paths: frozenset[str]
    dirs: frozenset[str] | None = None
    keep: bool = field(default=False, kw_only=True)


def tree(root: str, files: dict[str, Content], start: dict[str, Content], dirs=None) -> list:
    """Checks that `root` holds exactly `files` (and `dirs`); a file already so in the `start` workspace is a keep check."""
    checks: list = [File(path, content, match="exact", keep=start.get(path) == content) for path, content in sorted(files.items())]
    checks.append(Only(root, frozenset(files), None if dirs is None else frozenset(dirs)))
    return checks


@dataclass(frozen=True)
class Tar:
    """`path` is a tar archive (plain or gzip) whose regular-file members are exactly `members`.

    A member whose expected value is a dict is itself a tar archive checked the same way.
    """

    path: str
    members: dict[str, Union[bytes, dict]]
    keep: bool = field(default=False, kw_only=True)


@dataclass(frozen=True)
class Sql:
    """`query` on the SQLite database at `db` returns exactly `rows` (in order)."""

    db: str
    query: str
    rows: tuple[tuple, ...]
    keep: bool = field(default=False, kw_only=True)


@dataclass(frozen=True)
class Git:
    """A revision expression (`refs/heads/main^2`, `main:path`) in the repository `repo`, resolved by git itself.

    Set one expectation: the object id equals one the setup script printed (`recorded`) or the one `same_as`
    resolves to; a blob's text is `content`; a commit's subject line is `subject`; a tree holds exactly the
    names `entries`; or nothing resolves (`missing`).
    """

    expr: str
    recorded: str | None = None
    same_as: str | None = None
    content: str | None = None
    subject: str | None = None
    entries: tuple[str, ...] | None = None
    missing: bool = False
    repo: str = "repo"
    keep: bool = field(default=False, kw_only=True)

    def __post_init__(self):
        given = [self.recorded, self.same_as, self.content, self.subject, self.entries, self.missing or None]
        if sum(x is not None for x in given) != 1:
            raise ValueError(f"Git check of {self.expr!r} needs exactly one expectation")


@dataclass(frozen=True)
class Run:
    """Not a check: a stage of verification. Run `command` in the copy's sandbox (`make`, say); see `write_command`."""

    command: str
    timeout: float = 20.0


def write_command(writes: dict[str, Content]) -> str:
    """Bash lines replacing each path with its content; run in the sandbox, a planted symlink cannot reach the host."""
    lines = []
    for path, content in writes.items():
        quoted = shlex.quote(path)
        encoded = base64.b64encode(content.encode() if isinstance(content, str) else content).decode()
        lines.append(f"rm -rf -- {quoted}; mkdir -p -- \"$(dirname -- {quoted})\"; printf %s {encoded} | base64 -d > {quoted}\n")
    return "".join(lines)


Check = Union[Answer, File, Missing, Mode, Only, Tar, Sql, Git, Run]


@dataclass(frozen=True)
class Step:
    """One command of the scripted solution and why it is run."""

    command: str
    reasoning: str


@dataclass
class Task:
    """One generated task: the starting workspace, what to ask, how to solve it, how to check it."""

    prompt: str  # the user message: what to do, in terms of the files in the workspace
    finish: str  # how to end: what the final message must contain
    files: dict[str, Content]  # the starting workspace, relative path → content
    steps: list[Step]  # the scripted solution, run through the bash tool
    checks: list[Check]
    modes: dict[str, int] = field(default_factory=dict)  # permission bits to set after writing (files or dirs)
    setup: str | None = None  # a bash script run once in the sandbox at reset (building a git repo, say)
    answer_from_output: bool = False  # the demo's final answer is the last command's output

    def __post_init__(self):
        if not self.steps:
            raise ValueError("a task needs at least one scripted step")
        if not any(not isinstance(c, Run) and not c.keep for c in self.checks):
            raise ValueError("a task needs at least one goal check (keep=False), or doing nothing would pass")
