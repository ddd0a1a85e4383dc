"""Process control for confined commands: one launcher thread, process-tree kills, bounded output collection.

Why one launcher thread. A parent-death signal (bwrap's `--die-with-parent`) fires when the *thread*
that forked the child exits, and tools run in short-lived threads, so every process is started from
one long-lived thread. Output is read from both pipes at once and only the first `output_bytes` of each
are kept.
"""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from jointrl.envs.sandbox.confine import HOST_PATH, bwrap_argv, mount_plan, sandbox_env, unshare_argv
from jointrl.envs.sandbox.runtime import PYTHON, python_env, python_mounts
from jointrl.envs.sandbox.types import Capture, Limits

_launcher: tuple[int, ThreadPoolExecutor] | None = None
_launcher_lock = threading.Lock()


def popen(argv: list[str], **kwargs) -> subprocess.Popen:
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

    def __init__(self, backend: str, base: Path, uid: int | None, packages: dict[str, Path] | None = None):
        self.backend = backend
        self.base = base
        self.workspace = base / "workspace"
        self.uid = uid
        self.packages = dict(packages or {})
        self.live: set[subprocess.Popen] = set()

    def argv(self, command: list[str], limits: Limits, env: dict[str, str] | None) -> list[str]:
        """The host command line that runs `command` confined."""
        plan = mount_plan(self.workspace, limits, python_mounts(self.packages))
        full_env = sandbox_env(env, python_env(), os.path.dirname(PYTHON))
        if self.backend == "bwrap":
            return bwrap_argv(plan, full_env, limits, command, self.uid)
        return unshare_argv(plan, full_env, limits, command, self.uid, self.base / "root")

    def spawn(self, command: list[str], limits: Limits, env: dict[str, str] | None, stdin) -> subprocess.Popen:
        """Start `command` confined, in its own process group, with piped stdout and stderr."""
        proc = popen(self.argv(command, limits, env), stdin=stdin, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, start_new_session=True, cwd="/", umask=0o022,
                     env={"PATH": HOST_PATH, "LANG": "C.UTF-8"})
        self.live.add(proc)
        return proc

    def own(self, path: str, dir_fd: int | None = None) -> None:
        """Hand a host-written file to the sandbox's uid (a no-op when it runs as this process's uid)."""
        if self.uid is not None:
            os.chown(path, self.uid, self.uid, dir_fd=dir_fd, follow_symlinks=False)
