"""What the sandbox's callers pass and get back: limits, a command's result, captured output, the unavailable error."""
from __future__ import annotations

from dataclasses import dataclass

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
    # Per episode (a whole Sandbox), whatever its processes: the first two need cgroup v2 (cgroup.py).
    episode_memory_bytes: int = 4 << 30  # memory.max of the episode's group
    episode_processes: int = 256  # pids.max of the episode's group
    episode_cpu_seconds: float = 900.0  # CPU time of every process, background ones included
    workspace_bytes: int = 256 << 20  # disk the workspace may hold, checked after every command


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
