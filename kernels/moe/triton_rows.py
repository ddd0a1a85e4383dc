"""Triton row movers of MoE dispatch: invert the sort, gather rows by expert, weighted k-way combine and its grads.

Shape legend: N = tokens, k = experts per token, M = N * k token copies, D = dim. Copy c = n * k + j is
token n's j-th choice; order [M] names the copy in each sorted row, inverse [M] the sorted row of each copy.

Every combine is a gather-sum by token (never a scatter-add by sorted row), so no atomics are needed and
results do not depend on scheduling.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from jointrl.kernels import buffers

# One fixed config per kernel: a 32-row x 128-column tile moves 16 KiB of fp32 per program.
BLOCK_ROWS, BLOCK_D = 32, 128
NUM_WARPS = 4


@triton.jit
def _invert_kernel(order_ptr, inverse_ptr, M, BLOCK: tl.constexpr):
    """inverse[order[i]] = i for one block of sorted rows i."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < M
    copy = tl.load(order_ptr + i, mask=mask, other=0)
    tl.store(inverse_ptr + copy, i.to(inverse_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gather_rows_kernel(
    x_ptr, order_ptr, out_ptr, M, D, k, stride_xm, stride_om,
    BLOCK_ROWS: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """out[i, cols] = x[order[i] // k, cols] for one tile of sorted rows i."""
    i = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)  # [BR]
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)  # [BD]
    row_mask = i < M
    mask = row_mask[:, None] & (cols < D)[None, :]
    token = tl.load(order_ptr + i, mask=row_mask, other=0).to(tl.int64) // k
    rows = tl.load(x_ptr + token[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + i.to(tl.int64)[:, None] * stride_om + cols[None, :], rows, mask=mask)


@triton.jit
def _combine_kernel(
    src_ptr, inverse_ptr, w_ptr, out_ptr, N, D, k, stride_sm, stride_om,
    HAS_WEIGHTS: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """out[n, cols] = sum_j w[n, j] * src[inverse[n * k + j], cols] in fp32, for one tile of tokens n."""
    n = (tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)).to(tl.int64)  # [BR]
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)  # [BD]
    row_mask = n < N
    mask = row_mask[:, None] & (cols < D)[None, :]
    acc = tl.zeros((BLOCK_ROWS, BLOCK_D), dtype=tl.float32)
    for j in range(k):
        row = tl.load(inverse_ptr + n * k + j, mask=row_mask, other=0)  # [BR]
        copy = tl.load(src_ptr + row[:, None] * stride_sm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        if HAS_WEIGHTS:
            copy *= tl.load(w_ptr + n * k + j, mask=row_mask, other=0.0).to(tl.float32)[:, None]
        acc += copy
    tl.store(out_ptr + n[:, None] * stride_om + cols[None, :], acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _combine_bwd_kernel(
    dout_ptr, src_ptr, inverse_ptr, w_ptr, dsrc_ptr, dw_ptr, N, D, k, stride_dm, stride_sm,
    BLOCK_ROWS: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """For one tile of tokens n and each choice j: dsrc[row] = w[n, j] * dout[n], dw[n, j] = <dout[n], src[row]>.

    row = inverse[n * k + j]; the dot runs over all of D inside the program, so dw needs no atomics.
    """
    n = (tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)).to(tl.int64)  # [BR]
    row_mask = n < N
    col_base = tl.arange(0, BLOCK_D)
    for j in range(k):
        row = tl.load(inverse_ptr + n * k + j, mask=row_mask, other=0)  # [BR]
        w = tl.load(w_ptr + n * k + j, mask=row_mask, other=0.0).to(tl.float32)  # [BR]
        dot = tl.zeros((BLOCK_ROWS,), dtype=tl.float32)
        for d0 in range(0, D, BLOCK_D):
            cols = d0 + col_base
            mask = row_mask[:, None] & (cols < D)[None, :]
            dout = tl.load(dout_ptr + n[:, None] * stride_dm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            src_offs = row[:, None] * stride_sm + cols[None, :]
            src = tl.load(src_ptr + src_offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(dsrc_ptr + src_offs, (w[:, None] * dout).to(dsrc_ptr.dtype.element_ty), mask=mask)
            dot += tl.sum(dout * src, axis=1)
        tl.store(dw_ptr + n * k + j, dot.to(dw_ptr.dtype.element_ty), mask=row_mask)


def invert(order: torch.Tensor) -> torch.Tensor:
    """The inverse permutation of order [M] (int64, like order)."""
    m = order.numel()
    inverse = buffers.empty(m, dtype=torch.int64, device=order.device)  # [M]
    if m:
        _invert_kernel[(triton.cdiv(m, BLOCK_ROWS * 4),)](order, inverse, m, BLOCK=BLOCK_ROWS * 4, num_warps=NUM_WARPS)
    return inverse


def gather_rows(x: torch.Tensor, order: torch.Tensor, k: int) -> torch.Tensor:
    """x [N, D] contiguous rows, order [M] -> [M, D] with row i = x[order[i] // k]."""
    m, d = order.numel(), x.shape[1]
    out = buffers.empty(m, d, dtype=x.dtype, device=x.device)  # [M, D]
    if m and d:
        grid = (triton.cdiv(m, BLOCK_ROWS), triton.cdiv(d, BLOCK_D))
        _gather_rows_kernel[grid](
            x, order, out, m, d, k, x.stride(0), out.stride(0),
            BLOCK_ROWS=BLOCK_ROWS, BLOCK_D=BLOCK_D, num_warps=NUM_WARPS,
        )
    return out


def combine(src: torch.Tensor, inverse: torch.Tensor, n: int, k: int, weights: torch.Tensor | None) -> torch.Tensor:
    """src [M, D] contiguous rows -> [N, D]: each token's k copies summed (weights [N, k] or 1) in fp32."""
    d = src.shape[1]
    out = buffers.empty(n, d, dtype=src.dtype, device=src.device)  # [N, D]
    if n and d:
        grid = (triton.cdiv(n, BLOCK_ROWS), triton.cdiv(d, BLOCK_D))
        _combine_kernel[grid](
            src, inverse, src if weights is None else weights, out, n, d, k, src.stride(0), out.stride(0),
            HAS_WEIGHTS=weights is not None, BLOCK_ROWS=BLOCK_ROWS, BLOCK_D=BLOCK_D, num_warps=NUM_WARPS,
        )
    return out


def combine_backward(
    dout: torch.Tensor, src: torch.Tensor, inverse: torch.Tensor, weights: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Grads of the weighted combine: dout [N, D], src [M, D], weights [N, k] -> dsrc [M, D], dweights [N, k]."""
    n, k = weights.shape
    d = src.shape[1]
    dsrc = buffers.empty_like(src)  # [M, D]
    dweights = buffers.empty(n, k, dtype=weights.dtype, device=weights.device)  # [N, k]
    if n:
        _combine_bwd_kernel[(triton.cdiv(n, BLOCK_ROWS),)](
            dout, src, inverse, weights, dsrc, dweights, n, d, k, dout.stride(0), src.stride(0),
            BLOCK_ROWS=BLOCK_ROWS, BLOCK_D=BLOCK_D, num_warps=NUM_WARPS,
        )
    return dsrc, dweights
