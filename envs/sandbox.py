"""The sandbox every model-written command runs in: one episode's workspace and the commands run there.

A `Sandbox` owns a fresh host directory that appears inside as `/workspace`. `run()` starts a new
confined process tree per command (how it is confined: `jointrl.envs.confine`); `shell()` keeps one
bash alive between commands (`jointrl.envs.bash_session`). Inside, the host filesystem is read-only,
there is no network, and rlimits bound time, memory, processes, file size and open files; the wall
clock kills the whole tree. `sandbox_backend()` says whether bubblewrap or the unshare fallback is used.

Why a uid per sandbox. Root is exempt from RLIMIT_NPROC, so a fork bomb run as root would not be
contained. When this process is root, each Sandbox's commands run as their own unprivileged host uid,
so the process limit counts that sandbox's processes and nothing else.

Why one launcher thread. A parent-death signal (bwrap's `--die-with-parent`) fires when the *thread*
that forked the child exits, and tools run in short-lived threads, so every process is started from
one long-lived thread. Host-side file access never follows a symlink out of the workspace (`_open_in`).
Output is read from both pipes at once and only the first `output_bytes` of each are kept.
"""
from __future__ import annotations

import errno
import os
import secrets
import selectors
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from jointrl.envs.confine import HOST_PATH, INSIDE, bwrap_argv, mount_plan, sandbox_env, unshare_argv

if TYPE_CHECKING:
    from jointrl.envs.bash_session import BashSession

# Per-sandbox host uids when running as root: far above login, system and usual subordinate-id ranges.
UID_BASE, UID_SPAN = 1 << 30, 1 << 24
# Linux caps one argument at 128 KiB, and the unshare fallback carries the command inside one.
MAX_COMMAND_BYTES = 100_000


class SandboxUnavailable(RuntimeError):
    """Neither bubblewrap nor unshare can build a sandbox on this machine."""


@dataclass
class Limits:
    """Resource limits of one command (for a BashSession: of the whole shell and each command's wait)."""

    wall_seconds: float = 10.0  # wall-clock timeout -> kill the whole process tree
    cpu_seconds: int = 10  # RLIMIT_CPU, per process
    memory_bytes: int = 1 << 30  # RLIMIT_AS, per process
    processes: int = 64  # RLIMIT_NPROC, counted over this sandbox's own uid (or user namespace)
    file_bytes: int = 64 << 20  # RLIMIT_FSIZE
    open_files: int = 256  # RLIMIT_NOFILE
    output_bytes: int = 64 << 10  # stdout and stderr each keep this much; the rest is drained and dropped
    tmp_bytes: int = 256 << 20  # size of the private /tmp and /dev/shm tmpfs (they live in host memory)


@dataclass
class RunResult:
    """What one command did: its (possibly truncated) output, exit code and timing."""

    stdout: str
    stderr: str
    exit_code: int | None  # None when the command was killed for its timeout
    timed_out: bool
    truncated: bool
    duration: float  # seconds, sandbox start-up included
    timeout: float | None = None  # the wall-clock limit it ran under
    note: str = ""  # what else the caller should know (e.g. a shell restarted and lost its state)

    @property
    def ok(self) -> bool:
        """The command finished in time with exit code 0."""
        return self.exit_code == 0 and not self.timed_out

    def text(self) -> str:
        """One observation string: stdout, then stderr, then status lines."""
        parts = [s if s.endswith("\n") else s + "\n" for s in (self.stdout, self.stderr) if s]
        if self.timed_out:
            parts.append(f"[timed out after {self.timeout:g}s]\n")
        else:
            parts.append(f"[exit code {self.exit_code}]\n")
        if self.truncated:
            parts.append("[output truncated]\n")
        if self.note:
            parts.append(f"[{self.note}]\n")
        return "".join(parts).rstrip("\n")


class Capture:
    """Keeps the first `cap` bytes of a stream and counts (but drops) the rest."""

    def __init__(self, cap: int):
        self.cap = cap
        self.kept = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        """Take the next piece of the stream."""
        room = self.cap - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]
        self.total += len(chunk)

    @property
    def truncated(self) -> bool:
        """Whether anything was dropped."""
        return self.total > self.cap

    def text(self) -> str:
        """The kept bytes as text (bad UTF-8 replaced), with a marker when something was dropped."""
        out = self.kept.decode("utf-8", errors="replace")
        if self.truncated:
            out += f"\n[... {self.total - self.cap} more bytes not shown]"
        return out


# Starting processes.

_launcher: tuple[int, ThreadPoolExecutor] | None = None
_launcher_lock = threading.Lock()


def _popen(argv: list[str], **kwargs) -> subprocess.Popen:
    """Popen from one long-lived thread, so a parent-death signal outlives the calling thread."""
    global _launcher
    with _launcher_lock:
        # A forked child inherits the executor but not its thread: make a new one there.
        if _launcher is None or _launcher[0] != os.getpid():
            _launcher = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="jointrl-sandbox-launcher"))
        executor = _launcher[1]
    return executor.submit(subprocess.Popen, argv, **kwargs).result()


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL a confined command's process group (its namespace's init among them); return once all are gone."""
    # Once reaped, the pid may belong to someone else: only signal a process not yet waited for.
    if proc.returncode is not None:
        return
    inits = _children(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    # A namespace's init finishes dying only after the kernel has killed and reaped all else inside it.
    deadline = time.monotonic() + 5.0
    while any(_alive(pid) for pid in inits) and time.monotonic() < deadline:
        time.sleep(0.005)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(child) for child in f.read().split()]
    except (OSError, ValueError):
        return []


def _alive(pid: int) -> bool:
    """Whether `pid` is a process that has not yet exited (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def collect(proc: subprocess.Popen, cap: int, timeout: float) -> tuple[Capture, Capture, bool]:
    """Read both pipes until EOF without deadlock, keeping `cap` bytes of each; kill at the deadline."""
    out, err = Capture(cap), Capture(cap)
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, out)
    selector.register(proc.stderr, selectors.EVENT_READ, err)
    deadline = time.monotonic() + timeout
    timed_out = False
    while selector.get_map():
        left = deadline - time.monotonic()
        if left <= 0 and not timed_out:
            timed_out = True
            kill_tree(proc)
            # Everything in the namespace is dead now; what is still in the pipes comes out at once.
            deadline = time.monotonic() + 2.0
            continue
        if left <= 0:
            break
        for key, _ in selector.select(left):
            chunk = os.read(key.fd, 1 << 16)
            if chunk:
                key.data.feed(chunk)
            else:
                selector.unregister(key.fileobj)
    selector.close()
    proc.stdout.close()
    proc.stderr.close()
    # Both pipes closed is not the end when the command closed them itself: hold it to the deadline too.
    try:
        proc.wait(max(deadline - time.monotonic(), 0) if not timed_out else None)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_tree(proc)
    return out, err, timed_out


class Confinement:
    """How to start a process inside one sandbox: backend, workspace, host uid. Holds no Sandbox reference."""

    def __init__(self, backend: str, base: Path, uid: int | None):
        self.backend = backend
        self.base = base
        self.workspace = base / "workspace"
        self.uid = uid
        self.live: set[subprocess.Popen] = set()

    def argv(self, command: list[str], limits: Limits, env: dict[str, str] | None) -> list[str]:
        """The host command line that runs `command` confined."""
        plan = mount_plan(self.workspace, limits, as_other=self.uid is not None)
        if self.backend == "bwrap":
            return bwrap_argv(plan, sandbox_env(env), limits, command, self.uid)
        return unshare_argv(plan, sandbox_env(env), limits, command, self.uid, self.base / "root")

    def spawn(self, command: list[str], limits: Limits, env: dict[str, str] | None, stdin) -> subprocess.Popen:
        """Start `command` confined, in its own process group, with piped stdout and stderr."""
        proc = _popen(self.argv(command, limits, env), stdin=stdin, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, start_new_session=True, cwd="/", umask=0o022,
                     env={"PATH": HOST_PATH, "LANG": "C.UTF-8"})
        self.live.add(proc)
        return proc

    def own(self, path: str, dir_fd: int | None = None) -> None:
        """Hand a host-written file to the sandbox's uid (a no-op when it runs as this process's uid)."""
        if self.uid is not None:
            os.chown(path, self.uid, self.uid, dir_fd=dir_fd, follow_symlinks=False)


def _cleanup(box: Confinement, sessions: list) -> None:
    for session in list(sessions):
        session.close()
    for proc in list(box.live):
        kill_tree(proc)
    box.live.clear()
    if box.uid is None and box.workspace.exists():
        # Not root: a directory the sandbox made unreadable or unwritable would block removal.
        _open_up(box.workspace)
    if box.base.exists():
        shutil.rmtree(box.base)


def _open_up(directory: Path) -> None:
    os.chmod(directory, 0o700)
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            _open_up(Path(entry.path))


# Host-side file access that cannot be steered out of the workspace by the sandbox's symlinks.

def _lexical(path: str, base: list[str], original: str) -> list[str]:
    """Components of `path` resolved by name against `base`; escaping the workspace raises ValueError."""
    if path.startswith("/"):
        if path != INSIDE and not path.startswith(INSIDE + "/"):
            raise ValueError(f"path {original!r} is outside the workspace ({INSIDE})")
        path, base = path[len(INSIDE):], []
    parts = list(base)
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise ValueError(f"path {original!r} escapes the workspace")
            parts.pop()
        else:
            parts.append(part)
    return parts


def _open_in(root: Path, path: str, flags: int, mode: int = 0o644, box: Confinement | None = None) -> int:
    """Open `path` under `root` following symlinks only within it (each step is an O_NOFOLLOW openat).

    With `box`, missing parent directories are created and handed to the sandbox's uid.
    """
    parts = _lexical(path, [], path)
    if not parts:
        raise ValueError(f"path {path!r} names the workspace itself, not a file in it")
    for _ in range(40):
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for i, part in enumerate(parts):
                last = i == len(parts) - 1
                try:
                    if last:
                        return os.open(part, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
                    child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except FileNotFoundError:
                    if last or box is None:
                        raise
                    os.mkdir(part, 0o755, dir_fd=fd)
                    box.own(part, dir_fd=fd)
                    child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError as err:
                    if err.errno not in (errno.ELOOP, errno.ENOTDIR) or not stat.S_ISLNK(
                            os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
                        raise
                    # A symlink: splice its target in by name and walk again from the workspace root.
                    parts = _lexical(os.readlink(part, dir_fd=fd), parts[:i], path) + parts[i + 1:]
                    break
                os.close(fd)
                fd = child
        finally:
            os.close(fd)
    raise ValueError(f"path {path!r}: too many levels of symbolic links")


def _regular(fd: int, path: str) -> None:
    # A FIFO or device planted by the sandbox would block or mislead a host-side read or write.
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"path {path!r} is not a regular file")


def _copy_tree(src: Path, dest: Path) -> None:
    """Copy a workspace: symlinks as links, never followed; FIFOs, sockets and devices skipped."""
    def special(directory: str, names: list[str]) -> set[str]:
        kept = (stat.S_ISREG, stat.S_ISDIR, stat.S_ISLNK)
        return {n for n in names if not any(k(os.lstat(os.path.join(directory, n)).st_mode) for k in kept)}

    shutil.copytree(src, dest, symlinks=True, ignore=special, dirs_exist_ok=True)


class Sandbox:
    """One episode's confined workspace: run commands in it, keep a shell in it, read and write its files."""

    def __init__(self, limits: Limits | None = None, files: dict[str, str | bytes] | None = None,
                 backend: str | None = None):
        self.limits = limits or Limits()
        backend = backend or sandbox_backend()
        if backend not in ("bwrap", "unshare"):
            raise ValueError(f"unknown sandbox backend {backend!r}; expected 'bwrap' or 'unshare'")
        uid = UID_BASE + secrets.randbelow(UID_SPAN) if os.geteuid() == 0 else None
        base = Path(tempfile.mkdtemp(prefix="jointrl-sandbox-"))
        self._box = Confinement(backend, base, uid)
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
        fd = _open_in(self.workspace, path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK, 0o644, box=self._box)
        _regular(fd, path)
        with os.fdopen(fd, "wb") as f:
            f.truncate(0)
            f.write(data)
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            if self._box.uid is not None:
                os.fchown(f.fileno(), self._box.uid, self._box.uid)

    def read(self, path: str) -> bytes:
        """Read a workspace file from the host side; a path leading out of the workspace raises ValueError."""
        fd = _open_in(self.workspace, path, os.O_RDONLY | os.O_NONBLOCK)
        _regular(fd, path)
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def exists(self, path: str) -> bool:
        """Whether `path` exists in the workspace (links followed only within it)."""
        try:
            os.close(_open_in(self.workspace, path, os.O_RDONLY | os.O_NONBLOCK))
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
                         duration=time.monotonic() - started, timeout=wall)

    def shell(self, limits: Limits | None = None, env: dict[str, str] | None = None) -> BashSession:
        """A persistent bash in this sandbox: cwd, variables and functions carry over between commands."""
        from jointrl.envs.bash_session import BashSession

        if not self._finalizer.alive:
            raise RuntimeError("this sandbox is closed")
        session = BashSession(self._box, limits or self.limits, env)
        self._sessions.append(session)
        return session

    def copy_workspace(self, dest: Path) -> None:
        """Copy the workspace to `dest` (links copied as links, special files skipped)."""
        _copy_tree(self.workspace, Path(dest))

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
        limits = limits or src.limits
        origin, backend = src.workspace, src.backend
    else:
        origin, backend = Path(src), None
        if not origin.is_dir():
            raise ValueError(f"{origin} is not a directory to copy a workspace from")
    fresh = Sandbox(limits, backend=backend)
    _copy_tree(origin, fresh.workspace)
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


def __getattr__(name: str):
    # BashSession lives in its own module, which imports this one; re-export it lazily.
    if name == "BashSession":
        from jointrl.envs.bash_session import BashSession

        return BashSession
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
