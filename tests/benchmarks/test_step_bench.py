"""benchmarks/step.py's machine CPU accounting: /proc/stat's busy time, checked against hand-computed values."""
from __future__ import annotations

import time

import pytest

from tests.benchmarks.bench_module import load_benchmark


def test_busy_seconds_counts_user_nice_system_irq_softirq_only():
    step = load_benchmark("step")
    # user nice system idle iowait irq softirq steal guest guest_nice: (100+20+30+5+5) ticks at 100 a second.
    assert step.busy_seconds("cpu  100 20 30 1000 50 5 5 7 40 3", 100) == pytest.approx(1.6)
    # Idle, iowait, steal and guest time (already inside user) add nothing.
    assert step.busy_seconds("cpu  100 20 30 9999 9999 5 5 9999 9999 9999", 100) == pytest.approx(1.6)


def test_busy_seconds_rejects_a_per_core_or_short_line():
    step = load_benchmark("step")
    with pytest.raises(ValueError, match="aggregate cpu line"):
        step.busy_seconds("cpu0 100 20 30 1000 50 5 5 7 0 0", 100)
    with pytest.raises(ValueError, match="aggregate cpu line"):
        step.busy_seconds("cpu 1 2 3", 100)


def test_with_machine_cpu_records_one_figure_per_call_and_passes_the_result_through():
    step = load_benchmark("step")
    spent: list[float] = []
    # ~0.05 s of this process's CPU: the machine's busy time over the call holds most of it, whatever else runs.

    def spin() -> float:
        started = time.process_time()
        while time.process_time() - started < 0.05:
            pass
        return 7.0

    call = step.with_machine_cpu(spin, spent)
    assert call() == 7.0 and call() == 7.0
    assert len(spent) == 2
    assert all(s >= 0.03 for s in spent)
