"""Triton grouped GEMMs over contiguous expert groups: the SwiGLU expert FFN forward and its backward pieces.

Shape legend: M = token copies (rows of the concatenated groups), E = experts, D = dim, F = expert width.

Row tiles never straddle two experts: each expert's rows are split into cdiv(counts[e], BLOCK_M) tiles,
so a row-tile program owns one expert and one weight slice. The launch grid's first axis is the upper
bound cdiv(M, BLOCK_M) + E on that tile count, which the host knows without reading `counts`; each
program finds its expert from the cumulative tile counts in-kernel and programs past the last tile exit.
No kernel here syncs with the host.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from jointrl.kernels import buffers

# One fixed config per kernel (autotuning needs a GPU driver). 64x64 tiles with a 32-wide reduction step
# keep tl.dot on tensor cores (every dim >= 16) and fit any recent GPU's shared memory at 3 stages.
BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
NUM_WARPS, NUM_STAGES = 4, 3


@triton.jit
def _group_bounds(counts_ptr, e, E, BLOCK_E: tl.constexpr):
    """First row and one-past-last row of expert e's group (rows are grouped in expert order)."""
    experts = tl.arange(0, BLOCK_E)
    counts = tl.load(counts_ptr + experts, mask=experts < E, other=0).to(tl.int32)
    row_ends = tl.cumsum(counts, axis=0)
    chosen = experts == e
    row_end = tl.sum(tl.where(chosen, row_ends, 0), axis=0)
    return row_end - tl.sum(tl.where(chosen, counts, 0), axis=0), row_end


@triton.jit
def _tile_coords(counts_ptr, pid_m, E, BLOCK_E: tl.constexpr, BLOCK_M: tl.constexpr):
    """Expert of row tile pid_m, its first row and its group's end; expert == E past the last tile."""
    experts = tl.arange(0, BLOCK_E)
    counts = tl.load(counts_ptr + experts, mask=experts < E, other=0).to(tl.int32)
    tiles = (counts + BLOCK_M - 1) // BLOCK_M
    tile_ends = tl.cumsum(tiles, axis=0)
    row_ends = tl.cumsum(counts, axis=0)
    # Experts whose tiles all come before this one; empty experts (zero tiles) are skipped over.
    e = tl.sum(((tile_ends <= pid_m) & (experts < E)).to(tl.int32), axis=0)
    chosen = experts == e
    tile_start = tl.sum(tl.where(chosen, tile_ends - tiles, 0), axis=0)
    row_end = tl.sum(tl.where(chosen, row_ends, 0), axis=0)
    group_start = row_end - tl.sum(tl.where(chosen, counts, 0), axis=0)
    return e, group_start + (pid_m - tile_start) * BLOCK_M, row_end


@triton.jit
def _gate_up_swiglu_kernel(
    x_ptr, gate_ptr, up_ptr, h_ptr, counts_ptr,
    E, D, F,
    stride_xm, stride_xd, stride_we, stride_wf, stride_wd, stride_hm, stride_hf,
    PRECISION: tl.constexpr, BLOCK_E: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """h[rows, cols] = silu(x @ gate[e]^T) * (x @ up[e]^T) for one row tile of expert e and one F tile."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    e, row_start, row_end = _tile_coords(counts_ptr, pid_m, E, BLOCK_E, BLOCK_M)
    if e >= E:
        return
    rows = (row_start + tl.arange(0, BLOCK_M)).to(tl.int64)  # [BM]
    row_mask = rows < row_end
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN] in F
    col_mask = cols < F
    ks = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rows[:, None] * stride_xm + ks[None, :] * stride_xd  # [BM, BK]
    # gate / up [E, F, D] read as [BK (d), BN (f)] tiles, i.e. transposed.
    w_offs = e.to(tl.int64) * stride_we + cols[None, :] * stride_wf + ks[:, None] * stride_wd
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, D, BLOCK_K):
        k_mask = (k0 + ks) < D
        x = tl.load(x_ptrs, mask=row_mask[:, None] & k_mask[None, :], other=0.0)
        w_mask = k_mask[:, None] & col_mask[None, :]
        w_gate = tl.load(gate_ptr + w_offs, mask=w_mask, other=0.0)
        w_up = tl.load(up_ptr + w_offs, mask=w_mask, other=0.0)
        acc_g = tl.dot(x, w_gate, acc_g, input_precision=PRECISION)
        acc_u = tl.dot(x, w_up, acc_u, input_precision=PRECISION)
        x_ptrs += BLOCK_K * stride_xd
        w_offs += BLOCK_K * stride_wd
    h = acc_g * tl.sigmoid(acc_g) * acc_u
    h_ptrs = h_ptr + rows[:, None] * stride_hm + cols[None, :] * stride_hf
    tl.store(h_ptrs, h.to(h_ptr.dtype.element_ty), mask=row_mask[:, None] & col_mask[None, :])


@triton.jit
def _grouped_matmul_kernel(
    a_ptr, w_ptr, a2_ptr, w2_ptr, out_ptr, counts_ptr,
    E, K, N,
    stride_am, stride_ak, stride_we, stride_wk, stride_wn, stride_om, stride_on,
    HAS_SECOND: tl.constexpr, PRECISION: tl.constexpr, BLOCK_E: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """out[rows, cols] = a[rows] @ w[e] (+ a2[rows] @ w2[e]); w[e] is read as [K, N] through its strides."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    e, row_start, row_end = _tile_coords(counts_ptr, pid_m, E, BLOCK_E, BLOCK_M)
    if e >= E:
        return
    rows = (row_start + tl.arange(0, BLOCK_M)).to(tl.int64)  # [BM]
    row_mask = rows < row_end
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN]
    col_mask = cols < N
    ks = tl.arange(0, BLOCK_K)
    a_offs = rows[:, None] * stride_am + ks[None, :] * stride_ak  # [BM, BK]
    w_offs = e.to(tl.int64) * stride_we + ks[:, None] * stride_wk + cols[None, :] * stride_wn  # [BK, BN]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_mask = (k0 + ks) < K
        a_mask = row_mask[:, None] & k_mask[None, :]
        w_mask = k_mask[:, None] & col_mask[None, :]
        a = tl.load(a_ptr + a_offs, mask=a_mask, other=0.0)
        w = tl.load(w_ptr + w_offs, mask=w_mask, other=0.0)
        acc = tl.dot(a, w, acc, input_precision=PRECISION)
        if HAS_SECOND:
            a2 = tl.load(a2_ptr + a_offs, mask=a_mask, other=0.0)
            w2 = tl.load(w2_ptr + w_offs, mask=w_mask, other=0.0)
            acc = tl.dot(a2, w2, acc, input_precision=PRECISION)
        a_offs += BLOCK_K * stride_ak
        w_offs += BLOCK_K * stride_wk
    out_ptrs = out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=row_mask[:, None] & col_mask[None, :])


@triton.jit
def _swiglu_bwd_kernel(
    x_ptr, dy_ptr, gate_ptr, up_ptr, down_ptr, h_ptr, dg_ptr, du_ptr, counts_ptr,
    E, D, F,
    stride_xm, stride_xd, stride_we, stride_wf, stride_wd, stride_de, stride_dd, stride_df,
    stride_hm, stride_hf,
    PRECISION: tl.constexpr, BLOCK_E: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """For one row tile and F tile: recompute g = x gate^T, u = x up^T, take dh = dy down[e], write h, dg, du."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    e, row_start, row_end = _tile_coords(counts_ptr, pid_m, E, BLOCK_E, BLOCK_M)
    if e >= E:
        return
    rows = (row_start + tl.arange(0, BLOCK_M)).to(tl.int64)  # [BM]
    row_mask = rows < row_end
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN] in F
    col_mask = cols < F
    ks = tl.arange(0, BLOCK_K)
    # x and dy share one layout ([M, D], contiguous); so do gate and up ([E, F, D]).
    x_offs = rows[:, None] * stride_xm + ks[None, :] * stride_xd  # [BM, BK]
    w_offs = e.to(tl.int64) * stride_we + cols[None, :] * stride_wf + ks[:, None] * stride_wd  # [BK, BN]
    d_offs = e.to(tl.int64) * stride_de + ks[:, None] * stride_dd + cols[None, :] * stride_df  # [BK, BN]
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_dh = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, D, BLOCK_K):
        k_mask = (k0 + ks) < D
        a_mask = row_mask[:, None] & k_mask[None, :]
        w_mask = k_mask[:, None] & col_mask[None, :]
        x = tl.load(x_ptr + x_offs, mask=a_mask, other=0.0)
        dy = tl.load(dy_ptr + x_offs, mask=a_mask, other=0.0)
        acc_g = tl.dot(x, tl.load(gate_ptr + w_offs, mask=w_mask, other=0.0), acc_g, input_precision=PRECISION)
        acc_u = tl.dot(x, tl.load(up_ptr + w_offs, mask=w_mask, other=0.0), acc_u, input_precision=PRECISION)
        acc_dh = tl.dot(dy, tl.load(down_ptr + d_offs, mask=w_mask, other=0.0), acc_dh, input_precision=PRECISION)
        x_offs += BLOCK_K * stride_xd
        w_offs += BLOCK_K * stride_wd
        d_offs += BLOCK_K * stride_dd
    sig = tl.sigmoid(acc_g)
    silu = acc_g * sig
    # d silu(g) / dg = sig * (1 + g * (1 - sig)).
    dg = acc_dh * acc_u * sig * (1.0 + acc_g * (1.0 - sig))
    du = acc_dh * silu
    out_offs = rows[:, None] * stride_hm + cols[None, :] * stride_hf
    out_mask = row_mask[:, None] & col_mask[None, :]
    tl.store(h_ptr + out_offs, (silu * acc_u).to(h_ptr.dtype.element_ty), mask=out_mask)
    tl.store(dg_ptr + out_offs, dg.to(dg_ptr.dtype.element_ty), mask=out_mask)
    tl.store(du_ptr + out_offs, du.to(du_ptr.dtype.element_ty), mask=out_mask)


@triton.jit
def _group_outer_kernel(
    a_ptr, a2_ptr, b_ptr, out_ptr, out2_ptr, counts_ptr,
    E, P, Q,
    stride_am, stride_ap, stride_bm, stride_bq, stride_oe, stride_op, stride_oq,
    HAS_SECOND: tl.constexpr, PRECISION: tl.constexpr, BLOCK_E: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_Q: tl.constexpr,
):
    """out[e] = a[rows_e]^T @ b[rows_e] (and out2[e] from a2) for one [P, Q] tile, summed over e's rows."""
    e = tl.program_id(0)
    pid_p = tl.program_id(1)
    pid_q = tl.program_id(2)
    row_start, row_end = _group_bounds(counts_ptr, e, E, BLOCK_E)
    ps = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)  # [BP]
    qs = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)  # [BQ]
    p_mask = ps < P
    q_mask = qs < Q
    ms = tl.arange(0, BLOCK_M)
    acc = tl.zeros((BLOCK_P, BLOCK_Q), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_P, BLOCK_Q), dtype=tl.float32)
    # An expert with no rows runs no iteration and writes zeros: its weights get a zero gradient.
    for m0 in range(row_start, row_end, BLOCK_M):
        rows = (m0 + ms).to(tl.int64)  # [BM]
        row_mask = rows < row_end
        # a read transposed, as a [BP, BM] tile.
        a_offs = rows[None, :] * stride_am + ps[:, None] * stride_ap
        a_mask = p_mask[:, None] & row_mask[None, :]
        b = tl.load(b_ptr + rows[:, None] * stride_bm + qs[None, :] * stride_bq,
                    mask=row_mask[:, None] & q_mask[None, :], other=0.0)  # [BM, BQ]
        acc = tl.dot(tl.load(a_ptr + a_offs, mask=a_mask, other=0.0), b, acc, input_precision=PRECISION)
        if HAS_SECOND:
            acc2 = tl.dot(tl.load(a2_ptr + a_offs, mask=a_mask, other=0.0), b, acc2, input_precision=PRECISION)
    out_offs = e.to(tl.int64) * stride_oe + ps[:, None] * stride_op + qs[None, :] * stride_oq
    out_mask = p_mask[:, None] & q_mask[None, :]
    tl.store(out_ptr + out_offs, acc.to(out_ptr.dtype.element_ty), mask=out_mask)
    if HAS_SECOND:
        tl.store(out2_ptr + out_offs, acc2.to(out2_ptr.dtype.element_ty), mask=out_mask)


def _precision(x: torch.Tensor) -> str:
    """tl.dot's fp32 mode: TF32 only where torch itself would allow it for this matmul."""
    return "tf32" if x.is_cuda and torch.backends.cuda.matmul.allow_tf32 else "ieee"


def _row_tiles(m: int, n_experts: int) -> int:
    """Upper bound on per-expert row tiles: sum_e cdiv(counts[e], BLOCK_M) <= cdiv(M, BLOCK_M) + E."""
    return triton.cdiv(m, BLOCK_M) + n_experts


def _options(n_experts: int, dot_like: torch.Tensor) -> dict:
    """Launch options shared by every kernel here."""
    return dict(
        PRECISION=_precision(dot_like), BLOCK_E=triton.next_power_of_2(max(n_experts, 1)),
        num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )


def swiglu_hidden(x: torch.Tensor, counts: torch.Tensor, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """h = silu(x gate[e]^T) * (x up[e]^T) per group: x [M, D], counts [E], gate / up [E, F, D] -> [M, F]."""
    (m, d), (e, f, _) = x.shape, gate.shape
    h = buffers.empty(m, f, dtype=x.dtype, device=x.device)  # [M, F]
    grid = (_row_tiles(m, e), triton.cdiv(f, BLOCK_N))
    _gate_up_swiglu_kernel[grid](
        x, gate, up, h, counts, e, d, f,
        x.stride(0), x.stride(1), gate.stride(0), gate.stride(1), gate.stride(2), h.stride(0), h.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, **_options(e, x),
    )
    return h


def grouped_matmul(
    a: torch.Tensor, counts: torch.Tensor, w: torch.Tensor, w_strides: tuple[int, int, int], n_out: int,
    a2: torch.Tensor | None = None, w2: torch.Tensor | None = None,
) -> torch.Tensor:
    """a [M, K] @ w[e] per group (+ a2 @ w2[e]) -> [M, n_out]; w_strides = (expert, K, n_out) strides of w."""
    m, k = a.shape
    e = w.shape[0]
    out = buffers.empty(m, n_out, dtype=a.dtype, device=a.device)  # [M, n_out]
    grid = (_row_tiles(m, e), triton.cdiv(n_out, BLOCK_N))
    _grouped_matmul_kernel[grid](
        a, w, a if a2 is None else a2, w if w2 is None else w2, out, counts, e, k, n_out,
        a.stride(0), a.stride(1), *w_strides, out.stride(0), out.stride(1),
        HAS_SECOND=a2 is not None, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, **_options(e, a),
    )
    return out


def swiglu_backward(
    x: torch.Tensor, dy: torch.Tensor, counts: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Recomputed h and the pre-activation grads dg, du, each [M, F]; x, dy [M, D] share one layout."""
    (m, d), (e, f, _) = x.shape, gate.shape
    h, dg, du = (buffers.empty(m, f, dtype=x.dtype, device=x.device) for _ in range(3))  # [M, F] each
    grid = (_row_tiles(m, e), triton.cdiv(f, BLOCK_N))
    _swiglu_bwd_kernel[grid](
        x, dy, gate, up, down, h, dg, du, counts, e, d, f,
        x.stride(0), x.stride(1), gate.stride(0), gate.stride(1), gate.stride(2),
        down.stride(0), down.stride(1), down.stride(2), h.stride(0), h.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, **_options(e, x),
    )
    return h, dg, du


def group_outer(
    a: torch.Tensor, b: torch.Tensor, counts: torch.Tensor, n_experts: int, dtype: torch.dtype,
    a2: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-expert a[rows_e]^T @ b[rows_e] (and for a2): a [M, P], b [M, Q] -> [E, P, Q] (weight gradients)."""
    (_, p), q = a.shape, b.shape[1]
    out = buffers.empty(n_experts, p, q, dtype=dtype, device=a.device)  # [E, P, Q]
    out2 = None if a2 is None else buffers.empty_like(out)
    grid = (n_experts, triton.cdiv(p, BLOCK_N), triton.cdiv(q, BLOCK_N))
    # The reduction runs over the expert's rows, BLOCK_K of them per step.
    _group_outer_kernel[grid](
        a, a if a2 is None else a2, b, out, out if out2 is None else out2, counts, n_experts, p, q,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1), out.stride(2),
        HAS_SECOND=a2 is not None, BLOCK_M=BLOCK_K, BLOCK_P=BLOCK_N, BLOCK_Q=BLOCK_N,
        **_options(n_experts, a),
    )
    return out, out2
