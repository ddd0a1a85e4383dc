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

from jointrl.envs.sandbox.cgroup import EpisodeGroup
from jointrl.envs.sandbox.confine import HOST_PATH, bwrap_argv, mount_plan, sandbox_env, unshare_argv
from jointrl.envs.sandbox.runtime import PYTHON, python_env, python_mounts
from jointrl.envs.sandbox.seccomp import program as seccomp_program
from jointrl.envs.sandbox.types import Capture, Limits

SECCOMP_PROGRAM = seccomp_program()
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
    _wait_gone(inits)


def _wait_gone(pids: list[int], seconds: float = 5.0) -> None:
    """Return once none of `pids` is alive any more (or after `seconds`)."""
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.005)


def _seccomp_fd() -> int | None:
    """A pipe's read end holding the seccomp filter (None where there is no filter for this machine)."""
    program = SECCOMP_PROGRAM
    if program is None:
        return None
    read, write = os.pipe()
    os.write(write, program)  # a few hundred bytes: far below a pipe's buffer
    os.close(write)
    return read


def descendants(pid: int) -> dict[int, int]:
    """Every live descendant of `pid` with its parent (child -> parent), read from /proc."""
    found: dict[int, int] = {}
    todo = [pid]
    while todo:
        parent = todo.pop()
        for child in _children(parent):
            if child not in found:
                found[child] = parent
                todo.append(child)
    return found


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def kill_background(proc: subprocess.Popen, shell: str = "bash") -> int:
    """Kill every process under a confined shell's tree but the shell and its ancestors; how many were killed.

    The shell is the shallowest descendant named `shell`: what it started and left running, and anything
    orphaned to the namespace's init, is background.
    """
    tree = descendants(proc.pid)
    depth: dict[int, int] = {}

    def depth_of(pid: int) -> int:
        if pid not in depth:
            depth[pid] = 0 if pid == proc.pid else depth_of(tree[pid]) + 1
        return depth[pid]

    shells = sorted((depth_of(pid), pid) for pid in tree if _comm(pid) == shell)
    if not shells:
        return 0
    keep, pid = set(), shells[0][1]
    while pid != proc.pid:
        keep.add(pid)
        pid = tree[pid]
    killed = []
    for pid in tree:
        if pid not in keep:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
    # Return once they are gone (reaped by their parents or the namespace's init), as kill_tree does.
    _wait_gone(killed)
    return len(killed)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(child) for child in f.read().split()]
    except (OSError, ValueError):
        return []


def alive(pid: int) -> bool:
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

    def __init__(self, backend: str, base: Path, uid: int | None, site: tuple[str, ...],
                 packages: dict[str, Path] | None = None, group: EpisodeGroup | None = None):
        self.backend = backend
        self.base = base
        self.workspace = base / "workspace"
        self.uid = uid
        self.packages = dict(packages or {})
        self.site = tuple(site)
        self.group = group  # the episode's cgroup, when cgroup v2 is there to make one
        self.live: set[subprocess.Popen] = set()

    def argv(self, command: list[str], limits: Limits, env: dict[str, str] | None,
             seccomp_fd: int | None = None) -> list[str]:
        """The host command line that runs `command` confined (bwrap reads its seccomp filter from seccomp_fd)."""
        plan = mount_plan(self.workspace, limits, python_mounts(self.site, self.packages))
        full_env = sandbox_env(env, python_env(), os.path.dirname(PYTHON))
        prefix = self.group.argv_prefix() if self.group is not None else []
        if self.backend == "bwrap":
            return prefix + bwrap_argv(plan, full_env, limits, command, self.uid, seccomp_fd)
        return prefix + unshare_argv(plan, full_env, limits, command, self.uid, self.base / "root")

    def spawn(self, command: list[str], limits: Limits, env: dict[str, str] | None, stdin) -> subprocess.Popen:
        """Start `command` confined, in its own process group, with piped stdout and stderr."""
        filter_fd = _seccomp_fd() if self.backend == "bwrap" else None
        try:
            proc = popen(self.argv(command, limits, env, filter_fd), stdin=stdin, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True, cwd="/", umask=0o022,
                         env={"PATH": HOST_PATH, "LANG": "C.UTF-8"}, pass_fds=() if filter_fd is None else (filter_fd,))
        finally:
            if filter_fd is not None:
                os.close(filter_fd)
        self.live.add(proc)
        return proc

    def workspace_bytes(self, max_entries: int = 100_000) -> int:
        """Disk the workspace uses (allocated blocks, links not followed); past max_entries entries, 2**62."""
        total, entries = 0, 0
        for directory, dirs, files in os.walk(self.workspace, followlinks=False):
            for name in dirs + files:
                entries += 1
                if entries > max_entries:
                    return 1 << 62
                try:
                    total += os.lstat(os.path.join(directory, name)).st_blocks * 512
                except OSError:
                    continue
        return total

    def after_command(self, limits: Limits, shell: subprocess.Popen | None = None) -> str:
        """Enforce the episode's caps once a command is done; a note for the model when something was stopped.

        With a cgroup: the episode's CPU time, background processes included, against its budget. Without:
        a shell's background processes are stopped (rlimits bound each process, not their sum). Both: the
        workspace's size against its quota.
        """
        notes = []
        if self.group is not None:
            used = self.group.cpu_seconds()
            if used > limits.episode_cpu_seconds:
                self.group.kill_all()
                notes.append(f"the episode used {used:.0f}s of CPU, over its {limits.episode_cpu_seconds:g}s: "
                             "every process was stopped")
        elif shell is not None and shell.returncode is None:
            killed = kill_background(shell)
            if killed:
                notes.append(f"{killed} background process(es) stopped: nothing may run between commands here")
        used = self.workspace_bytes()
        if used > limits.workspace_bytes:
            self.kill_everything()
            notes.append(f"the workspace holds {used / 2**20:.0f} MiB, over its {limits.workspace_bytes / 2**20:.0f} MiB "
                         "quota: every process was stopped; delete files to go on")
        return "; ".join(notes)

    def kill_everything(self) -> None:
        """Kill every process this sandbox started (commands and shells alike)."""
        if self.group is not None:
            self.group.kill_all()
        for proc in list(self.live):
            kill_tree(proc)
            self.live.discard(proc)

    def own(self, path: str, dir_fd: int | None = None) -> None:
        """Hand a host-written file to the sandbox's uid (a no-op when it runs as this process's uid)."""
        if self.uid is not None:
            os.chown(path, self.uid, self.uid, dir_fd=dir_fd, follow_symlinks=False)
