"""Progress of a long loop: a rich bar (done/total, rate, elapsed, ETA) on a terminal, plain lines elsewhere.

On a terminal the bar redraws in place above nothing else; lines the loop prints scroll above it. When the
console is not a terminal (a pipe, a log file, CI) a bar would write control codes into the log, so the
same facts go out as a plain line on the first item, about every tenth of the total, and the last.

Loops nest (an evaluation inside the RL step loop): rich allows one live display per process, so a loop
started while another is live adds its bar to the same display and removes it when it ends.
Rate and ETA are the mean over this loop so far (not rich's 30-second window), which stays meaningful when
one RL step takes minutes.
"""
from __future__ import annotations

import math
import sys
import time
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

PLAIN_LINES = 10  # about this many plain lines over a whole loop
PIPED_WIDTH = 200  # columns of a command's tables when its output is not a terminal
_live: list = []  # [the live rich display, how many loops use it]; one per process


def output_console() -> Console:
    """A console for a command's tables: the terminal's width, or PIPED_WIDTH columns when piped to a log, where
    rich's default of 80 would cut env ids and confidence intervals."""
    return Console(soft_wrap=True, width=None if sys.stdout.isatty() else PIPED_WIDTH)


def clock(seconds: float | None) -> str:
    """H:MM:SS, or '?' when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def rate_text(per_second: float | None, unit: str) -> str:
    """'3.20 step/s', or '12.5 s/step' when slower than one a second; '?' before anything is done."""
    if not per_second:
        return "?"
    return f"{per_second:.2f} {unit}/s" if per_second >= 1 else f"{1 / per_second:.1f} s/{unit}"


class Progress:
    """One loop's progress on a console; console None shows nothing. Use as a context manager."""

    def __init__(self, console: Console | None, label: str, total: int, *, unit: str = "step", completed: int = 0):
        """A loop of `total` items of which `completed` are already done (a resumed run)."""
        if total < 0 or not 0 <= completed <= max(total, 0):
            raise ValueError(f"progress of {label!r}: need 0 <= completed <= total, got {completed} of {total}")
        self.console, self.label, self.total, self.unit = console, label, total, unit
        self.done = self.first = completed
        self.every = max(1, math.ceil((total - completed) / PLAIN_LINES))
        self._printed = completed
        self._started = time.perf_counter()
        self._task = None

    def __enter__(self) -> Progress:
        self._started = time.perf_counter()
        if self.console is not None and self.console.is_terminal:
            if not _live:
                columns = (
                    TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                    TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"), TextColumn("{task.fields[info]}"),
                )
                display = RichProgress(*columns, console=self.console)
                display.start()
                _live.extend([display, 0])
            _live[1] += 1
            self._task = _live[0].add_task(self.label, total=self.total, completed=self.done, rate="?", eta="?", info="")
        return self

    def __exit__(self, *exc) -> None:
        if self._task is None:
            return
        display, task = _live[0], self._task
        self._task = None
        _live[1] -= 1
        if _live[1] == 0:
            # The outermost loop's finished bar stays on screen; a nested loop's bar goes when it ends.
            display.stop()
            _live.clear()
        else:
            display.remove_task(task)

    def rate(self) -> float | None:
        """Items per second over this loop so far; None before the first."""
        elapsed = time.perf_counter() - self._started
        return (self.done - self.first) / elapsed if self.done > self.first and elapsed > 0 else None

    def eta(self) -> float | None:
        """Seconds left at the mean rate so far; None before the first item."""
        rate = self.rate()
        return (self.total - self.done) / rate if rate else None

    def advance(self, n: int = 1, info: str = "") -> None:
        """Count n more items done; info (e.g. 'loss 1.23') shows beside the bar or on the plain line."""
        self.done += n
        if self.console is None:
            return
        rate, eta = rate_text(self.rate(), self.unit), clock(self.eta())
        if self._task is not None:
            _live[0].update(self._task, completed=self.done, rate=rate, eta=eta, info=info)
        elif self.done == self.first + n or self.done >= self.total or self.done - self._printed >= self.every:
            self._printed = self.done
            self.console.print(self.line(rate, eta, info), highlight=False, markup=False)

    def line(self, rate: str, eta: str, info: str = "") -> str:
        """The plain line: `SFT 12/40 (30%) | 2.10 step/s | elapsed 0:00:06 | ETA 0:00:13 | loss 1.23`."""
        percent = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        parts = [f"{self.label} {self.done}/{self.total}{percent}", rate,
                 f"elapsed {clock(time.perf_counter() - self._started)}", f"ETA {eta}"]
        return " | ".join(parts + ([info] if info else []))


@contextmanager
def datasets_quiet():
    """Silence datasets' own tqdm bars (one per small read or write) inside the block, then restore them."""
    from datasets.utils import logging as ds_logging

    was_on = ds_logging.is_progress_bar_enabled()
    ds_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            ds_logging.enable_progress_bar()
