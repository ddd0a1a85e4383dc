"""benchmarks/learning.py's draw-probability summary, on hand-written step histories."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from rich.console import Console

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("learning_bench_under_test", ROOT / "benchmarks" / "learning.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mean_mix_averages_each_joint_arm_over_its_steps():
    histories = {
        "single:terminal": [{"mix/t": 1.0}],
        "joint": [{"mix/a": 0.5, "mix/b": 0.5, "reward/mean": 0.1}] * 3,
        "learnability": [{"mix/a": 0.5, "mix/b": 0.5}, {"mix/a": 0.2, "mix/b": 0.8}, {"mix/a": 0.2, "mix/b": 0.8}],
        "sft": [],
    }
    console = Console(record=True, width=120)
    means = _module().mean_mix(histories, console)
    assert set(means) == {"joint", "learnability"}  # single-domain arms draw one domain; they have nothing to compare
    assert means["joint"] == {"a": 0.5, "b": 0.5}
    assert means["learnability"] == pytest.approx({"a": 0.3, "b": 0.7})
    assert "0.700" in console.export_text()
