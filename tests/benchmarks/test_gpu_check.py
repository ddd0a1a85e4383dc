"""benchmarks/gpu_check.sh without a GPU, and the comparison it relies on (jointrl.kernels.parity).

The script's CPU path runs in a subprocess with CUDA hidden; its JSON must hold a passing fp32 row for every
Triton op and mark the GPU sections skipped. The comparison is checked against hand-made faults: a known
offset on the output, an unwritten element. The GPU-only sections' code runs here on the CPU at toy sizes.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from jointrl.kernels import parity
from jointrl.kernels.moe import naive as moe_naive
from tests.benchmarks.bench_module import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
GPU_SECTIONS = ("throughput", "learner", "engine", "weight_sync")
CPU = torch.device("cpu")


def small_cases() -> dict[str, parity.Case]:
    """Every parity case at the CPU sizes, by `<op>.<case>`."""
    return {f"{package}.{case.name}": case for package, build in parity.CASES.items()
            for case in build(parity.SIZES["small"][package], CPU)}


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory):
    """(exit status, stdout, JSON report) of `gpu_check.sh --quick` with CUDA hidden."""
    out = tmp_path_factory.mktemp("gpu_check") / "report.json"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([str(ROOT / "benchmarks" / "gpu_check.sh"), "--quick", "--json", str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr, json.loads(out.read_text()) if out.exists() else None


def test_cpu_path_exits_zero_and_says_why(cpu_report):
    returncode, output, report = cpu_report
    assert returncode == 0, output
    assert output.startswith("no GPU: running the CPU-safe parts only"), output[:200]
    assert report["cuda"] is False and report["triton_interpret"] is True
    assert {"device", "torch", "triton", "total_s", "tolerance_floor"} <= set(report)
    assert list(report["sections"]) == ["kernels", *GPU_SECTIONS]
    for section in report["sections"].values():
        assert section["seconds"] >= 0 and section["rows"]


def test_cpu_kernel_rows_cover_every_case_and_pass(cpu_report):
    rows = cpu_report[2]["sections"]["kernels"]["rows"]
    assert rows[0]["name"] == "dispatch" and rows[0]["status"] == "ok"
    assert {r["name"] for r in rows[1:]} == {f"{name} fp32" for name in small_cases()}
    for r in rows[1:]:
        assert r["status"] == "ok", r
        checks = [r["forward"]] + ([r["backward"]] if r["backward"] else [])
        for check in checks:
            for tensor in check["tensors"]:
                assert tensor["bound"] == max(2 * tensor["naive_rel_err"], parity.FLOOR[torch.float32])
                assert 0 <= tensor["rel_err"] <= tensor["bound"], (r["name"], tensor)
                assert tensor["max_abs_err"] >= 0 and tensor["passed"]


def test_cpu_path_marks_gpu_sections_skipped(cpu_report):
    for name in GPU_SECTIONS:
        (only,) = cpu_report[2]["sections"][name]["rows"]
        assert only["status"] == "skipped" and only["summary"] == "skipped: needs CUDA"


def test_cases_cover_every_public_triton_function():
    names = set(small_cases())
    for package in parity.CASES:
        op = importlib.import_module(f"jointrl.kernels.{package}")
        triton = importlib.import_module(f"jointrl.kernels.{package}.triton")
        naive = importlib.import_module(f"jointrl.kernels.{package}.naive")
        # The dispatched functions: in the op's __all__, written in both triton.py and naive.py.
        dispatched = [f for f in op.__all__ if callable(getattr(triton, f, None)) and hasattr(naive, f)
                      and getattr(triton, f).__module__ == triton.__name__]
        assert dispatched, package
        for function in dispatched:
            assert any(name.startswith(f"{package}.{function}") for name in names), f"{package}.{function} unchecked"


def test_compare_measures_a_known_offset_and_fails_it():
    case = small_cases()["moe.grouped_swiglu"]
    offset = 1e-3
    shifted = SimpleNamespace(grouped_swiglu=lambda *args: moe_naive.grouped_swiglu(*args) + offset)
    result = parity.compare(case, torch.float32, triton_ops=shifted)
    forward = result["forward"]
    # The naive output is within fp32 rounding of the truth, so the error is the offset.
    assert forward["max_abs_err"] == pytest.approx(offset, rel=1e-3)
    assert forward["rel_err"] > forward["bound"] and not forward["passed"] and not result["passed"]
    # A constant offset has no gradient: the backward is naive's own, which passes.
    assert result["backward"]["passed"]


def test_compare_fails_an_unwritten_element_and_passes_naive_itself():
    case = small_cases()["moe.unpermute_combine"]

    def unwritten(*args):
        out = moe_naive.unpermute_combine(*args).clone()
        out[3, 5] = float("nan")
        return out

    result = parity.compare(case, torch.float32, triton_ops=SimpleNamespace(unpermute_combine=unwritten))
    assert result["forward"]["rel_err"] == float("inf") and not result["passed"]
    assert parity.compare(case, torch.float32, triton_ops=moe_naive)["passed"]


def test_engine_section_on_cpu_generates_every_scripted_token():
    gpu_check = load_benchmark("gpu_check")
    (row,) = gpu_check.engine(CPU, quick=True, preset="debug", dtype=torch.float32)
    assert row["status"] == "ok" and row["tokens"] == 16 * 2 * 32 and row["tokens_per_s"] > 0


def test_weight_sync_section_reads_the_scripts_rows_or_reports_it(tmp_path, monkeypatch):
    gpu_check = load_benchmark("gpu_check")
    monkeypatch.setattr(gpu_check, "HERE", tmp_path)
    (missing,) = gpu_check.weight_sync(CPU, quick=True)
    assert missing["status"] == "skipped" and "does not exist" in missing["summary"]

    script = tmp_path / "weight_sync.py"
    script.write_text(
        "import argparse, json\n"
        "p = argparse.ArgumentParser()\n"
        "for flag in ('--device', '--ranks', '--json'): p.add_argument(flag)\n"
        "a = p.parse_args()\n"
        "rows = [{'mode': 'ranks', 'seconds': 0.5, 'device': a.device, 'ranks': a.ranks}]\n"
        "json.dump({'parameters': 7, 'rows': rows}, open(a.json, 'w'))\n"
    )
    (got,) = gpu_check.weight_sync(CPU, quick=True)
    assert got["status"] == "ok" and got["data"] == {"mode": "ranks", "seconds": 0.5, "device": "cpu", "ranks": "1"}

    script.write_text("import sys\nprint('no transport', file=sys.stderr)\nsys.exit(3)\n")
    (failed,) = gpu_check.guarded("weight_sync", "weight_sync", lambda: gpu_check.weight_sync(CPU, quick=True))
    assert failed["status"] == "error" and failed["summary"] == "RuntimeError: weight_sync.py exited 3: no transport"


@pytest.mark.slow
def test_learner_section_on_cpu_runs_a_finite_step(ray_session):
    gpu_check = load_benchmark("gpu_check")
    (row,) = gpu_check.learner(CPU, quick=True, preset="debug", dtype="fp32", backend="gloo")
    assert row["status"] == "ok", row
    assert row["tokens"] == 8 * 512 and row["tokens_per_s"] > 0
