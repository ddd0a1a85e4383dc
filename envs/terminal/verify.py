"""Score a terminal task: evaluate its checks against a copy of the final workspace, fact by fact.

The copy is taken when the episode is scored, so nothing still running in the episode's shell can
change it midway. Files are read without following symlinks anywhere on their path (a link planted in
the workspace cannot point the checker at host files), sizes are capped, and commands the checks need
(git, `make`, the writes of a verification stage) run inside the copy's own sandbox, never on the host.
"""
from __future__ import annotations

import csv
import gzip
import io
import os
import sqlite3
import stat
import tarfile
from dataclasses import dataclass

from jointrl.envs.terminal.gitcheck import git_results
from jointrl.envs.terminal.task import Answer, Check, Content, File, Git, Missing, Mode, Only, Run, Sql, Tar
from jointrl.envs.terminal.workspace import READ_CAP, Workspace

# Checks run with a throwaway home and no global git config, so nothing in the workspace configures them.
CHECK_ENV = {"HOME": "/tmp", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "LC_ALL": "C"}


@dataclass(frozen=True)
class Fact:
    """One checked fact: what it says, whether it holds, and whether it guards the start state."""

    label: str
    ok: bool
    keep: bool = False


def normalise_answer(text: str | None) -> str:
    """Lower-case, trim quotes/backticks/a final full stop, and collapse whitespace."""
    text = (text or "").strip().rstrip(".").strip().strip("`'\"")
    return " ".join(text.split()).casefold()


def as_bytes(content: Content) -> bytes:
    """Text is compared as UTF-8."""
    return content.encode() if isinstance(content, str) else content


def text_lines(data: bytes) -> list[str]:
    """Lines with trailing blanks and carriage returns dropped, and trailing empty lines removed."""
    lines = [line.rstrip() for line in data.decode("utf-8", errors="replace").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _cells_equal(got: str, want: str, tolerance: float) -> bool:
    got, want = got.strip(), want.strip()
    if got == want:
        return True
    try:
        return abs(float(got) - float(want)) <= tolerance
    except ValueError:
        return False


def table_facts(check: File, data: bytes | None) -> list[Fact]:
    """One fact per expected row (header included) plus one that no row is extra."""
    want = list(csv.reader(text_lines(as_bytes(check.content)), delimiter=check.delimiter))
    got = list(csv.reader(text_lines(data), delimiter=check.delimiter)) if data is not None else []
    facts = []
    for i, row in enumerate(want):
        ok = i < len(got) and len(got[i]) == len(row) and all(_cells_equal(g, w, check.tolerance) for g, w in zip(got[i], row))
        facts.append(Fact(f"{check.path} row {i + 1} is {check.delimiter.join(row)!r}", ok, check.keep))
    facts.append(Fact(f"{check.path} has {len(want)} rows", data is not None and len(got) == len(want), check.keep))
    return facts


def file_facts(view: Workspace, check: File) -> list[Fact]:
    """Compare one file by its match mode."""
    data = view.read(check.path)
    if check.match == "table":
        return table_facts(check, data)
    if check.match == "exact":
        ok = data == as_bytes(check.content)
    elif check.match == "text":
        ok = data is not None and text_lines(data) == text_lines(as_bytes(check.content))
    else:
        raise ValueError(f"unknown match mode {check.match!r} for {check.path}")
    return [Fact(f"{check.path} has the expected content", ok, check.keep)]


def only_facts(view: Workspace, check: Only) -> list[Fact]:
    """Nothing but the expected files under the root; and the directories exact when they are given."""
    listing = view.walk(check.root)
    files, dirs = listing if listing is not None else (set(), set())
    extra = sorted(files - check.paths)
    facts = [Fact(f"nothing else under {check.root}/ (found {extra[:3]})", listing is not None and not extra, check.keep)]
    if check.dirs is not None:
        ok = listing is not None and dirs == check.dirs
        facts.append(Fact(f"the directories under {check.root}/ are as expected", ok, check.keep))
    return facts


def _open_tar(data: bytes) -> tarfile.TarFile:
    # Only gzip, decompressed with a cap, or plain tar: a compression bomb must not exhaust the checker's memory.
    if data[:2] == b"\x1f\x8b":
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            data = stream.read(READ_CAP + 1)
        if len(data) > READ_CAP:
            raise tarfile.TarError("archive too large")
    return tarfile.open(fileobj=io.BytesIO(data), mode="r:")


def tar_members(data: bytes) -> dict[str, bytes] | None:
    """Regular-file members of a tar archive by normalised name ('./a/b' → 'a/b'); None if unreadable."""
    try:
        with _open_tar(data) as archive:
            members = {}
            for member in archive.getmembers():
                if member.isfile():
                    name = os.path.normpath(member.name).lstrip("/")
                    members[name] = archive.extractfile(member).read()
            return members
    except (tarfile.TarError, OSError, EOFError, ValueError):
        return None


def tar_facts(label: str, data: bytes | None, expected: dict, keep: bool) -> list[Fact]:
    """The archive reads, has each expected member with its content (nested archives recursively), and no others."""
    members = tar_members(data) if data is not None else None
    readable = members is not None
    facts = [Fact(f"{label} is a readable tar archive", readable, keep)]
    members = members or {}
    for name, want in sorted(expected.items()):
        if isinstance(want, dict):
            facts += tar_facts(f"{label}:{name}", members.get(name), want, keep)
        else:
            facts.append(Fact(f"{label} holds {name} with the expected content", members.get(name) == want, keep))
    extra = sorted(set(members) - set(expected))
    facts.append(Fact(f"{label} holds nothing else (found {extra[:3]})", readable and not extra, keep))
    return facts


def sql_fact(view: Workspace, check: Sql) -> Fact:
    """Run the query on an in-memory copy of the database file."""
    data = view.read(check.db)
    rows = None
    if data is not None and data[18:20] == b"\x02\x02":
        # A database left in WAL mode (its log already checkpointed on close) reads as a rollback-journal one.
        data = data[:18] + b"\x01\x01" + data[20:]
    if data is not None:
        connection = sqlite3.connect(":memory:")
        try:
            connection.deserialize(data)
            rows = tuple(tuple(r) for r in connection.execute(check.query).fetchall())
        except sqlite3.Error:
            rows = None
        finally:
            connection.close()
    return Fact(f"{check.db}: {check.query} gives the expected rows", rows == check.rows, check.keep)


def verify(checks: list[Check], copy, answer: str | None, recorded: dict[str, str]) -> list[Fact]:
    """Evaluate `checks` in order against `copy` (a Sandbox over a copy of the workspace; None if all are Answers)."""
    view = Workspace(copy.workspace) if copy is not None else None
    facts: list[Fact] = []
    pending: list[Git] = []
    for check in checks:
        if isinstance(check, Git):
            pending.append(check)
            continue
        if pending:
            facts += _git_facts(copy, pending, recorded)
            pending = []
        if isinstance(check, Run):
            copy.run(check.command, timeout=check.timeout, env=CHECK_ENV)
        elif isinstance(check, Answer):
            ok = normalise_answer(answer) == normalise_answer(check.expected)
            facts.append(Fact(f"the answer is {check.expected!r}", ok, check.keep))
        elif isinstance(check, File):
            facts += file_facts(view, check)
        elif isinstance(check, Missing):
            facts.append(Fact(f"{check.path} is gone", view.lstat(check.path) is None, check.keep))
        elif isinstance(check, Mode):
            info = view.lstat(check.path)
            ok = info is not None and not stat.S_ISLNK(info.st_mode) and stat.S_IMODE(info.st_mode) == check.mode
            facts.append(Fact(f"{check.path} has mode {check.mode:o}", ok, check.keep))
        elif isinstance(check, Only):
            facts += only_facts(view, check)
        elif isinstance(check, Tar):
            facts += tar_facts(check.path, view.read(check.path), check.members, check.keep)
        elif isinstance(check, Sql):
            facts.append(sql_fact(view, check))
        else:
            raise TypeError(f"unknown check {check!r}")
    if pending:
        facts += _git_facts(copy, pending, recorded)
    return facts


def _git_facts(copy, checks: list[Git], recorded: dict[str, str]) -> list[Fact]:
    results = git_results(copy, checks, recorded, CHECK_ENV)
    return [Fact(f"git {c.expr} as expected", ok, c.keep) for c, ok in zip(checks, results)]


def score(facts: list[Fact]) -> tuple[float, float]:
    """(success, state_ok): success needs every fact; state_ok is the goal fraction scaled by the kept fraction."""
    goals = [f.ok for f in facts if not f.keep]
    kept = [f.ok for f in facts if f.keep]
    goal_part = sum(goals) / len(goals) if goals else 0.0
    keep_part = sum(kept) / len(kept) if kept else 1.0
    return float(all(goals) and all(kept) and bool(goals)), goal_part * keep_part
