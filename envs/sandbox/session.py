"""A persistent bash inside a sandbox, for the terminal domain: state carries over between commands.

The shell reads commands from a pipe. Each command is sent as one `eval` of an ANSI-C quoted string
with stdin from /dev/null (so `cat` or `read` get EOF instead of swallowing the next command), followed
by a line that prints a per-session random marker and `$?` to stdout and the marker to stderr. Output is
read up to the markers; what a background job prints after one shows up with the next command.
A command that outlives its timeout takes the shell with it: the whole process tree is killed, a new
shell is started, and the result says that the state was lost.

Every call is bounded by its wall clock whatever the shell does: the command is written to the shell
while both output pipes are read, without blocking, so a stopped shell (`kill -STOP $$`) that never reads
its stdin, or one whose output nobody drains, costs a timeout and a restart, never a hung worker. close()
kills the process tree first and waits for a call in flight only as long as that call's own bound.
"""
from __future__ import annotations

import os
import re
import secrets
import selectors
import subprocess
import threading
import time

from jointrl.envs.sandbox.process import Confinement, kill_tree
from jointrl.envs.sandbox.types import Capture, Limits, RunResult

# A command goes to the shell through a pipe, not an argument: only memory and time bound it.
MAX_SCRIPT_BYTES = 4 << 20
RESET = "cwd, variables, functions and background jobs are reset"
LOST = f"the shell was restarted: {RESET}"
EXITED = f"the shell exited; a new one was started: {RESET}"


def ansi_c_quote(text: str) -> str:
    """`text` as a bash $'...' word, every byte outside printable ASCII escaped."""
    if "\0" in text:
        raise ValueError("a shell command cannot contain a NUL character")
    out = []
    for byte in text.encode("utf-8", errors="surrogateescape"):
        out.append(chr(byte) if 32 <= byte < 127 and byte not in (0x27, 0x5C) else f"\\x{byte:02x}")
    return "$'" + "".join(out) + "'"


class _Stream:
    """One pipe of the shell: what came after the last marker, and the capture of the running command."""

    def __init__(self, marker: bytes, with_status: bool):
        self.pattern = re.compile(b"\n" + re.escape(marker) + (rb" (\d+)\n" if with_status else b"\n"))
        self.hold = len(marker) + 16  # bytes kept back in case a marker is split across reads
        self.pending = bytearray()
        self.capture: Capture | None = None
        self.status: int | None = None
        self.done = False

    def begin(self, cap: int) -> None:
        self.capture, self.status, self.done = Capture(cap), None, False
        self._scan()

    def feed(self, chunk: bytes) -> None:
        self.pending += chunk
        self._scan()

    def finish(self) -> None:
        """The pipe ended without a marker: everything held back is output."""
        if not self.done and self.capture is not None:
            self.capture.feed(bytes(self.pending))
            self.pending.clear()
            self.done = True

    def _scan(self) -> None:
        if self.done or self.capture is None:
            return
        match = self.pattern.search(self.pending)
        if match:
            self.capture.feed(bytes(self.pending[:match.start()]))
            self.status = int(match.group(1)) if match.groups() else None
            del self.pending[:match.end()]
            self.done = True
        elif len(self.pending) > self.hold:
            cut = len(self.pending) - self.hold
            self.capture.feed(bytes(self.pending[:cut]))
            del self.pending[:cut]


class BashSession:
    """A bash that stays up between commands; each `run` returns that command's output and exit code."""

    def __init__(self, box: Confinement, limits: Limits, env: dict[str, str] | None = None):
        self._box = box
        self.limits = limits
        self._env = env
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._closed = False
        self._marker = f"__jointrl_done_{secrets.token_hex(8)}"
        self._start()

    def _start(self) -> None:
        self._proc = self._box.spawn(["bash", "--noprofile", "--norc"], self.limits, self._env, subprocess.PIPE)
        marker = self._marker.encode()
        self._streams = {self._proc.stdout: _Stream(marker, True), self._proc.stderr: _Stream(marker, False)}

    def _stop(self) -> None:
        if self._proc is not None:
            kill_tree(self._proc)
            self._box.live.discard(self._proc)
            for pipe in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
                pipe.close()
            self._proc = None

    def run(self, command: str, timeout: float | None = None) -> RunResult:
        """Run `command` in the shell; on timeout the shell is killed and restarted (the result says so)."""
        wall = self.limits.wall_seconds if timeout is None else timeout
        script = (f"eval {ansi_c_quote(command)} < /dev/null\n"
                  f"printf '\\n{self._marker} %d\\n' $?; printf '\\n{self._marker}\\n' >&2\n")
        if len(script) > MAX_SCRIPT_BYTES:
            raise ValueError(f"command of {len(script)} bytes is over {MAX_SCRIPT_BYTES}; write long scripts to a file")
        with self._lock:
            if self._closed:
                raise RuntimeError("this shell session is closed")
            note = ""
            if self._proc is None or self._proc.poll() is not None:
                self._stop()
                self._start()
                note = LOST
            started = time.monotonic()
            for stream in self._streams.values():
                stream.begin(self.limits.output_bytes)
            outcome = self._exchange(script.encode(), started + wall)
            out, err = (s.capture for s in self._streams.values())
            exit_code = self._streams[self._proc.stdout].status if outcome == "done" else None
            if outcome == "exited":
                exit_code = self._proc.wait()
                note = EXITED
            if outcome != "done":
                self._stop()
                self._start()
                note = note or LOST
            caps = self._box.after_command(self.limits, self._proc)
            note = "; ".join(n for n in (note, caps) if n)
            return RunResult(stdout=out.text(), stderr=err.text(), exit_code=exit_code,
                             timed_out=outcome == "timeout", truncated=out.truncated or err.truncated,
                             duration=time.monotonic() - started, timeout=wall, note=note)

    def _exchange(self, script: bytes, deadline: float) -> str:
        """Write the script and read both pipes until both markers ('done'), EOF ('exited') or the deadline."""
        selector = selectors.DefaultSelector()
        for pipe, stream in self._streams.items():
            selector.register(pipe, selectors.EVENT_READ, stream)
        stdin = self._proc.stdin
        os.set_blocking(stdin.fileno(), False)
        selector.register(stdin, selectors.EVENT_WRITE, None)
        left_to_write = memoryview(script)
        exited = False
        try:
            while any(not s.done for s in self._streams.values()) and selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout"
                for key, _ in selector.select(left):
                    if key.fileobj is stdin:
                        try:
                            left_to_write = left_to_write[os.write(key.fd, left_to_write):]
                        except (BrokenPipeError, BlockingIOError):
                            left_to_write = left_to_write[:0]  # the shell is gone: reading finds EOF and says so
                        if not left_to_write:
                            selector.unregister(stdin)
                        continue
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        key.data.feed(chunk)
                    else:
                        # The shell is gone; keep reading the other pipe to its end for the last output.
                        exited = True
                        key.data.finish()
                        selector.unregister(key.fileobj)
            return "exited" if exited else "done"
        finally:
            selector.close()

    def kill(self) -> None:
        """Kill the shell and everything it started; the next run starts a fresh shell (and says so)."""
        proc = self._proc
        if proc is not None:
            # Killing first ends a call in flight at once (its pipes reach EOF), so the lock comes free.
            kill_tree(proc)
        if self._lock.acquire(timeout=self.limits.wall_seconds + 5.0):
            try:
                self._stop()
            finally:
                self._lock.release()

    def close(self) -> None:
        """Kill the shell and everything it started for good; safe to call twice, bounded even during a call."""
        self._closed = True
        self.kill()
