"""The sandbox every model-written command runs in: one episode's workspace and the commands run there.

A `Sandbox` owns a fresh host directory that appears inside as `/workspace`. `run()` starts a new
confined process tree per command (how it is confined: `confine`); `shell()` keeps one
bash alive between commands (`session`). Inside is a minimal read-only root (see confine.py) with no
network; rlimits, and a cgroup where there is one, bound time, memory, processes, files and disk; the wall
clock kills the whole tree. `sandbox_backend()` says whether bubblewrap or the unshare fallback is used.

Why a uid per sandbox. Root is exempt from RLIMIT_NPROC, so a fork bomb run as root would not be
contained. When this process is root, each Sandbox's commands run as their own unprivileged host uid,
so the process limit counts that sandbox's processes and nothing else.
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
import weakref
from functools import lru_cache
from pathlib import Path

from jointrl.envs.sandbox.cgroup import CGROUP_ROOT, EpisodeGroup
from jointrl.envs.sandbox.paths import copy_tree, open_in, open_up, regular
from jointrl.envs.sandbox.process import Confinement, alive, collect, kill_tree
from jointrl.envs.sandbox.runtime import DISTRIBUTIONS
from jointrl.envs.sandbox.session import BashSession
from jointrl.envs.sandbox.types import MAX_COMMAND_BYTES, Limits, RunResult, SandboxUnavailable

PREFIX = "jointrl-sandbox-"
# Per-sandbox host uids when running as root: far above login, system and usual subordinate-id ranges.
UID_BASE, UID_SPAN = 1 << 30, 1 << 24


def _cleanup(box: Confinement, sessions: list) -> None:
    for session in list(sessions):
        session.close()
    for proc in list(box.live):
        kill_tree(proc)
    box.live.clear()
    if box.group is not None:
        box.group.remove()
    if box.uid is None and box.workspace.exists():
        # Not root: a directory the sandbox made unreadable or unwritable would block removal.
        open_up(box.workspace)
    if box.base.exists():
        shutil.rmtree(box.base)


class Sandbox:
    """One episode's confined workspace: run commands in it, keep a shell in it, read and write its files."""

    def __init__(self, limits: Limits | None = None, files: dict[str, str | bytes] | None = None,
                 backend: str | None = None, packages: dict[str, Path] | None = None,
                 site: tuple[str, ...] = DISTRIBUTIONS):
        self.limits = limits or Limits()
        backend = backend or sandbox_backend()
        if backend not in ("bwrap", "unshare"):
            raise ValueError(f"unknown sandbox backend {backend!r}; expected 'bwrap' or 'unshare'")
        uid = UID_BASE + secrets.randbelow(UID_SPAN) if os.geteuid() == 0 else None
        # The owner's pid in the name lets a successor sweep what a killed worker left (sweep_orphans).
        base = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        # packages: host folders the sandbox's Python imports by these names (read-only), e.g. a domain's API.
        # site: the installed distributions its Python imports (runtime.py); each costs the sandbox's start a
        # few mounts, so a domain whose tasks need none passes ().
        self._box = Confinement(backend, base, uid, site, packages, _episode_group(self.limits))
        self._sessions: list[BashSession] = []
        self._finalizer = weakref.finalize(self, _cleanup, self._box, self._sessions)
        try:
            (base / "root").mkdir()  # the unshare fallback builds the sandbox's root on it
            self.workspace.mkdir()
            self._box.own(str(self.workspace))
            for path, content in (files or {}).items():
                self.write(path, content)
        except BaseException:
            self.close()
            raise

    @property
    def workspace(self) -> Path:
        """Host path of the workspace (`/workspace` inside)."""
        return self._box.workspace

    @property
    def backend(self) -> str:
        """'bwrap' or 'unshare': what confines this sandbox's commands."""
        return self._box.backend

    @property
    def uid(self) -> int:
        """The host uid the sandbox's processes run as."""
        return os.geteuid() if self._box.uid is None else self._box.uid

    def write(self, path: str, content: str | bytes, mode: int | None = None) -> None:
        """Write a file in the workspace from the host side, creating parent directories."""
        data = content.encode() if isinstance(content, str) else content
        fd = open_in(self.workspace, path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK, 0o644, box=self._box)
        regular(fd, path)
        with os.fdopen(fd, "wb") as f:
            f.truncate(0)
            f.write(data)
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            if self._box.uid is not None:
                os.fchown(f.fileno(), self._box.uid, self._box.uid)

    def read(self, path: str) -> bytes:
        """Read a workspace file from the host side; a path leading out of the workspace raises ValueError."""
        fd = open_in(self.workspace, path, os.O_RDONLY | os.O_NONBLOCK)
        regular(fd, path)
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def exists(self, path: str) -> bool:
        """Whether `path` exists in the workspace (links followed only within it)."""
        try:
            os.close(open_in(self.workspace, path, os.O_RDONLY | os.O_NONBLOCK))
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def run(self, command: str | list[str], timeout: float | None = None, stdin: str | None = None,
            env: dict[str, str] | None = None, limits: Limits | None = None) -> RunResult:
        """Run one command (a string goes to `bash -c`) in a fresh confined process tree in /workspace."""
        if not self._finalizer.alive:
            raise RuntimeError("this sandbox is closed")
        limits = limits or self.limits
        wall = limits.wall_seconds if timeout is None else timeout
        argv = ["bash", "-c", command] if isinstance(command, str) else [str(a) for a in command]
        size = sum(len(a.encode()) for a in argv)
        if size > MAX_COMMAND_BYTES:
            raise ValueError(f"command of {size} bytes is over {MAX_COMMAND_BYTES}; write long scripts to a file "
                             "with Sandbox.write() and run that")
        started = time.monotonic()
        with tempfile.TemporaryFile() as feed:
            if stdin is not None:
                feed.write(stdin.encode())
                feed.seek(0)
            proc = self._box.spawn(argv, limits, env, feed if stdin is not None else subprocess.DEVNULL)
        try:
            out, err, timed_out = collect(proc, limits.output_bytes, wall)
        finally:
            kill_tree(proc)
            self._box.live.discard(proc)
        return RunResult(stdout=out.text(), stderr=err.text(), exit_code=None if timed_out else proc.returncode,
                         timed_out=timed_out, truncated=out.truncated or err.truncated,
                         duration=time.monotonic() - started, timeout=wall, note=self._box.after_command(self.limits))

    def shell(self, limits: Limits | None = None, env: dict[str, str] | None = None) -> BashSession:
        """A persistent bash in this sandbox: cwd, variables and functions carry over between commands."""
        if not self._finalizer.alive:
            raise RuntimeError("this sandbox is closed")
        session = BashSession(self._box, limits or self.limits, env)
        self._sessions.append(session)
        return session

    def stop(self) -> None:
        """Kill every process of this sandbox (a shell restarts on its next command): the workspace holds still."""
        for session in list(self._sessions):
            session.kill()
        self._box.kill_everything()

    def copy_workspace(self, dest: Path) -> None:
        """Stop every process, then copy the workspace to `dest` (links as links, special files skipped, bounded)."""
        self.stop()
        copy_tree(self.workspace, Path(dest))

    def close(self) -> None:
        """Kill everything still running and delete the workspace; safe to call twice."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        """Whether close() has run (or the sandbox was collected)."""
        return not self._finalizer.alive

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def fresh_sandbox_from(src: Sandbox | Path, limits: Limits | None = None) -> Sandbox:
    """A new sandbox whose workspace is a copy of `src`'s (or of a host directory)."""
    if isinstance(src, Sandbox):
        # Nothing of the episode may still be running while its workspace is read for scoring.
        src.stop()
        limits = limits or src.limits
        origin, backend, packages, site = src.workspace, src.backend, src._box.packages, src._box.site
    else:
        origin, backend, packages, site = Path(src), None, None, DISTRIBUTIONS
        if not origin.is_dir():
            raise ValueError(f"{origin} is not a directory to copy a workspace from")
    fresh = Sandbox(limits, backend=backend, packages=packages, site=site)
    copy_tree(origin, fresh.workspace, max_bytes=fresh.limits.workspace_bytes)
    for directory, dirs, files in os.walk(fresh.workspace):
        for name in dirs + files:
            fresh._box.own(os.path.join(directory, name))
    return fresh


def _probe(backend: str) -> str | None:
    """None when `backend` can run a command here, else why not."""
    if shutil.which(backend) is None:
        return "not installed"
    try:
        with Sandbox(Limits(wall_seconds=30), backend=backend) as box:
            result = box.run("true")
    except OSError as err:
        return str(err)
    return None if result.ok else (result.stderr.strip() or result.text())


@lru_cache(maxsize=None)
def sandbox_backend() -> str:
    """Which confinement runs commands here: 'bwrap' when it works, else 'unshare'."""
    problems = []
    for backend in ("bwrap", "unshare"):
        problem = _probe(backend)
        if problem is None:
            return backend
        problems.append(f"{backend}: {problem}")
    raise SandboxUnavailable(
        "no sandbox backend works on this machine (" + "; ".join(problems) + "). Install bubblewrap "
        "(apt-get install bubblewrap) and make sure user namespaces are allowed (user.max_user_namespaces > 0).")


def _episode_group(limits: Limits) -> EpisodeGroup | None:
    """The episode's cgroup when cgroup v2 is usable here (see cgroup.py), else None: the rlimit fallback."""
    if CGROUP_ROOT is None:
        return None
    try:
        return EpisodeGroup(CGROUP_ROOT, limits.episode_memory_bytes, limits.episode_processes)
    except OSError:
        return None


def sweep_orphans(root: str | None = None) -> list[str]:
    """Delete the sandbox folders whose owning process is gone (a worker killed with SIGKILL); their paths."""
    root = root or tempfile.gettempdir()
    swept = []
    for entry in os.scandir(root):
        match = re.fullmatch(rf"{PREFIX}(\d+)-\w+", entry.name)
        if not match or not entry.is_dir(follow_symlinks=False) or alive(int(match.group(1))):
            continue
        # Its processes died with their init (the parent-death signal); a folder the sandbox closed to
        # its owner must be opened before it can be removed.
        workspace = Path(entry.path) / "workspace"
        if os.geteuid() != 0 and workspace.is_dir() and not workspace.is_symlink():
            open_up(workspace)
        shutil.rmtree(entry.path, ignore_errors=True)
        swept.append(entry.path)
    if CGROUP_ROOT is not None:
        for group in CGROUP_ROOT.path.glob("jointrl-episode-*"):
            match = re.fullmatch(r"jointrl-episode-(\d+)-\w+", group.name)
            if match and not alive(int(match.group(1))):
                try:
                    group.rmdir()  # its processes died with their parent-death signal
                    swept.append(str(group))
                except OSError:
                    continue
    return swept

