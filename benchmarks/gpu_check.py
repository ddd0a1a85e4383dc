"""One GPU check: every Triton kernel against its naive reference, kernel throughput against the device's measured
peaks, a bf16 learner step over NCCL, rollout engine tokens/s, and the weight-sync benchmark.

    benchmarks/gpu_check.sh [--quick] [--json PATH] [--sections kernels,throughput,...]

Run it whenever a GPU is at hand (sized to finish within 8 minutes on one H200, each section within 2;
--quick: smaller sizes); it is never part of CI. It writes one JSON (device, versions, each section's rows
and wall time) and prints a table. Every section, and every row inside one, is guarded: an exception becomes
an error row with its first line and the rest still runs. Exit status 1 when a row failed or errored, else 0
(skipped rows are neither).

Without CUDA it says so in one line and runs its CPU-safe part: the kernel comparison in fp32 at small sizes
under the Triton interpreter; the other sections are rows marked "skipped: needs CUDA".

kernels     jointrl.kernels.parity: every public function of each kernels/<op>/triton.py, forward and backward,
            next to naive.py in the same precision (fp32 and bf16 on CUDA), errors against naive.py on fp64
            copies; pass when the Triton error is at most max(2 x naive's own, 1e-5 fp32 | 2e-2 bf16), relative
            to the tensor's largest value. Also: the dispatch hands CUDA tensors to Triton.
throughput  Each op's workload (jointrl.kernels.workloads: the FLOPs and compulsory bytes it counts) on the
            Triton and naive paths, bf16. A kernel whose FLOPs per byte exceed the device's measured balance
            (peak FLOP/s over peak bytes/s) is compute-bound and reported in TFLOP/s against the measured bf16
            matmul peak; otherwise in GB/s against the measured copy peak.
learner     LearnerGroup with one rank on the `small` preset, bf16, NCCL: one warm-up step (DeepSpeed and
            Triton compile), then timed steps on synthetic trajectories.
engine      The rollout Engine on the `small` preset in bf16: scripted two-turn episodes, greedy, stop tokens
            off, so every turn generates exactly its token count.
weight_sync benchmarks/weight_sync.py --device cuda --ranks 1 --json FILE in a subprocess (--ranks 1,2 with two
            GPUs: it puts one learner rank on each), at most 150 s, its rows included as they are.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Callable

import torch

CUDA = torch.cuda.is_available()
if not CUDA:
    # Triton chooses the interpreter when it is imported, so this precedes every import of a kernel module.
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("DS_ACCELERATOR", "cuda" if CUDA else "cpu")

import triton  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402

from jointrl.kernels import parity  # noqa: E402
from jointrl.kernels.dispatch import select_ops  # noqa: E402
from jointrl.kernels.workloads import GPU_SIZES, WORKLOADS, device_peaks, time_paths  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SECTIONS = ("kernels", "throughput", "learner", "engine", "weight_sync")
WEIGHT_SYNC_TIMEOUT_S = 150
# GPU_SIZES made smaller (a quarter of the tokens or rows, some widths halved) for --quick.
QUICK_THROUGHPUT = {
    "logprobs": dict(t=2048, v=65536, d=2048, chunk=8192),
    "sparse": dict(t=2048, h=16, e=576, v_dim=512, k=512),
    "kda": dict(t=2048, h=16, dk=128, dv=128, chunk=64),
    "moe": dict(n=2048, d=2048, f=1024, experts=64, top_k=4),
    "mxfp4": dict(m=8192, experts=64, n=2048, k=2048, decode_m=16, decode_n=4096, decode_k=4096),
}


def row(section: str, name: str, status: str, summary: str, seconds: float = 0.0, **data) -> dict:
    """One result: status is ok | fail | error | skipped; summary is the table's text; data goes to the JSON."""
    return dict(section=section, name=name, status=status, summary=summary, seconds=round(seconds, 3), **data)


def first_line(err: BaseException) -> str:
    """`Type: first line of the message` of an exception."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def guarded(section: str, name: str, fn: Callable[[], list[dict]]) -> list[dict]:
    """fn's rows, or one error row with the exception's first line; a lone row without its own time gets fn's."""
    start = time.perf_counter()
    try:
        rows = fn()
    except Exception as err:  # noqa: BLE001 - any failure of one check is a result, never the end of the run
        rows = [row(section, name, "error", first_line(err))]
    if CUDA:
        torch.cuda.empty_cache()
    if len(rows) == 1 and not rows[0]["seconds"]:
        rows[0]["seconds"] = round(time.perf_counter() - start, 3)
    return rows


def benchmark_module(name: str) -> ModuleType:
    """A sibling script of benchmarks/ (no package) as a module, for the helpers it already has."""
    key = f"benchmarks_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        # Registered before it runs, as an import would: dataclasses look their module up while it loads.
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def dispatch_row(device: torch.device) -> dict:
    """Whether the dispatch hands tensors on this device to Triton (CUDA) or to naive (CPU), unforced."""
    start = time.perf_counter()
    want = "triton" if device.type == "cuda" else "naive"
    forced = os.environ.pop("JOINTRL_KERNELS", None)
    try:
        picked = {p: select_ops(f"jointrl.kernels.{p}", importlib.import_module(f"jointrl.kernels.{p}.naive"),
                                torch.zeros(1, device=device)).__name__.rsplit(".", 1)[-1] for p in parity.CASES}
    finally:
        if forced is not None:
            os.environ["JOINTRL_KERNELS"] = forced
    wrong = {p: path for p, path in picked.items() if path != want}
    summary = f"{device.type} tensors go to {want} for all {len(picked)} ops" if not wrong else f"not {want}: {wrong}"
    return row("kernels", "dispatch", "fail" if wrong else "ok", summary, time.perf_counter() - start, picked=picked)


def dtype_name(dtype: torch.dtype) -> str:
    """fp32 / bf16 / ... of a torch dtype."""
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float64: "fp64"}.get(dtype, str(dtype))


def kernel_row(case: parity.Case, dtype: torch.dtype) -> dict:
    """The row of one case in one precision: both verdicts, the tensor nearest its bound summarised."""
    start = time.perf_counter()
    result = parity.compare(case, dtype)
    checks = [("fwd", result["forward"])] + ([("bwd", result["backward"])] if result["backward"] else [])
    summary = "; ".join(f"{label} {v['rel_err']:.1e} {'<=' if v['passed'] else '>'} {v['bound']:.0e} "
                        f"({v['tensor']}, abs {v['max_abs_err']:.1e})" for label, v in checks)
    return row("kernels", f"{case.package}.{case.name} {dtype_name(dtype)}", "ok" if result["passed"] else "fail",
               summary, time.perf_counter() - start, dtype=dtype_name(dtype), forward=result["forward"],
               backward=result["backward"])


def kernels(device: torch.device, quick: bool) -> list[dict]:
    """Section: every Triton kernel against naive and the fp64 truth (fp32 and bf16 on CUDA, fp32 on CPU)."""
    sizes = parity.SIZES["small" if quick or device.type != "cuda" else "large"]
    # bf16 under the interpreter takes minutes on a few cores and checks nothing fp32 does not.
    dtypes = (torch.float32, torch.bfloat16) if device.type == "cuda" else (torch.float32,)
    rows = [dispatch_row(device)]
    for package, build in parity.CASES.items():
        torch.manual_seed(0)
        try:
            cases = build(sizes[package], device)
        except Exception as err:  # noqa: BLE001
            rows.append(row("kernels", f"{package} inputs", "error", first_line(err)))
            continue
        for case in cases:
            for dtype in dtypes:
                name = f"{package}.{case.name} {dtype_name(dtype)}"
                rows += guarded("kernels", name, lambda: [kernel_row(case, dtype)])
    return rows


def throughput(device: torch.device, quick: bool) -> list[dict]:
    """Section: each op's Triton (and naive) time, achieved rate and its ratio to the measured peak."""
    start = time.perf_counter()
    flop_peak, copy_peak = device_peaks(device)
    # FLOPs per byte above which a kernel can keep the matmul units busier than the memory.
    balance = flop_peak / copy_peak
    rows = [
        row("throughput", "peak bf16 matmul (8192^3)", "ok", f"{flop_peak / 1e12:.0f} TFLOP/s",
            time.perf_counter() - start, tflops=flop_peak / 1e12),
        row("throughput", "peak copy (1 GiB)", "ok", f"{copy_peak / 1e9:.0f} GB/s (read + write)",
            gbps=copy_peak / 1e9),
    ]
    sizes = QUICK_THROUGHPUT if quick else GPU_SIZES

    def measure(build) -> list[dict]:
        work = build(device, sizes)
        times = time_paths(work, device)
        if isinstance(times["triton"], str):
            raise RuntimeError(f"triton path: {times['triton']}")
        seconds = times["triton"]
        tflops, gbps = work.flops / seconds / 1e12, work.bytes / seconds / 1e9
        compute_bound = work.flops / work.bytes >= balance
        if compute_bound:
            metric, achieved, peak = "TFLOP/s", tflops, flop_peak / 1e12
        else:
            metric, achieved, peak = "GB/s", gbps, copy_peak / 1e9
        naive = times["naive"]
        versus = f"naive: {naive}" if isinstance(naive, str) else f"naive {naive * 1e3:.2f} ms, {naive / seconds:.1f}x"
        summary = (f"{seconds * 1e3:.2f} ms ({versus}); {tflops:.1f} TFLOP/s, {gbps:.0f} GB/s; "
                   f"{'compute' if compute_bound else 'memory'}-bound: {achieved / peak:.0%} of measured {metric}")
        return [row("throughput", work.name, "ok", summary, triton_ms=seconds * 1e3,
                    naive_ms=naive * 1e3 if not isinstance(naive, str) else None, tflops=tflops, gbps=gbps,
                    flops=work.flops, bytes=work.bytes, bound="compute" if compute_bound else "memory",
                    metric=metric, achieved=achieved, peak=peak, of_peak=achieved / peak)]

    for name, build in WORKLOADS.items():
        rows += guarded("throughput", name, lambda: measure(build))
    return rows


def learner(device: torch.device, quick: bool, preset: str = "small", dtype: str = "bf16",
            backend: str = "nccl") -> list[dict]:
    """Section: seconds and tokens/s of one learner step (LearnerGroup, one rank) after a warm-up step."""
    import ray

    from jointrl.model.transformer import Transformer
    from jointrl.rl.actor_group import start_ray
    from jointrl.rl.config.run import RunConfig
    from jointrl.rl.learner.group import LearnerGroup

    synth_batch = benchmark_module("learner").synth_batch
    sequences, length, reps = (8, 513, 1) if quick else (16, 1025, 2)
    cfg = RunConfig(
        model={"preset": preset}, algorithm={"routing_replay": "off"},
        learner=dict(ranks=1, ep_size=1, dtype=dtype, backend=backend, lr=1e-6, micro_batch_tokens=8192),
    )
    torch.manual_seed(0)
    state = Transformer(cfg.model).state_dict()
    batch = synth_batch(cfg.model.vocab_size, sequences, length)
    ours = not ray.is_initialized()
    placement = start_ray(0, 1, gpus=device.type == "cuda")
    try:
        group = LearnerGroup(cfg, state, placement=placement)
        try:
            first = group.train_step(*batch)
            steps = [group.train_step(*batch) for _ in range(reps)]
        finally:
            group.shutdown()
    finally:
        if ours:
            ray.shutdown()
    seconds = min(s["perf/learner_s"] for s in steps)
    tokens = steps[0]["learner/tokens"]
    skipped = sum(s["learner/skipped"] for s in [first, *steps])
    finite = all(math.isfinite(s["learner/grad_norm"]) for s in [first, *steps])
    status = "ok" if finite and not skipped else "fail"
    summary = (f"{seconds:.2f} s/step, {tokens / seconds:,.0f} tokens/s ({tokens:.0f} tokens; warm-up step "
               f"{first['perf/learner_s']:.1f} s)" + ("" if status == "ok" else "; a step was skipped (non-finite)"))
    name = f"learner step ({preset}, {dtype}, {backend}, 1 rank)"
    return [row("learner", name, status, summary, seconds_per_step=seconds, tokens_per_s=tokens / seconds,
                tokens=tokens, warmup_s=first["perf/learner_s"], grad_norm=steps[-1]["learner/grad_norm"])]


def engine(device: torch.device, quick: bool, preset: str = "small", dtype: torch.dtype = torch.bfloat16) -> list[dict]:
    """Section: generated tokens/s of the rollout Engine on scripted two-turn episodes, after a warm-up."""
    from jointrl.model.presets import load_preset
    from jointrl.model.transformer import Transformer

    rollout = benchmark_module("rollout")
    episodes, prompt, feed, gen = (16, 64, 16, 32) if quick else (64, 256, 64, 128)
    cfg = load_preset(preset)
    torch.manual_seed(0)
    model = Transformer(cfg).to(device=device, dtype=dtype).eval()
    rollout.run_engine(model, rollout.scripts(2, 2, 8, 4, cfg.vocab_size, seed=1), 2)
    out, seconds = rollout.run_engine(model, rollout.scripts(episodes, 2, prompt, feed, cfg.vocab_size, seed=0), gen)
    tokens = sum(map(len, out))
    if tokens != episodes * 2 * gen:
        raise RuntimeError(f"scripted turns generated {tokens} tokens, not {episodes * 2 * gen}")
    summary = (f"{tokens / seconds:,.0f} generated tokens/s ({episodes} rows x 2 turns x {gen} tokens, "
               f"prompt {prompt}, tool result {feed}; {seconds:.1f} s)")
    return [row("engine", f"engine ({preset}, {dtype_name(dtype)})", "ok", summary, tokens_per_s=tokens / seconds,
                tokens=tokens, rows=episodes)]


def run_in_own_group(command: list[str], timeout_s: float) -> tuple[int, str]:
    """(exit status, stdout + stderr) of command run from the repository root in a new process group.

    On timeout the whole group gets SIGTERM, then SIGKILL: the script's Ray head and agents live in its
    group, and killing only the script would leave them running. Then raises subprocess.TimeoutExpired.
    """
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            # Whatever of the group outlived the request, the script included.
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise
    return proc.returncode, output


def weight_sync(device: torch.device, quick: bool) -> list[dict]:
    """Section: the rows of benchmarks/weight_sync.py run in a subprocess, or a row saying it does not exist."""
    script = HERE / "weight_sync.py"
    if not script.is_file():
        return [row("weight_sync", "weight_sync.py", "skipped", "benchmarks/weight_sync.py does not exist")]
    start = time.perf_counter()
    # Its layouts put one learner rank on each GPU: only one rank when there is one GPU.
    ranks = "1,2" if device.type == "cuda" and torch.cuda.device_count() > 1 else "1"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "weight_sync.json"
        command = [sys.executable, str(script), "--device", device.type, "--ranks", ranks, "--json", str(out)]
        returncode, output = run_in_own_group(command, WEIGHT_SYNC_TIMEOUT_S)
        if returncode != 0:
            tail = output.strip().splitlines()
            raise RuntimeError(f"weight_sync.py exited {returncode}: {tail[-1] if tail else 'no output'}")
        data = json.loads(out.read_text())
    found = data.get("rows", [data]) if isinstance(data, dict) else data
    rows = []
    for i, item in enumerate(found):
        fields = item if isinstance(item, dict) else {"value": item}
        name = str(fields.get("name", f"row {i}"))
        summary = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items()
                            if k != "name" and isinstance(v, (int, float, str)))
        rows.append(row("weight_sync", name, "ok", summary[:200], data=fields))
    if rows:
        rows[0]["seconds"] = round(time.perf_counter() - start, 3)
    return rows


def json_safe(value):
    """value with non-finite floats as the strings "inf", "-inf", "nan" (strict JSON has no such numbers)."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def skipped(section: str) -> list[dict]:
    """The row of a section that needs CUDA, on a machine without it."""
    return [row(section, section, "skipped", "skipped: needs CUDA")]


def print_table(report: dict, console: Console) -> None:
    """Every row in one rich table, then the totals."""
    colour = {"ok": "green", "fail": "red", "error": "red", "skipped": "yellow"}
    table = Table(title=f"gpu_check on {report['device']}", show_lines=False)
    for column in ("section", "check", "status", "result", "s"):
        table.add_column(column, justify="right" if column == "s" else "left", overflow="fold")
    for section in report["sections"].values():
        for r in section["rows"]:
            # Error messages hold brackets ("[B, T, K]") that rich would read as markup.
            status = f"[{colour[r['status']]}]{r['status']}[/]"
            table.add_row(r["section"], escape(r["name"]), status, escape(r["summary"]), f"{r['seconds']:.1f}")
    console.print(table)
    counts = {s: sum(r["status"] == s for sec in report["sections"].values() for r in sec["rows"]) for s in colour}
    totals = ", ".join(f"{n} {s}" for s, n in counts.items())
    console.print(f"{totals}; {report['total_s']:.0f} s in all", soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen sections, write the JSON, print the table; 1 when any row failed or errored."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer steps")
    parser.add_argument("--json", default="runs/gpu_check/gpu_check.json", help="where the JSON report goes")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}; known: {', '.join(SECTIONS)}")
    console = Console()
    if not console.is_terminal:
        # A pipe or a log file gets 80 columns by default, which folds every result over several lines.
        console = Console(width=180)
    device = torch.device("cuda" if CUDA else "cpu")
    if not CUDA:
        console.print("no GPU: running the CPU-safe parts only (kernel correctness in fp32 under the Triton "
                      "interpreter); throughput, learner, engine and weight_sync are skipped", soft_wrap=True)
    started = time.perf_counter()
    cpu = f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    report = {
        "device": torch.cuda.get_device_name(device) if CUDA else cpu,
        "cuda": CUDA, "quick": args.quick, "torch": torch.__version__, "triton": triton.__version__,
        "cuda_version": torch.version.cuda, "nccl": ".".join(map(str, torch.cuda.nccl.version())) if CUDA else None,
        "python": platform.python_version(), "triton_interpret": os.environ.get("TRITON_INTERPRET") == "1",
        "tolerance_floor": {dtype_name(d): v for d, v in parity.FLOOR.items()},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "total_s": 0.0, "sections": {},
    }
    functions = {"kernels": kernels, "throughput": throughput, "learner": learner, "engine": engine,
                 "weight_sync": weight_sync}
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    for name in chosen:
        start = time.perf_counter()
        if name != "kernels" and not CUDA:
            rows = skipped(name)
        else:
            rows = guarded(name, name, lambda: functions[name](device, args.quick))
        report["sections"][name] = {"seconds": round(time.perf_counter() - start, 3), "rows": rows}
        report["total_s"] = round(time.perf_counter() - started, 3)
        # Rewritten after every section, so a run stopped from outside still leaves what it measured.
        path.write_text(json.dumps(json_safe(report), indent=1, allow_nan=False) + "\n")
    print_table(report, console)
    console.print(f"wrote {path}", soft_wrap=True)
    bad = [r for sec in report["sections"].values() for r in sec["rows"] if r["status"] in ("fail", "error")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
