"""Model-like inputs for the ops, the FLOPs and compulsory bytes of one call, and the device's measured peaks.

benchmarks/kernels.py and benchmarks/gpu_check.py both time these, so the work and its count live in one place.

Shape legend: T = tokens, V = vocabulary, D = hidden dim, H = heads, E = key width, K = listed keys per query
(sparse attention), key dim (KDA) or contraction dim (MXFP4), X = experts, k = experts per token,
N = output features, M = rows.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

# Sizes at which a GPU runs each op for a while, in bf16: roughly one layer of a mid-sized model.
GPU_SIZES = {
    "logprobs": dict(t=8192, v=131072, d=4096, chunk=8192),
    "sparse": dict(t=4096, h=16, e=576, v_dim=512, k=1024),
    "kda": dict(t=8192, h=16, dk=128, dv=128, chunk=64),
    "moe": dict(n=8192, d=2048, f=1024, experts=64, top_k=4),
    # Prefill through MXFP4 experts (many rows per expert), and one decode step of a dense MXFP4 projection.
    "mxfp4": dict(m=32768, experts=64, n=2048, k=2048, decode_m=16, decode_n=8192, decode_k=8192),
}


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on CPU), so a timer sees finished work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_time(fn, device: torch.device = torch.device("cpu"), repeats: int = 5) -> float:
    """Best wall time of `repeats` calls of fn, in seconds: the minimum drops stalls caused by other processes."""
    best = math.inf
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - start)
    return best


def device_peaks(device: torch.device) -> tuple[float, float]:
    """(bf16 matmul FLOP/s, copy bytes/s) measured on this device: an 8192^3 matmul and a 1 GiB copy."""
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    matmul = best_time(lambda: a @ a, device, repeats=5)
    src = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    copy = best_time(lambda: dst.copy_(src), device, repeats=5)
    # A copy reads and writes every byte.
    return 2 * n**3 / matmul, 2 * src.numel() / copy


def causal_indices(t: int, k: int, device=None) -> torch.Tensor:
    """k random causal slots per query (slot <= query), -1 where the query has fewer than k: [1, T, K]."""
    reach = torch.arange(t, device=device)[:, None] + 1  # [T, 1] visible slots
    slots = (torch.rand(t, k, device=device) * reach).long()  # [T, K]
    return slots.masked_fill(torch.arange(k, device=device)[None, :] >= reach, -1)[None]


def kda_inputs(t: int, h: int, dk: int, dv: int, device=None, dtype=torch.float32):
    """Inputs in the layer's ranges: unit keys, beta in (0, 1), log decay g <= 0; and the scale."""
    q = torch.randn(1, t, h, dk, device=device, dtype=dtype)
    k = F.normalize(torch.randn(1, t, h, dk, device=device), dim=-1).to(dtype)
    v = torch.randn(1, t, h, dv, device=device, dtype=dtype)
    g = F.logsigmoid(torch.randn(1, t, h, dk, device=device)).to(dtype)
    beta = torch.rand(1, t, h, device=device, dtype=dtype)
    return q, k, v, g, beta, dk**-0.5


def moe_inputs(n: int, d: int, f: int, experts: int, top_k: int, device=None, dtype=torch.float32):
    """Tokens, router choice (distinct experts per token), weights and expert projections."""
    x = torch.randn(n, d, device=device, dtype=dtype)  # [N, D]
    ids = torch.rand(n, experts, device=device).argsort(dim=1)[:, :top_k]  # [N, k]
    weights = torch.softmax(torch.randn(n, top_k, device=device), dim=-1)  # [N, k]
    gate = torch.randn(experts, f, d, device=device, dtype=dtype) / d**0.5  # [X, F, D]
    up = torch.randn(experts, f, d, device=device, dtype=dtype) / d**0.5  # [X, F, D]
    down = torch.randn(experts, d, f, device=device, dtype=dtype) / f**0.5  # [X, D, F]
    return x, ids, weights, gate, up, down


def grouped_moe(moe, x, ids, weights, gate, up, down):
    """Permute copies by expert, grouped SwiGLU, weighted combine, with the functions of `moe`: -> [N, D]."""
    x_sorted, order, counts = moe.permute(x, ids, gate.shape[0])
    return moe.unpermute_combine(moe.grouped_swiglu(x_sorted, counts, gate, up, down), order, weights)


def mxfp4_weight(n: int, k: int, experts: int | None = None, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Random MXFP4 codes with scale bytes near 2^0: blocks [(X,) N, K/32, 16], scales [(X,) N, K/32] uint8."""
    lead = () if experts is None else (experts,)
    blocks = torch.randint(0, 256, (*lead, n, k // 32, 16), dtype=torch.uint8, device=device)
    # Bytes 118..135 are scales 2^-9..2^8: products stay far from fp32 and bf16 overflow.
    scales = torch.randint(118, 136, (*lead, n, k // 32), dtype=torch.uint8, device=device)
    return blocks, scales


@dataclass
class Workload:
    """One op call to time through the dispatch, with the work it does."""

    name: str
    package: str  # jointrl.kernels.<package>
    step: Callable[[], object]  # one call (forward, or forward + backward)
    flops: float  # floating-point operations of one call
    bytes: float  # compulsory traffic of one call: every input read once, every output written once


def _logprobs(device: torch.device, sizes: dict) -> Workload:
    from jointrl.kernels import logprobs

    c = sizes["logprobs"]
    hidden = torch.randn(c["t"], c["d"], device=device, dtype=torch.bfloat16, requires_grad=True)
    weight = (torch.randn(c["v"], c["d"], device=device) / c["d"] ** 0.5).to(torch.bfloat16).requires_grad_()
    targets = torch.randint(0, c["v"], (c["t"],), device=device)

    def step():
        lp, ent = logprobs.token_logprobs(hidden, weight, targets, chunk_size=c["chunk"])
        (lp.sum() + ent.sum()).backward()
        hidden.grad = weight.grad = None

    # Forward, recomputed logits, d_hidden and d_weight: four [T, V, D] matmuls.
    return Workload("logprobs fwd+bwd", "logprobs", step, 8 * c["t"] * c["v"] * c["d"],
                    2 * 2 * (c["t"] + c["v"]) * c["d"])


def _sparse_attention(device: torch.device, sizes: dict) -> Workload:
    from jointrl.kernels import sparse_attn

    s = sizes["sparse"]
    q = torch.randn(1, s["t"], s["h"], s["e"], device=device, dtype=torch.bfloat16)  # [1, T, H, E]
    kv = torch.randn(1, s["t"], s["e"], device=device, dtype=torch.bfloat16)  # [1, T, E]
    indices = causal_indices(s["t"], s["k"], device)  # [1, T, K]
    listed = int((indices >= 0).sum())
    return Workload("sparse_mla_attention fwd", "sparse_attn",
                    lambda: sparse_attn.sparse_mla_attention(q, kv, indices, s["e"] ** -0.5, s["v_dim"]),
                    2 * listed * s["h"] * (s["e"] + s["v_dim"]), 2 * listed * s["e"] + 2 * q.numel())


def _kda(device: torch.device, sizes: dict) -> Workload:
    from jointrl.kernels import kda

    k = sizes["kda"]
    args = kda_inputs(k["t"], k["h"], k["dk"], k["dv"], device, torch.bfloat16)
    # Approximate chunkwise count per token and head: scores and solve (4 C K + 4 C V), state terms (6 K V).
    flops = k["t"] * k["h"] * (4 * k["chunk"] * (k["dk"] + k["dv"]) + 6 * k["dk"] * k["dv"])
    return Workload("chunk_kda fwd", "kda", lambda: kda.chunk_kda(*args, chunk_size=k["chunk"]), flops,
                    sum(2 * t.numel() for t in args[:5]) + 2 * k["t"] * k["h"] * k["dv"])


def _moe(device: torch.device, sizes: dict) -> Workload:
    from jointrl.kernels import moe

    m = sizes["moe"]
    x, ids, weights, gate, up, down = moe_inputs(m["n"], m["d"], m["f"], m["experts"], m["top_k"], device,
                                                 torch.bfloat16)
    rows = m["n"] * m["top_k"]
    return Workload("MoE permute+grouped_swiglu+combine fwd", "moe",
                    lambda: grouped_moe(moe, x, ids, weights, gate, up, down),
                    6 * rows * m["d"] * m["f"], 2 * (gate.numel() * 3 + 4 * rows * m["d"]))


def _mxfp4_grouped(device: torch.device, sizes: dict) -> Workload:
    from jointrl.kernels import mxfp4

    f = sizes["mxfp4"]
    blocks, scales = mxfp4_weight(f["n"], f["k"], f["experts"], device)
    x_sorted = torch.randn(f["m"], f["k"], device=device, dtype=torch.bfloat16)  # [M, K]
    counts = torch.full((f["experts"],), f["m"] // f["experts"], device=device)  # [X]
    counts[-1] += f["m"] - f["experts"] * (f["m"] // f["experts"])
    # 4.25 bits per weight: half a byte per code plus one scale byte per 32 codes.
    return Workload("mxfp4_grouped_matmul fwd", "mxfp4",
                    lambda: mxfp4.mxfp4_grouped_matmul(x_sorted, counts, blocks, scales),
                    2 * f["m"] * f["n"] * f["k"],
                    2 * x_sorted.numel() + blocks.numel() + scales.numel() + 2 * f["m"] * f["n"])


def _mxfp4_decode(device: torch.device, sizes: dict) -> Workload:
    from jointrl.kernels import mxfp4

    f = sizes["mxfp4"]
    m, n, k = f["decode_m"], f["decode_n"], f["decode_k"]
    blocks, scales = mxfp4_weight(n, k, None, device)
    x = torch.randn(m, k, device=device, dtype=torch.bfloat16)  # [M, K]
    return Workload("mxfp4_matmul decode fwd", "mxfp4", lambda: mxfp4.mxfp4_matmul(x, blocks, scales),
                    2 * m * n * k, 2 * x.numel() + blocks.numel() + scales.numel() + 2 * m * n)


# name -> builder(device, sizes in GPU_SIZES layout) of a bf16 Workload; each builds only its own op's tensors.
WORKLOADS: dict[str, Callable[[torch.device, dict], Workload]] = {
    "logprobs": _logprobs,
    "sparse_attn": _sparse_attention,
    "kda": _kda,
    "moe": _moe,
    "mxfp4_grouped": _mxfp4_grouped,
    "mxfp4_decode": _mxfp4_decode,
}


def time_paths(work: Workload, device: torch.device, repeats: int = 3) -> dict[str, float | str]:
    """Best seconds of the workload on the naive and the Triton path; a path that fails gets its error instead."""
    times: dict[str, float | str] = {}
    previous = os.environ.get("JOINTRL_KERNELS")
    try:
        for path in ("naive", "triton"):
            os.environ["JOINTRL_KERNELS"] = path
            try:
                times[path] = best_time(work.step, device, repeats)
            except (RuntimeError, ValueError) as err:
                # torch.cuda.OutOfMemoryError is a RuntimeError: one path running out of memory is a result.
                times[path] = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            if device.type == "cuda":
                torch.cuda.empty_cache()
    finally:
        if previous is None:
            os.environ.pop("JOINTRL_KERNELS", None)
        else:
            os.environ["JOINTRL_KERNELS"] = previous
    return times
