"""Each Triton op next to its naive form on the same inputs, both measured against naive.py on fp64 copies.

What benchmarks/gpu_check.py runs natively on a GPU (and under the Triton interpreter on a CPU): one Case per
public function of kernels/<op>/triton.py, forward and, where the op is differentiable, the gradient of every
float input under fixed cotangents.

Error of a tensor = max |path - truth| / max |truth|: relative to the tensor's largest value, so near-zero
elements do not dominate. The Triton path passes when its error is at most max(2 x the naive path's own error,
FLOOR[dtype]): flash-attention's rule, with a floor because some naive ops compute in fp32 even on fp64 inputs
(KDA, sparse attention, the MoE combine), so there the truth itself carries fp32 rounding. Triton outputs are
poisoned to NaN first (JOINTRL_POISON_OUTPUTS), so an element no program writes fails.

Shape legend: T = tokens, H = heads, K = key dim (KDA), contraction dim (MXFP4) or listed slots (sparse
attention), V = value dim or vocabulary, Hi / I = indexer heads / dim, E = latent key width, N = tokens or
output features, X = experts, k = experts per token, M = sorted token copies or rows, D = hidden dim.
"""
from __future__ import annotations

import contextlib
import importlib
import math
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

import torch

from jointrl.kernels.sparse_attn import naive as sparse_naive
from jointrl.kernels.workloads import causal_indices, kda_inputs, moe_inputs, mxfp4_weight

# fp32: about 84 ulps of the largest value; bf16: 2.6 ulps.
FLOOR = {torch.float32: 1e-5, torch.bfloat16: 2e-2}

# Sizes per op: `small` (the CPU interpreter) keeps T = 63 and other sizes off the kernels' tiles;
# `large` (GPU) has ragged edges too (1000 is no multiple of 64).
SIZES = {
    "small": dict(
        kda=dict(t=63, h=2, dk=16, dv=32, chunk=16, t_recurrent=17),
        sparse_attn=dict(t=63, hi=2, i=24, listed=8, topk=8, h=2, e=24, v_dim=16, k=8),
        moe=dict(n=37, experts=4, top_k=2, d=40, f=72),
        mxfp4=dict(m=63, n=72, k=96, experts=3),
        logprobs=dict(n=63, v=100, d=40, chunk=24),
    ),
    "large": dict(
        kda=dict(t=1000, h=4, dk=128, dv=128, chunk=64, t_recurrent=200),
        sparse_attn=dict(t=1000, hi=8, i=64, listed=256, topk=256, h=16, e=576, v_dim=512, k=256),
        moe=dict(n=2000, experts=16, top_k=4, d=1024, f=512),
        mxfp4=dict(m=1000, n=1024, k=2048, experts=8),
        logprobs=dict(n=2000, v=32000, d=1024, chunk=8192),
    ),
}


@dataclass
class Case:
    """One op call compared across paths."""

    name: str
    package: str  # jointrl.kernels.<package>
    inputs: dict[str, torch.Tensor]  # float inputs, fp32; each path gets copies in its precision
    outputs: tuple[str, ...]  # names of what call returns, in order
    call: Callable[..., list[torch.Tensor]]  # (ops module, *inputs) -> outputs
    backward: bool = True  # whether the op is differentiable (gradients of every input are compared)


def kda_cases(s: dict, device: torch.device) -> list[Case]:
    """chunk_kda (ragged last chunk, initial state) and recurrent_kda."""
    q, k, v, g, beta, scale = kda_inputs(s["t"], s["h"], s["dk"], s["dv"], device)
    state = torch.randn(1, s["h"], s["dk"], s["dv"], device=device)  # [B, H, K, V]
    inputs = dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=state)
    short = {name: x if name == "initial_state" else x[:, : s["t_recurrent"]] for name, x in inputs.items()}
    chunk = s["chunk"]
    return [
        Case("chunk_kda", "kda", inputs, ("o", "final_state"),
             lambda ops, *x: list(ops.chunk_kda(*x[:5], scale, x[5], True, chunk))),
        Case("recurrent_kda", "kda", short, ("o", "final_state"),
             lambda ops, *x: list(ops.recurrent_kda(*x[:5], scale, x[5], True))),
    ]


def sparse_cases(s: dict, device: torch.device) -> list[Case]:
    """Indexer scores (all slots, listed slots), indexer top-k, listed attention and its mass."""
    t = s["t"]
    indexer = dict(q=torch.randn(1, t, s["hi"], s["i"], device=device),  # [1, T, Hi, I]
                   weights=torch.randn(1, t, s["hi"], device=device),  # [1, T, Hi]
                   k=torch.randn(1, t, s["i"], device=device))  # [1, T, I]
    listed = causal_indices(t, s["listed"], device)  # [1, T, K]
    valid = torch.ones(1, t, dtype=torch.bool, device=device)
    attention = dict(q=torch.randn(1, t, s["h"], s["e"], device=device),  # [1, T, H, E]
                     kv=torch.randn(1, t, s["e"], device=device))  # [1, T, E]
    indices = causal_indices(t, s["k"], device)  # [1, T, K]
    scale, v_dim, topk = s["e"] ** -0.5, s["v_dim"], s["topk"]

    def ranked_scores(ops, q, w, k):
        # Slots are compared through the fp64 scores they stand for: near-ties may swap slots, never scores.
        picked = ops.indexer_topk(q, w, k, valid, 0, topk)  # [1, T, topk]
        scores = sparse_naive.indexer_scores(q.double(), w.double(), k.double()).double()  # [1, T, S]
        return [scores.gather(-1, picked.clamp_min(0)).masked_fill(picked < 0, 0.0)]

    return [
        Case("indexer_scores all slots", "sparse_attn", indexer, ("scores",),
             lambda ops, q, w, k: [ops.indexer_scores(q, w, k)]),
        Case("indexer_scores listed", "sparse_attn", indexer, ("scores",),
             lambda ops, q, w, k: [ops.indexer_scores(q, w, k, listed)]),
        Case("indexer_topk", "sparse_attn", indexer, ("ranked scores",), ranked_scores, backward=False),
        Case("sparse_mla_attention", "sparse_attn", attention, ("out",),
             lambda ops, q, kv: [ops.sparse_mla_attention(q, kv, indices, scale, v_dim)]),
        Case("attention_mass", "sparse_attn", attention, ("mass",),
             lambda ops, q, kv: [ops.attention_mass(q, kv, indices, scale)], backward=False),
    ]


def moe_cases(s: dict, device: torch.device) -> list[Case]:
    """permute, grouped_swiglu (one expert without tokens) and unpermute_combine."""
    x, _, weights, gate, up, down = moe_inputs(s["n"], s["d"], s["f"], s["experts"], s["top_k"], device)
    scores = torch.rand(s["n"], s["experts"], device=device)  # [N, X]
    # Expert 1 gets no token: its weight gradients must come out zero, not unwritten.
    scores[:, 1] = -1.0
    ids = scores.topk(s["top_k"], dim=-1).indices  # [N, k] distinct experts
    counts = torch.bincount(ids.reshape(-1), minlength=s["experts"])  # [X]
    order = torch.argsort(ids.reshape(-1), stable=True)  # [M]
    m = ids.numel()
    experts = dict(x_sorted=torch.randn(m, s["d"], device=device), gate=gate, up=up, down=down)  # [M, D], [X, F, D], ..
    combine = dict(y_sorted=torch.randn(m, s["d"], device=device), weights=weights)  # [M, D], [N, k]
    return [
        Case("permute", "moe", dict(x=x), ("x_sorted", "order", "counts"),
             lambda ops, x: [t if t.is_floating_point() else t.double() for t in ops.permute(x, ids, s["experts"])]),
        Case("grouped_swiglu", "moe", experts, ("y_sorted",),
             lambda ops, xs, g, u, dn: [ops.grouped_swiglu(xs, counts, g, u, dn)]),
        Case("unpermute_combine", "moe", combine, ("out",),
             lambda ops, y, w: [ops.unpermute_combine(y, order, w)]),
    ]


def mxfp4_cases(s: dict, device: torch.device) -> list[Case]:
    """mxfp4_matmul with bias, and mxfp4_grouped_matmul with per-expert bias and one expert without rows."""
    blocks, scales = mxfp4_weight(s["n"], s["k"], None, device)
    grouped_blocks, grouped_scales = mxfp4_weight(s["n"], s["k"], s["experts"], device)
    counts = torch.full((s["experts"],), s["m"] // (s["experts"] - 1), device=device)  # [X]
    counts[1] = 0
    counts[-1] += s["m"] - int(counts.sum())
    dense = dict(x=torch.randn(s["m"], s["k"], device=device), bias=torch.randn(s["n"], device=device))  # [M, K], [N]
    grouped = dict(x_sorted=dense["x"], bias=torch.randn(s["experts"], s["n"], device=device))  # [M, K], [X, N]
    return [
        Case("mxfp4_matmul", "mxfp4", dense, ("out",), lambda ops, x, b: [ops.mxfp4_matmul(x, blocks, scales, b)]),
        Case("mxfp4_grouped_matmul", "mxfp4", grouped, ("out",),
             lambda ops, x, b: [ops.mxfp4_grouped_matmul(x, counts, grouped_blocks, grouped_scales, b)]),
    ]


def logprobs_cases(s: dict, device: torch.device) -> list[Case]:
    """token_logprobs with entropy, several vocabulary chunks, temperature 0.7."""
    # Logits spread over a few units, as a trained head's; targets include ids 0 and V - 1.
    inputs = dict(hidden=torch.randn(s["n"], s["d"], device=device) * 1.5,  # [N, D]
                  weight=torch.randn(s["v"], s["d"], device=device) * (2.0 / s["d"] ** 0.5))  # [V, D]
    targets = torch.randint(0, s["v"], (s["n"],), device=device)  # [N]
    targets[0], targets[-1] = 0, s["v"] - 1
    return [Case("token_logprobs", "logprobs", inputs, ("logprobs", "entropy"),
                 lambda ops, h, w: list(ops.token_logprobs(h, w, targets, 0.7, s["chunk"], True)))]


# op package -> builder(sizes of that op, device) of its cases; every public function of its triton.py is one.
CASES = {"kda": kda_cases, "sparse_attn": sparse_cases, "moe": moe_cases, "mxfp4": mxfp4_cases,
         "logprobs": logprobs_cases}


def cotangent(out: torch.Tensor, i: int) -> torch.Tensor:
    """The fixed fp64 cotangent of output i, of both signs, the same on every path."""
    gen = torch.Generator().manual_seed(1000 + i)
    return torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out.device)


def run_path(case: Case, ops: ModuleType, dtype: torch.dtype) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(outputs, input gradients) of one path on inputs cast to dtype, as fp64."""
    leaves = [x.detach().to(dtype).requires_grad_(case.backward) for x in case.inputs.values()]
    outputs = case.call(ops, *leaves)
    grads = []
    if case.backward:
        # -inf scores (unlisted slots) carry no gradient in the model's loss either.
        loss = sum((torch.where(torch.isfinite(o), o, 0).double() * cotangent(o, i)).sum()
                   for i, o in enumerate(outputs) if o.requires_grad)
        grads = torch.autograd.grad(loss, leaves, allow_unused=True)
        grads = [torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads)]
    return [o.detach().double() for o in outputs], [g.detach().double() for g in grads]


def errors(got: torch.Tensor, truth: torch.Tensor) -> tuple[float, float]:
    """(max |got - truth|, that / max |truth|); both inf when got is non-finite where truth is not, or the reverse."""
    finite = torch.isfinite(truth)
    if got.shape != truth.shape or not torch.equal(torch.isfinite(got), finite):
        return math.inf, math.inf
    if not torch.equal(got[~finite], truth[~finite]):
        return math.inf, math.inf
    if not finite.any():
        return 0.0, 0.0
    diff = (got[finite] - truth[finite]).abs().max().item()
    scale = truth[finite].abs().max().item()
    return diff, (diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf))


def verdict(names, got, naive, truth, dtype: torch.dtype) -> dict:
    """Per tensor: Triton's error, the naive path's, the bound; and the tensor nearest its bound."""
    tensors = []
    for name, g, n, t in zip(names, got, naive, truth):
        abs_err, rel_err = errors(g, t)
        naive_rel = errors(n, t)[1]
        bound = max(2 * naive_rel, FLOOR[dtype])
        tensors.append(dict(tensor=name, max_abs_err=abs_err, rel_err=rel_err, naive_rel_err=naive_rel, bound=bound,
                            passed=rel_err <= bound))
    worst = max(tensors, key=lambda x: x["rel_err"] / x["bound"] if math.isfinite(x["rel_err"]) else math.inf)
    return dict(worst, passed=all(x["passed"] for x in tensors), tensors=tensors)


@contextlib.contextmanager
def _poisoned():
    """Kernel output buffers NaN-filled inside the block (jointrl.kernels.buffers reads this at each call)."""
    previous = os.environ.get("JOINTRL_POISON_OUTPUTS")
    os.environ["JOINTRL_POISON_OUTPUTS"] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("JOINTRL_POISON_OUTPUTS")
        else:
            os.environ["JOINTRL_POISON_OUTPUTS"] = previous


def compare(case: Case, dtype: torch.dtype, triton_ops: ModuleType | None = None) -> dict:
    """{forward, backward (None without one), passed} of the case in dtype; triton_ops defaults to <op>.triton."""
    triton_ops = triton_ops or importlib.import_module(f"jointrl.kernels.{case.package}.triton")
    naive_ops = importlib.import_module(f"jointrl.kernels.{case.package}.naive")
    with _poisoned():
        got = run_path(case, triton_ops, dtype)
    naive = run_path(case, naive_ops, dtype)
    truth = run_path(case, naive_ops, torch.float64)
    forward = verdict(case.outputs, got[0], naive[0], truth[0], dtype)
    backward = verdict([f"d_{n}" for n in case.inputs], got[1], naive[1], truth[1], dtype) if case.backward else None
    passed = forward["passed"] and (backward is None or backward["passed"])
    return dict(forward=forward, backward=backward, passed=passed)
