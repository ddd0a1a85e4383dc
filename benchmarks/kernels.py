"""Scaling figures the kernel design relies on, each a ratio against a baseline measured in the same run.

Usage: python benchmarks/kernels.py [--quick]     (--quick: tiny sizes, a smoke check in seconds)

On CPU it measures the pure-torch (naive) paths:
  (a) logprobs peak memory, vocabulary-chunked vs full [T, V] fp32 logits, forward + backward;
  (b) sparse attention over k listed keys (fixed k) vs dense causal attention, at growing T;
  (c) KDA chunkwise vs token-by-token recurrent form;
  (d) MoE expert compute: sort-and-group (permute, grouped SwiGLU, combine) vs two baselines, a per-expert
      loop over nn.Linear with boolean routing masks and a dense all-experts pass.
On CUDA it also times each op's Triton path against its naive path and prints the achieved FLOP rate
and compulsory-traffic bandwidth against the device's measured peaks (a bf16 matmul and a copy); the
workloads and their FLOP and byte counts are jointrl.kernels.workloads, shared with benchmarks/gpu_check.py.

Peak memory on CPU: each variant runs in a fresh spawned process that builds its inputs, resets the
kernel's resident-set high-water mark (/proc/self/clear_refs = 5) and reads VmHWM after one forward +
backward step; the figure is VmHWM minus the resident set before the step. glibc hands buffers above
32 MiB out with mmap and unmaps them on free, so the resident set follows the step's tensors and a
fresh process keeps earlier variants' freed memory out. On CUDA: torch.cuda.max_memory_allocated.
Timings are the best of a few runs (one run for the slowest cases); nothing here asserts a timing.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import gc
import importlib
import math
import multiprocessing
import resource
import time

import torch
import torch.nn.functional as F

from jointrl.kernels.workloads import (
    GPU_SIZES,
    WORKLOADS,
    best_time,
    causal_indices,
    device_peaks,
    grouped_moe,
    kda_inputs,
    moe_inputs,
    time_paths,
)

# Shape legend: T = tokens, V = vocabulary, D = hidden dim, C = vocabulary chunk, H = heads, E = key
# width, K = listed keys per query (sparse attention) or key dim (KDA), X = experts, k = experts per token.
FULL = {
    "logprobs": dict(t=4096, v=32768, d=128, chunk=4096),
    "sparse": dict(ts=(2048, 8192, 32768), h=4, e=48, v_dim=32, k=64, dense_full_up_to=8192),
    "kda": dict(t=4096, h=2, dk=32, dv=32, chunk=64),
    "moe": dict(n=2048, d=256, f=256, experts=16, top_k=2),
}
QUICK = {
    "logprobs": dict(t=256, v=2048, d=64, chunk=256),
    "sparse": dict(ts=(512, 1024, 4096), h=2, e=24, v_dim=16, k=16, dense_full_up_to=1024),
    "kda": dict(t=256, h=2, dk=16, dv=16, chunk=32),
    "moe": dict(n=128, d=64, f=64, experts=8, top_k=2),
}


def _mib(n_bytes: float) -> str:
    return f"{n_bytes / 2**20:,.1f} MiB"


def _rss_bytes(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _logprobs_step(variant: str, hidden, weight, targets, chunk: int) -> None:
    from jointrl.kernels.logprobs import naive

    if variant == "full":
        logprobs, entropy = naive.full_logprobs(hidden, weight, targets)
    else:
        logprobs, entropy = naive.token_logprobs(hidden, weight, targets, chunk_size=chunk)
    (logprobs.sum() + entropy.sum()).backward()


def logprobs_peak(variant: str, t: int, v: int, d: int, chunk: int) -> tuple[int, float]:
    """(peak bytes above the inputs, seconds) of one forward + backward step; run in a fresh process."""
    torch.manual_seed(0)
    hidden = (torch.randn(t, d) * 1.5).requires_grad_()  # [T, D]
    weight = (torch.randn(v, d) / d**0.5).requires_grad_()  # [V, D]
    targets = torch.randint(0, v, (t,))  # [T]
    # A tiny step first, so thread pools and lazily loaded code are in the baseline, not the peak.
    _logprobs_step(variant, hidden[:8].detach().requires_grad_(), weight[:64].detach().requires_grad_(),
                   targets[:8] % 64, chunk)
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        before, field = _rss_bytes("VmRSS"), "VmHWM"
    except OSError:
        # No resettable high-water mark: ru_maxrss, whose maximum so far is the setup above.
        before, field = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, ""
    start = time.perf_counter()
    _logprobs_step(variant, hidden, weight, targets, chunk)
    seconds = time.perf_counter() - start
    peak = _rss_bytes(field) if field else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return peak - before, seconds


def bench_logprobs_memory(t: int, v: int, d: int, chunk: int) -> None:
    print(f"(a) logprobs peak memory, forward + backward, T={t} V={v} D={d}, chunk C={chunk}, fp32")
    spawn = multiprocessing.get_context("spawn")
    peaks = {}
    for variant in ("full", "chunked"):
        with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            peaks[variant] = pool.submit(logprobs_peak, variant, t, v, d, chunk).result()
        print(f"    {variant:8s} peak {_mib(peaks[variant][0]):>10s} above inputs   {peaks[variant][1]:6.2f} s")
    print(f"    one [T, V] fp32 buffer is {_mib(4 * t * v)}; one [T, C] buffer {_mib(4 * t * chunk)}")
    print(f"    ratio full / chunked peak: {peaks['full'][0] / max(1, peaks['chunked'][0]):.1f}x lower"
          f"   (time chunked / full: {peaks['chunked'][1] / peaks['full'][1]:.2f})")


def dense_attention(q, kv, scale, v_dim, blocks=None, block=256):
    """Causal attention of query blocks over every earlier slot, one [block * H, S] score matrix at a time.

    q [B, T, H, E], kv [B, S, E] (shared keys, values kv[..., :v_dim]) -> [B, T, H, v_dim]; `blocks` picks
    which query blocks run (all by default). Plain bmm + softmax: on CPU this ran 3x faster than torch's
    scaled_dot_product_attention with shared (expanded) keys.
    """
    b, t, h, e = q.shape
    out = q.new_zeros(b, t, h, v_dim)
    for i in range(math.ceil(t / block)) if blocks is None else blocks:
        t0, t1 = i * block, min(t, (i + 1) * block)
        keys = kv[:, :t1]  # [B, t1, E]: causal, so later slots never matter
        scores = torch.bmm(q[:, t0:t1].reshape(b, -1, e), keys.transpose(1, 2)).mul_(scale)  # [B, c * H, t1]
        scores = scores.view(b, t1 - t0, h, t1)
        future = torch.arange(t1)[None, :] > torch.arange(t0, t1)[:, None]  # [c, t1]
        probs = scores.masked_fill_(future[None, :, None, :], float("-inf")).softmax(dim=-1)
        out[:, t0:t1] = torch.bmm(probs.view(b, -1, t1), keys[..., :v_dim]).view(b, t1 - t0, h, v_dim)
    return out


def dense_time(q, kv, scale, v_dim, full_up_to: int, block: int = 256) -> tuple[float, str]:
    """Seconds of dense attention; beyond `full_up_to` tokens, 8 evenly spaced query blocks scaled up.

    A block's cost grows linearly with its position (it sees every earlier slot), so the mean of evenly
    spaced blocks times the number of blocks estimates the whole causal pass.
    """
    n_blocks = math.ceil(q.shape[1] / block)
    if q.shape[1] <= full_up_to:
        return best_time(lambda: dense_attention(q, kv, scale, v_dim, block=block), repeats=1), ""
    sample = [round(i * (n_blocks - 1) / 7) for i in range(8)]
    seconds = best_time(lambda: dense_attention(q, kv, scale, v_dim, sample, block), repeats=1)
    return seconds * n_blocks / len(sample), f"(estimated from {len(sample)} of {n_blocks} query blocks)"


def bench_sparse(ts, h: int, e: int, v_dim: int, k: int, dense_full_up_to: int) -> None:
    from jointrl.kernels.sparse_attn import naive

    print(f"(b) attention forward, H={h} E={e} value width {v_dim}: sparse over K={k} listed keys vs dense causal")
    print(f"    dense = bmm + softmax over query blocks of 256 (never a [T, T] buffer); above T={dense_full_up_to}"
          " it times 8 evenly spaced blocks and scales up, to keep the run to minutes on 2 cores")
    rows = []
    for t in ts:
        q = torch.randn(1, t, h, e)  # [B, T, H, E]
        kv = torch.randn(1, t, e)  # [B, S, E]
        indices = causal_indices(t, k)  # [B, T, K]
        scale = e**-0.5
        with torch.no_grad():
            sparse = best_time(lambda: naive.sparse_mla_attention(q, kv, indices, scale, v_dim), repeats=2)
            dense, note = dense_time(q, kv, scale, v_dim, dense_full_up_to)
        rows.append((t, sparse, dense))
        print(f"    T={t:6d}  sparse {sparse * 1e3:9.1f} ms   dense {dense * 1e3:10.1f} ms   "
              f"dense/sparse {dense / sparse:7.2f}  {note}")
    for (t0, s0, d0), (t1, s1, d1) in zip(rows, rows[1:]):
        print(f"    T x{t1 / t0:.0f} ({t0} -> {t1}): sparse time x{s1 / s0:.1f} (linear: x{t1 / t0:.0f}), "
              f"dense time x{d1 / d0:.1f} (quadratic: x{(t1 / t0) ** 2:.0f})")


def bench_kda(t: int, h: int, dk: int, dv: int, chunk: int) -> None:
    from jointrl.kernels.kda import naive

    print(f"(c) KDA forward, T={t} H={h} K={dk} V={dv}: chunkwise (C={chunk}) vs recurrent")
    q, k, v, g, beta, scale = kda_inputs(t, h, dk, dv)
    with torch.no_grad():
        chunked = best_time(lambda: naive.chunk_kda(q, k, v, g, beta, scale, chunk_size=chunk))
        recurrent = best_time(lambda: naive.recurrent_kda(q, k, v, g, beta, scale), repeats=1)
        gap = (naive.chunk_kda(q, k, v, g, beta, scale, chunk_size=chunk)[0]
               - naive.recurrent_kda(q, k, v, g, beta, scale)[0]).abs().max().item()
    print(f"    chunkwise {chunked * 1e3:8.1f} ms   recurrent {recurrent * 1e3:8.1f} ms   "
          f"recurrent/chunkwise {recurrent / chunked:.1f}x   (outputs agree to {gap:.1e})")


def looped_moe(linears, x, ids, weights):
    """The per-expert loop: a boolean routing mask per expert, nn.Linear projections, index_add back."""
    out = torch.zeros_like(x)
    for e, (gate, up, down) in enumerate(linears):
        rows, slot = (ids == e).nonzero(as_tuple=True)
        if rows.numel() == 0:
            continue
        picked = x[rows]  # [n_e, D]
        y = down(F.silu(gate(picked)) * up(picked)) * weights[rows, slot, None]
        out.index_add_(0, rows, y)
    return out


def dense_moe(x, ids, weights, gate, up, down):
    """Every expert on every token, weighted by the (mostly zero) dense gate matrix: -> [N, D]."""
    dense = x.new_zeros(x.shape[0], gate.shape[0]).scatter_(1, ids, weights.to(x.dtype))  # [N, X]
    out = torch.zeros_like(x)
    for e in range(gate.shape[0]):
        out += dense[:, e, None] * ((F.silu(x @ gate[e].t()) * (x @ up[e].t())) @ down[e].t())
    return out


def bench_moe(n: int, d: int, f: int, experts: int, top_k: int) -> None:
    from jointrl.kernels.moe import naive

    print(f"(d) MoE expert compute forward, N={n} D={d} F={f} X={experts} experts, top-{top_k}")
    x, ids, weights, gate, up, down = moe_inputs(n, d, f, experts, top_k)
    linears = []
    for e in range(experts):
        layers = [torch.nn.Linear(*shape, bias=False) for shape in ((d, f), (d, f), (f, d))]
        for layer, w in zip(layers, (gate[e], up[e], down[e])):
            layer.weight.data.copy_(w)
        linears.append(layers)
    with torch.no_grad():
        grouped = best_time(lambda: grouped_moe(naive, x, ids, weights, gate, up, down))
        looped = best_time(lambda: looped_moe(linears, x, ids, weights))
        dense = best_time(lambda: dense_moe(x, ids, weights, gate, up, down), repeats=2)
        gap = (grouped_moe(naive, x, ids, weights, gate, up, down) - looped_moe(linears, x, ids, weights)).abs().max()
    print(f"    grouped {grouped * 1e3:8.1f} ms   per-expert nn.Linear loop {looped * 1e3:8.1f} ms   "
          f"dense all-experts {dense * 1e3:8.1f} ms   (grouped vs loop agree to {gap.item():.1e})")
    print(f"    loop/grouped {looped / grouped:.2f}x   dense/grouped {dense / grouped:.2f}x "
          f"(dense does X/k = {experts / top_k:.0f}x the FLOPs)")


def bench_gpu(device: torch.device) -> None:
    flop_peak, copy_peak = device_peaks(device)
    print(f"CUDA {torch.cuda.get_device_name(device)}: measured bf16 matmul {flop_peak / 1e12:.0f} TFLOP/s, "
          f"copy {copy_peak / 1e9:.0f} GB/s")
    for build in WORKLOADS.values():
        work = build(device, GPU_SIZES)
        try:
            importlib.import_module(f"jointrl.kernels.{work.package}.triton")
        except ImportError as err:
            print(f"    {work.name}: no Triton form here ({err})")
            continue
        times = time_paths(work, device)
        failed = {path: t for path, t in times.items() if isinstance(t, str)}
        for path, why in failed.items():
            print(f"    {work.name} [{path}]: failed: {why}")
        if failed:
            continue
        rate, band = work.flops / times["triton"], work.bytes / times["triton"]
        print(f"    {work.name}: naive {times['naive'] * 1e3:8.2f} ms  triton {times['triton'] * 1e3:8.2f} ms  "
              f"speed-up {times['naive'] / times['triton']:5.2f}x  |  triton {rate / 1e12:6.1f} TFLOP/s "
              f"({100 * rate / flop_peak:4.1f}% of matmul peak), {band / 1e9:6.0f} GB/s compulsory "
              f"({100 * band / copy_peak:4.1f}% of copy peak)")
    torch.cuda.reset_peak_memory_stats(device)
    c = GPU_SIZES["logprobs"]
    hidden = torch.randn(c["t"], c["d"], device=device, requires_grad=True)
    weight = torch.randn(c["v"] // 4, c["d"], device=device, requires_grad=True)
    targets = torch.randint(0, c["v"] // 4, (c["t"],), device=device)
    from jointrl.kernels.logprobs import naive

    peaks = {}
    for variant, fn in (("full", naive.full_logprobs), ("chunked", naive.token_logprobs)):
        hidden.grad = weight.grad = None
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        lp, ent = fn(hidden, weight, targets)
        (lp.sum() + ent.sum()).backward()
        del lp, ent
        peaks[variant] = torch.cuda.max_memory_allocated(device) - base
    print(f"    logprobs naive peak on CUDA, fp32 T={c['t']} V={c['v'] // 4} D={c['d']}: full {_mib(peaks['full'])}, "
          f"chunked {_mib(peaks['chunked'])}, ratio {peaks['full'] / peaks['chunked']:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke check in seconds")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    mode = "quick" if args.quick else "full"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, {mode} sizes")
    start = time.perf_counter()
    bench_logprobs_memory(**sizes["logprobs"])
    bench_sparse(**sizes["sparse"])
    bench_kda(**sizes["kda"])
    bench_moe(**sizes["moe"])
    if torch.cuda.is_available() and not args.quick:
        bench_gpu(torch.device("cuda"))
    elif not torch.cuda.is_available():
        print("no CUDA device: Triton timings skipped (tests/kernels check the Triton kernels under the interpreter)")
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
