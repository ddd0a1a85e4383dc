"""benchmarks/learning.py's draw-probability summary and its report pooled over cold starts, on hand-written data."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from jointrl.envs.episode import Episode
from jointrl.rl.evaluate import summarize

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


def _evaluation(successes):
    """An evaluation of text-count seeds 1, 2, ... with one episode each: success per seed."""
    trajectories = [SimpleNamespace(episode=Episode(env_id="terminal/text-count-v0:easy", domain="terminal",
                                                    family="text-count", difficulty="easy", seed=seed, tier="low",
                                                    signals={"success": float(ok)}))
                    for seed, ok in enumerate(successes, 1)]
    return summarize(trajectories, [float(ok) for ok in successes])


def test_the_report_pools_cold_starts_by_the_mean_of_their_changes():
    # Cold start 1: SFT 1 of 4, joint 3 of 4 (+0.5); cold start 2: SFT 2 of 4, joint 2 of 4 (0): pooled +0.25.
    runs = [{"sft": _evaluation([1, 0, 0, 0]), "joint": _evaluation([1, 1, 1, 0])},
            {"sft": _evaluation([1, 1, 0, 0]), "joint": _evaluation([1, 1, 0, 0])}]
    console = Console(record=True, width=200)
    results = _module().report(runs, console)
    pooled = results["vs_sft"]["joint"]["terminal/text-count"]
    assert (pooled["a"], pooled["b"], pooled["change"], pooled["tasks"]) == (0.375, 0.625, 0.25, 8)
    # Drawing cold start 2 twice gives 0 and cold start 1 twice at most +0.75 (its tasks resampled): not significant.
    assert pooled["low"] <= 0.0 and not pooled["significant"]
    assert "pooled over 2 cold starts" in console.export_text()
    alone = _module().report(runs[:1], Console(record=True, width=200))["vs_sft"]["joint"]["terminal/text-count"]
    assert alone["change"] == 0.5 and alone["tasks"] == 4
