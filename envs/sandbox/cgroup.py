"""Per-episode resource caps with cgroup v2: one group per sandbox holding every process it starts.

Detection (`detect`, run once when this module is imported): the unified hierarchy is mounted (a `cgroup2` line in
/proc/self/mountinfo), this process's group is read from /proc/self/cgroup (`0::<path>`), a child group
can be made under it, and that child offers the memory, pids and cpu controllers (they are switched on
in the parent's cgroup.subtree_control when they are not already). Any step failing means no cgroup v2
here; `CGROUP_STATUS` then says why, and the sandbox falls back to per-process rlimits, killing a shell's
background processes after each command, and the workspace quota (see box.py).

A group caps the episode's memory (memory.max, no swap) and processes (pids.max), and accounts its CPU time
(cpu.stat), which the sandbox compares with the episode's CPU budget after each command, background
processes included. Processes enter the group before they exec anything: the sandbox's command line is
prefixed with a shell that writes its own pid to cgroup.procs and then execs bwrap.
"""
from __future__ import annotations

import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CONTROLLERS = ("memory", "pids", "cpu")


@dataclass(frozen=True)
class CgroupRoot:
    """Where this process may make episode groups: a cgroup v2 directory with the controllers delegated."""

    path: Path


def _unified_mount(mountinfo: str) -> Path | None:
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        if right.split(" ")[:1] == ["cgroup2"]:
            return Path(left.split(" ")[4])
    return None


def _own_group(cgroup_file: str) -> str | None:
    for line in cgroup_file.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def detect(mountinfo: str, cgroup_file: str, root_override: Path | None = None) -> tuple[CgroupRoot | None, str]:
    """(where episode groups go, or None; why) from the text of /proc/self/mountinfo and /proc/self/cgroup."""
    mount = root_override or _unified_mount(mountinfo)
    if mount is None:
        return None, "no cgroup2 filesystem is mounted (a cgroup v1 or hybrid host)"
    own = _own_group(cgroup_file)
    if own is None:
        return None, "this process is in no cgroup v2 group (/proc/self/cgroup has no 0:: line)"
    parent = mount / own.lstrip("/")
    try:
        available = set((parent / "cgroup.controllers").read_text().split())
    except OSError as err:
        return None, f"cannot read {parent}/cgroup.controllers: {err}"
    missing = [c for c in CONTROLLERS if c not in available]
    if missing:
        return None, f"controllers {missing} are not delegated to {parent}"
    try:
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
        wanted = [c for c in CONTROLLERS if c not in enabled]
        if wanted:
            (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
        probe = parent / f"jointrl-probe-{os.getpid()}-{secrets.token_hex(4)}"
        probe.mkdir()
        probe.rmdir()
    except OSError as err:
        return None, f"cannot make groups under {parent}: {err}"
    return CgroupRoot(parent), f"cgroup v2 at {parent} (memory, pids and cpu per episode)"


def _detect_here() -> tuple[CgroupRoot | None, str]:
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        cgroup_file = Path("/proc/self/cgroup").read_text()
    except OSError as err:
        return None, f"cannot read /proc: {err}"
    return detect(mountinfo, cgroup_file)


CGROUP_ROOT, CGROUP_STATUS = _detect_here()


class EpisodeGroup:
    """One sandbox's cgroup: memory and process caps, CPU accounting, kill-all and removal."""

    def __init__(self, root: CgroupRoot, memory_bytes: int, processes: int):
        self.path = root.path / f"jointrl-episode-{os.getpid()}-{secrets.token_hex(6)}"
        self.path.mkdir()
        (self.path / "memory.max").write_text(str(memory_bytes))
        swap = self.path / "memory.swap.max"
        if swap.exists():
            swap.write_text("0")
        (self.path / "pids.max").write_text(str(processes))

    def argv_prefix(self) -> list[str]:
        """A command line prefix that joins this group before exec'ing the rest (no process escapes it)."""
        return ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path)]

    def cpu_seconds(self) -> float:
        """CPU time every process of the group has used so far, the dead included."""
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
        return 0.0

    def pids(self) -> list[int]:
        """Processes in the group now."""
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def kill_all(self) -> None:
        """SIGKILL every process of the group (cgroup.kill where the kernel has it, else one by one)."""
        kill = self.path / "cgroup.kill"
        if kill.exists():
            kill.write_text("1")
        else:
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5.0
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.01)

    def remove(self) -> None:
        """Kill what is left and delete the group."""
        if self.path.exists():
            self.kill_all()
            try:
                self.path.rmdir()
            except OSError:
                pass
