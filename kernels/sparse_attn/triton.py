"""Triton form of the sparse-attention ops: same functions, signatures and results as naive.py, streamed.

Shape legend: B = batch rows, T = queries, S = key slots, K = listed slots per query, H = attention
heads, Hi = indexer heads, I = indexer dim, E = query/key width, C = value width (v_dim).

What each call launches (kernels in triton_indexer.py, triton_topk.py and triton_attention.py):
  indexer_scores        dense [B, T, S] tiles, or one program per query at its K listed slots; the
                        backward recomputes the ReLU dots. Dense dk is a deterministic per-key-block
                        reduction; listed dk is summed with fp32 atomic adds.
  indexer_topk          a streaming top-k per query block over key blocks with a running buffer of
                        the best keys: [B, T, S] never exists. Ties go to the later slot, as in naive.py.
  sparse_mla_attention  online softmax over the gathered rows (-1 skipped, nothing listed -> zeros),
                        saving fp32 lse; the backward recomputes probabilities from lse, writes dq,
                        and sums dkv with fp32 atomic adds (so dkv's rounding order is not fixed on GPU).
  attention_mass        lse from the forward kernel without its value pass, then one kernel summing
                        head probabilities per slot; it runs every training step, so it is a kernel.

fp32 inputs take IEEE-exact tl.dot (the naive path is the fp32 ground truth); bf16/fp16 inputs take
native tl.dot with fp32 accumulation, and, as flash attention does, the backward's second matmuls cast
their fp32 factor to the input dtype. bf16 can be checked only on a GPU: Triton 3.9's interpreter
misreads bf16 tl.dot operands (fp16 takes the same code and matches naive.py there). Out-of-range slot
numbers (>= S) are treated as unlisted to keep gathers in bounds, where naive.py raises; the model only
lists checked slots. No double backward.
"""
from __future__ import annotations

import torch
import triton
from torch.autograd.function import once_differentiable

from jointrl.kernels import buffers
from jointrl.kernels.sparse_attn import triton_attention, triton_indexer, triton_topk

# Tile sizes (powers of two; >= 16 where a tile enters tl.dot). One fixed config per kernel: the
# interpreter cannot autotune. Tiles and warp counts were checked by compiling every kernel for sm_90
# (bf16 and fp32, the 2.8T preset's dims): each fits in shared memory, and bf16 spills little or
# nothing; their speed is not measured yet.
_SCORE_BLOCK_T, _SCORE_BLOCK_S = 64, 64
_LISTED_BLOCK_K = 64
# Top-k: key slots scored per step, (query, head) rows per tl.dot, and buffered keys per program (a
# 2048-wide buffer then serves 2 queries: 32 KiB of int64, a register budget that still compiles).
_TOPK_BLOCK_S = 128
_TOPK_DOT_ROWS = 128
_TOPK_BUFFER_KEYS = 4096
_ATTN_BLOCK_K = 32
# Up to 32 heads share a gathered row: a [32, 512] fp32 accumulator is what registers hold comfortably.
_ATTN_MAX_BLOCK_H = 32


def _pow2(n: int, floor: int = 16) -> int:
    """The smallest power of two >= n and >= floor."""
    return max(floor, triton.next_power_of_2(max(1, n)))


def _log2(n: int) -> int:
    """log2 of a power of two."""
    return n.bit_length() - 1


def _precision(dtype: torch.dtype) -> str:
    """tl.dot input precision: exact for fp32/fp64 (TF32 would drift from the fp32 ground truth); ignored below."""
    return "ieee" if dtype in (torch.float32, torch.float64) else "tf32"


def _common(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """The tensors contiguous and in one dtype (tl.dot takes one operand dtype)."""
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return [t.to(dtype).contiguous() for t in tensors]


def _check_indexer(q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor) -> None:
    """ValueError unless q [B, T, Hi, I], weights [B, T, Hi], k [B, S, I] agree."""
    agree = q.dim() == 4 and weights.shape == q.shape[:3] and k.dim() == 3
    if not agree or k.shape[0] != q.shape[0] or k.shape[2] != q.shape[3]:
        raise ValueError(
            f"indexer inputs q {tuple(q.shape)}, weights {tuple(weights.shape)}, k {tuple(k.shape)}: "
            "expected q [B, T, Hi, I], weights [B, T, Hi], k [B, S, I]"
        )


def _check_listed(indices: torch.Tensor, b: int, t: int) -> None:
    """ValueError unless indices is an integer [B, T, K] list for these queries."""
    if indices.dim() != 3 or indices.shape[:2] != (b, t) or indices.is_floating_point():
        raise ValueError(
            f"indices {tuple(indices.shape)} {indices.dtype}: expected integer [B, T, K] with [B, T] = {(b, t)}"
        )


class _IndexerScores(torch.autograd.Function):
    """sum_h w_h relu(q_h . k_s) over all slots (indices None) or the listed ones; recompute backward."""

    @staticmethod
    def forward(ctx, q, weights, k, indices):
        in_dtypes = (q.dtype, weights.dtype, k.dtype)
        q, k = _common(q, k)
        weights = weights.contiguous()
        b, t, hi, i = q.shape
        s = k.shape[1]
        launch = dict(BLOCK_I=_pow2(i), PRECISION=_precision(q.dtype))
        with torch.cuda.device_of(q):
            if indices is None:
                out = buffers.empty(b, t, s, dtype=torch.float32, device=q.device)  # [B, T, S]
                if out.numel():
                    grid = (triton.cdiv(t, _SCORE_BLOCK_T), triton.cdiv(s, _SCORE_BLOCK_S), b)
                    triton_indexer.dense_scores_fwd[grid](
                        q, weights, k, out, t, s, hi, i,
                        BLOCK_T=_SCORE_BLOCK_T, BLOCK_S=_SCORE_BLOCK_S, num_warps=8, **launch,
                    )
            else:
                indices = indices.long().contiguous()
                out = buffers.empty(*indices.shape, dtype=torch.float32, device=q.device)  # [B, T, K]
                if out.numel():
                    triton_indexer.listed_scores_fwd[(t, b)](
                        q, weights, k, indices, out, t, s, hi, i, indices.shape[2],
                        BLOCK_H=_pow2(hi), BLOCK_K=_LISTED_BLOCK_K, num_warps=4, **launch,
                    )
        ctx.save_for_backward(q, weights, k, indices)
        ctx.in_dtypes = in_dtypes
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        q, weights, k, indices = ctx.saved_tensors
        grad = grad.float().contiguous()
        b, t, hi, i = q.shape
        s = k.shape[1]
        dq = buffers.empty_like(q)
        dw = buffers.empty(b, t, hi, dtype=torch.float32, device=q.device)
        launch = dict(BLOCK_I=_pow2(i), PRECISION=_precision(q.dtype))
        with torch.cuda.device_of(q):
            if indices is None:
                dk = buffers.empty_like(k)
                # With S = 0 (or T = 0) the loops run empty and the kernels write zeros.
                if b * t * hi:
                    triton_indexer.dense_scores_bwd_q[(triton.cdiv(t, _SCORE_BLOCK_T), hi, b)](
                        q, weights, k, grad, dq, dw, t, s, hi, i,
                        BLOCK_T=_SCORE_BLOCK_T, BLOCK_S=_SCORE_BLOCK_S, num_warps=8, **launch,
                    )
                if b * s:
                    triton_indexer.dense_scores_bwd_k[(triton.cdiv(s, _SCORE_BLOCK_S), b)](
                        q, weights, k, grad, dk, t, s, hi, i,
                        BLOCK_T=_SCORE_BLOCK_T, BLOCK_S=_SCORE_BLOCK_S, num_warps=8, **launch,
                    )
            else:
                # Atomic accumulation target: every listed row gets a sum, every other row stays 0.
                dk = torch.zeros(k.shape, dtype=torch.float32, device=k.device)
                if b * t * hi:
                    triton_indexer.listed_scores_bwd[(t, b)](
                        q, weights, k, indices, grad, dq, dw, dk, t, s, hi, i, indices.shape[2],
                        BLOCK_H=_pow2(hi), BLOCK_K=_LISTED_BLOCK_K, num_warps=8, **launch,
                    )
        q_dtype, w_dtype, k_dtype = ctx.in_dtypes
        return dq.to(q_dtype), dw.to(w_dtype), dk.to(k_dtype), None


def indexer_scores(
    q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor, indices: torch.Tensor | None = None
) -> torch.Tensor:
    """Lightning-indexer scores: [B, T, S] for every slot, or [B, T, K] at indices (-inf at -1); differentiable."""
    _check_indexer(q, weights, k)
    if indices is not None:
        _check_listed(indices, q.shape[0], q.shape[1])
    return _IndexerScores.apply(q, weights, k, indices)


@torch.no_grad()
def indexer_topk(
    q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor, k_valid: torch.Tensor, start: int, topk: int
) -> torch.Tensor:
    """The `topk` highest-scoring causal, valid slots per query, best first, -1 padded: -> [B, T, topk] int64."""
    _check_indexer(q, weights, k)
    if k_valid.shape != k.shape[:2]:
        raise ValueError(f"k_valid {tuple(k_valid.shape)} must be [B, S] = {tuple(k.shape[:2])}")
    if topk < 0 or start < 0:
        raise ValueError(f"topk={topk} and start={start} must be >= 0")
    q, k = _common(q, k)
    b, t, hi, i = q.shape
    s = k.shape[1]
    out = buffers.empty(b, t, topk, dtype=torch.long, device=q.device)  # [B, T, topk]
    if not out.numel():
        return out
    block_k = _pow2(topk)
    block_s = min(block_k, _TOPK_BLOCK_S)
    block_h = triton.next_power_of_2(hi)
    block_t = max(1, min(_TOPK_DOT_ROWS // block_h, _TOPK_BUFFER_KEYS // block_k))
    # Zero-weight padding heads keep tl.dot at >= 16 rows when few queries share a program.
    block_h = max(block_h, 16 // block_t)
    valid = k_valid.to(torch.int8).contiguous()
    with torch.cuda.device_of(q):
        triton_topk.streaming_topk[(triton.cdiv(t, block_t), b)](
            q, weights.contiguous(), k, valid, out, t, s, hi, i, start, topk,
            BLOCK_T=block_t, BLOCK_H=block_h, BLOCK_S=block_s, BLOCK_K=block_k, BLOCK_I=_pow2(i),
            PRECISION=_precision(q.dtype), LOG_T=_log2(block_t), LOG_S=_log2(block_s), LOG_K=_log2(block_k),
            num_warps=8 if block_k >= 512 else 4,
        )
    return out


def _attention_launch(q: torch.Tensor, e: int, c: int) -> dict:
    """Constexpr tile sizes shared by the attention kernels for q [B, T, H, E] and value width c."""
    h = q.shape[2]
    return dict(
        BLOCK_H=min(_pow2(h), _ATTN_MAX_BLOCK_H), BLOCK_K=_ATTN_BLOCK_K, BLOCK_C=_pow2(c), BLOCK_R=_pow2(e - c),
        HAS_TAIL=e > c, PRECISION=_precision(q.dtype),
    )


def _attention_stats(q, kv, indices, scale, c, stats_only):
    """Run attention_fwd: (out [B, T, H, C] or None, lse [B, T, H] fp32)."""
    b, t, h, e = q.shape
    launch = _attention_launch(q, e, c)
    out = None if stats_only else buffers.empty(b, t, h, c, dtype=q.dtype, device=q.device)
    lse = buffers.empty(b, t, h, dtype=torch.float32, device=q.device)
    if lse.numel():
        grid = (t, triton.cdiv(h, launch["BLOCK_H"]), b)
        with torch.cuda.device_of(q):
            triton_attention.attention_fwd[grid](
                q, kv, indices, lse if out is None else out, lse, t, kv.shape[1], h, e, c, indices.shape[2], scale,
                STATS_ONLY=stats_only, num_warps=8, **launch,
            )
    return out, lse


class _SparseMLAAttention(torch.autograd.Function):
    """Softmax attention over listed kv rows; backward recomputes probabilities from the saved lse."""

    @staticmethod
    def forward(ctx, q, kv, indices, scale, v_dim):
        in_dtypes = (q.dtype, kv.dtype)
        out_dtype = q.dtype
        q, kv = _common(q, kv)
        indices = indices.long().contiguous()
        out, lse = _attention_stats(q, kv, indices, scale, v_dim, stats_only=False)
        ctx.save_for_backward(q, kv, indices, out, lse)
        ctx.scale, ctx.v_dim, ctx.in_dtypes = scale, v_dim, in_dtypes
        return out.to(out_dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        q, kv, indices, out, lse = ctx.saved_tensors
        b, t, h, e = q.shape
        launch = _attention_launch(q, e, ctx.v_dim)
        dout = dout.to(q.dtype).contiguous()
        dq = buffers.empty_like(q)
        want_dkv = ctx.needs_input_grad[1]
        # Atomic accumulation target: every listed row gets a sum, every other row stays 0.
        dkv = torch.zeros(kv.shape if want_dkv else (0,), dtype=torch.float32, device=kv.device)
        if dq.numel():
            grid = (t, triton.cdiv(h, launch["BLOCK_H"]), b)
            with torch.cuda.device_of(q):
                triton_attention.attention_bwd[grid](
                    q, kv, indices, out, dout, lse, dq, dkv, t, kv.shape[1], h, e, ctx.v_dim, indices.shape[2],
                    ctx.scale, WRITE_DKV=want_dkv, num_warps=8, **launch,
                )
        q_dtype, kv_dtype = ctx.in_dtypes
        return dq.to(q_dtype), dkv.to(kv_dtype) if want_dkv else None, None, None, None


def _check_attention(q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, v_dim: int | None) -> None:
    """ValueError unless q [B, T, H, E], kv [B, S, E], indices [B, T, K] and 0 < v_dim <= E agree."""
    if q.dim() != 4 or kv.dim() != 3 or kv.shape[0] != q.shape[0] or kv.shape[2] != q.shape[3]:
        raise ValueError(f"q {tuple(q.shape)} and kv {tuple(kv.shape)}: expected q [B, T, H, E], kv [B, S, E]")
    _check_listed(indices, q.shape[0], q.shape[1])
    if v_dim is not None and not 0 < v_dim <= q.shape[3]:
        raise ValueError(f"v_dim={v_dim} must be in 1..{q.shape[3]} (the kv row width)")


def sparse_mla_attention(
    q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, scale: float, v_dim: int
) -> torch.Tensor:
    """Each query head attends over its listed slots of a shared kv: -> [B, T, H, v_dim] in q's dtype."""
    _check_attention(q, kv, indices, v_dim)
    return _SparseMLAAttention.apply(q, kv, indices, float(scale), int(v_dim))


@torch.no_grad()
def attention_mass(q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, scale: float) -> torch.Tensor:
    """Head-summed, renormalised attention probabilities at the listed slots: -> [B, T, K] fp32, no grad."""
    _check_attention(q, kv, indices, None)
    q, kv = _common(q, kv)
    indices = indices.long().contiguous()
    b, t, h, e = q.shape
    # The mass reads no values, so any [C | R] split of the row works: the largest power of two for C
    # keeps the padding small (576 = 512 + 64).
    c = 1 << (e.bit_length() - 1)
    _, lse = _attention_stats(q, kv, indices, float(scale), c, stats_only=True)
    mass = buffers.empty(*indices.shape, dtype=torch.float32, device=q.device)  # [B, T, K]
    if mass.numel():
        launch = _attention_launch(q, e, c)
        with torch.cuda.device_of(q):
            triton_attention.attention_mass[(t, b)](
                q, kv, indices, lse, mass, t, kv.shape[1], h, e, c, indices.shape[2], float(scale),
                num_warps=4, **launch,
            )
    return mass
