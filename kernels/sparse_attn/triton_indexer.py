"""Triton kernels of the lightning-indexer scores, dense or at listed slots, forward and backward.

Shape legend: B = batch rows, T = queries, S = key slots, K = listed slots per query, Hi = indexer heads,
I = indexer dim; BLOCK_* are padded tile sizes (powers of two, >= 16 where a tile enters tl.dot).

score(t, s) = sum_h w[t, h] * relu(q[t, h] . k[s]). Every kernel accumulates in fp32; tensors arrive
contiguous (the launchers in triton.py see to that) and q, k share one dtype, as tl.dot needs. Base
offsets are int64: B * T * S passes 2**31 at long contexts. relu'(0) = 0, as in torch's backward.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _head_tile(q_ptr, w_ptr, b, rows, row_ok, dims, dim_ok, h, T, HI, I):
    """Head h of a query block: (q [BT, BI], fp32 weights [BT], q row offsets [BT])."""
    q_rows = ((b * T + rows) * HI + h) * I  # [BT]
    qh = tl.load(q_ptr + q_rows[:, None] + dims[None, :], mask=row_ok[:, None] & dim_ok[None, :], other=0.0)
    wh = tl.load(w_ptr + (b * T + rows) * HI + h, mask=row_ok, other=0.0).to(tl.float32)
    return qh, wh, q_rows


@triton.jit
def _tile_scores(q_ptr, w_ptr, kt, b, rows, row_ok, dims, dim_ok, T, HI, I,
                BLOCK_T: tl.constexpr, BLOCK_S: tl.constexpr, PRECISION: tl.constexpr):
    """Scores [BT, BS] of a query block against transposed keys kt [BI, BS], heads summed in order."""
    acc = tl.zeros([BLOCK_T, BLOCK_S], dtype=tl.float32)
    for h in range(HI):
        qh, wh, _ = _head_tile(q_ptr, w_ptr, b, rows, row_ok, dims, dim_ok, h, T, HI, I)
        acc += wh[:, None] * tl.maximum(tl.dot(qh, kt, input_precision=PRECISION), 0.0)
    return acc


@triton.jit
def dense_scores_fwd(
    q_ptr, w_ptr, k_ptr, out_ptr, T, S, HI, I,
    BLOCK_T: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_I: tl.constexpr, PRECISION: tl.constexpr,
):
    """Grid (T / BLOCK_T, S / BLOCK_S, B): one [BLOCK_T, BLOCK_S] tile of the scores."""
    pid_t, pid_s, b = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
    rows = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    dims = tl.arange(0, BLOCK_I)
    row_ok, col_ok, dim_ok = rows < T, cols < S, dims < I
    kt_offs = (b * S + cols[None, :]) * I + dims[:, None]
    kt = tl.load(k_ptr + kt_offs, mask=dim_ok[:, None] & col_ok[None, :], other=0.0)  # [BI, BS]
    acc = _tile_scores(q_ptr, w_ptr, kt, b, rows, row_ok, dims, dim_ok, T, HI, I, BLOCK_T, BLOCK_S, PRECISION)
    tl.store(out_ptr + (b * T + rows[:, None]) * S + cols[None, :], acc, mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def dense_scores_bwd_q(
    q_ptr, w_ptr, k_ptr, grad_ptr, dq_ptr, dw_ptr, T, S, HI, I,
    BLOCK_T: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_I: tl.constexpr, PRECISION: tl.constexpr,
):
    """Grid (T / BLOCK_T, Hi, B): dq and dw of one head for a query block, walking every key block."""
    pid_t, h, b = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
    rows = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    dims = tl.arange(0, BLOCK_I)
    row_ok, dim_ok = rows < T, dims < I
    qh, wh, q_rows = _head_tile(q_ptr, w_ptr, b, rows, row_ok, dims, dim_ok, h, T, HI, I)  # [BT, BI], [BT]
    dq = tl.zeros([BLOCK_T, BLOCK_I], dtype=tl.float32)
    dw = tl.zeros([BLOCK_T], dtype=tl.float32)
    for s0 in range(0, S, BLOCK_S):
        cols = s0 + tl.arange(0, BLOCK_S)
        col_ok = cols < S
        kb = tl.load(k_ptr + (b * S + cols[:, None]) * I + dims[None, :], mask=col_ok[:, None] & dim_ok[None, :],
                     other=0.0)  # [BS, BI]
        g_offs = (b * T + rows[:, None]) * S + cols[None, :]
        g = tl.load(grad_ptr + g_offs, mask=row_ok[:, None] & col_ok[None, :], other=0.0)  # [BT, BS]
        dots = tl.dot(qh, tl.trans(kb), input_precision=PRECISION)  # [BT, BS]
        dw += tl.sum(g * tl.maximum(dots, 0.0), axis=1)
        dq += tl.dot(tl.where(dots > 0.0, g, 0.0).to(kb.dtype), kb, input_precision=PRECISION)
    dq = dq * wh[:, None]
    q_mask = row_ok[:, None] & dim_ok[None, :]
    tl.store(dq_ptr + q_rows[:, None] + dims[None, :], dq.to(dq_ptr.dtype.element_ty), mask=q_mask)
    tl.store(dw_ptr + (b * T + rows) * HI + h, dw, mask=row_ok)


@triton.jit
def dense_scores_bwd_k(
    q_ptr, w_ptr, k_ptr, grad_ptr, dk_ptr, T, S, HI, I,
    BLOCK_T: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_I: tl.constexpr, PRECISION: tl.constexpr,
):
    """Grid (S / BLOCK_S, B): dk of a key block, walking every query block and head (deterministic, no atomics)."""
    pid_s, b = tl.program_id(0), tl.program_id(1).to(tl.int64)
    cols = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    dims = tl.arange(0, BLOCK_I)
    col_ok, dim_ok = cols < S, dims < I
    k_offs = (b * S + cols[:, None]) * I + dims[None, :]
    kb = tl.load(k_ptr + k_offs, mask=col_ok[:, None] & dim_ok[None, :], other=0.0)  # [BS, BI]
    dk = tl.zeros([BLOCK_S, BLOCK_I], dtype=tl.float32)
    for t0 in range(0, T, BLOCK_T):
        rows = t0 + tl.arange(0, BLOCK_T)
        row_ok = rows < T
        # The gradient tile is read once per query block and shared by all heads.
        gt_offs = (b * T + rows[None, :]) * S + cols[:, None]
        gt = tl.load(grad_ptr + gt_offs, mask=col_ok[:, None] & row_ok[None, :], other=0.0)  # [BS, BT]
        for h in range(HI):
            qh, wh, _ = _head_tile(q_ptr, w_ptr, b, rows, row_ok, dims, dim_ok, h, T, HI, I)  # [BT, BI], [BT]
            dots = tl.dot(kb, tl.trans(qh), input_precision=PRECISION)  # [BS, BT]
            coef = tl.where(dots > 0.0, gt * wh[None, :], 0.0)
            dk += tl.dot(coef.to(qh.dtype), qh, input_precision=PRECISION)
    tl.store(dk_ptr + k_offs, dk.to(dk_ptr.dtype.element_ty), mask=col_ok[:, None] & dim_ok[None, :])


@triton.jit
def _query_heads(q_ptr, w_ptr, b, t, T, HI, I, BLOCK_H: tl.constexpr, BLOCK_I: tl.constexpr):
    """All heads of query t: (q [BH, BI], fp32 weights [BH], q offsets [BH, BI], mask [BH, BI], head mask [BH])."""
    heads, dims = tl.arange(0, BLOCK_H), tl.arange(0, BLOCK_I)
    head_ok = heads < HI
    q_offs = ((b * T + t) * HI + heads[:, None]) * I + dims[None, :]
    q_mask = head_ok[:, None] & (dims < I)[None, :]
    q_t = tl.load(q_ptr + q_offs, mask=q_mask, other=0.0)
    w_t = tl.load(w_ptr + (b * T + t) * HI + heads, mask=head_ok, other=0.0).to(tl.float32)
    return q_t, w_t, q_offs, q_mask, head_ok


@triton.jit
def _listed_keys(k_ptr, idx_ptr, b, t, k0, T, S, I, K, BLOCK_K: tl.constexpr, BLOCK_I: tl.constexpr):
    """Query t's list entries k0 .. k0 + BLOCK_K: (positions [BK], listed [BK], offsets, mask, keys [BK, BI])."""
    slots = k0 + tl.arange(0, BLOCK_K)
    dims = tl.arange(0, BLOCK_I)
    idx = tl.load(idx_ptr + (b * T + t) * K + slots, mask=slots < K, other=-1)  # [BK]
    # idx < S only keeps the gather in bounds; callers list real slots.
    listed = (idx >= 0) & (idx < S)
    offs = (b * S + idx[:, None]) * I + dims[None, :]
    mask = listed[:, None] & (dims < I)[None, :]
    return slots, listed, offs, mask, tl.load(k_ptr + offs, mask=mask, other=0.0)


@triton.jit
def listed_scores_fwd(
    q_ptr, w_ptr, k_ptr, idx_ptr, out_ptr, T, S, HI, I, K,
    BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_I: tl.constexpr, PRECISION: tl.constexpr,
):
    """Grid (T, B): one query's scores at its K listed slots, BLOCK_K gathered key rows a step; -inf at -1."""
    t, b = tl.program_id(0), tl.program_id(1).to(tl.int64)
    q_t, w_t, _q_offs, _q_mask, _head_ok = _query_heads(q_ptr, w_ptr, b, t, T, HI, I, BLOCK_H, BLOCK_I)
    for k0 in range(0, K, BLOCK_K):
        # Distinct names for unused results: a name bound both here and above would become loop-carried.
        slots, listed, _k_offs, _k_mask, kg = _listed_keys(k_ptr, idx_ptr, b, t, k0, T, S, I, K, BLOCK_K, BLOCK_I)
        dots = tl.dot(q_t, tl.trans(kg), input_precision=PRECISION)  # [BH, BK]
        scores = tl.sum(w_t[:, None] * tl.maximum(dots, 0.0), axis=0)  # [BK]
        tl.store(out_ptr + (b * T + t) * K + slots, tl.where(listed, scores, float("-inf")), mask=slots < K)


@triton.jit
def listed_scores_bwd(
    q_ptr, w_ptr, k_ptr, idx_ptr, grad_ptr, dq_ptr, dw_ptr, dk_ptr, T, S, HI, I, K,
    BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_I: tl.constexpr, PRECISION: tl.constexpr,
):
    """Grid (T, B): one query's dq and dw; its share of dk is added atomically to the fp32 rows it read."""
    t, b = tl.program_id(0), tl.program_id(1).to(tl.int64)
    q_t, w_t, q_offs, q_mask, head_ok = _query_heads(q_ptr, w_ptr, b, t, T, HI, I, BLOCK_H, BLOCK_I)
    dq = tl.zeros([BLOCK_H, BLOCK_I], dtype=tl.float32)
    dw = tl.zeros([BLOCK_H], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        slots, listed, k_offs, k_mask, kg = _listed_keys(k_ptr, idx_ptr, b, t, k0, T, S, I, K, BLOCK_K, BLOCK_I)
        # An unlisted slot's score is the constant -inf: no gradient flows through it.
        g = tl.load(grad_ptr + (b * T + t) * K + slots, mask=listed, other=0.0)  # [BK]
        dots = tl.dot(q_t, tl.trans(kg), input_precision=PRECISION)  # [BH, BK]
        dw += tl.sum(tl.maximum(dots, 0.0) * g[None, :], axis=1)
        coef = tl.where(dots > 0.0, w_t[:, None] * g[None, :], 0.0)  # [BH, BK]
        dq += tl.dot(coef.to(kg.dtype), kg, input_precision=PRECISION)
        dkg = tl.dot(tl.trans(coef).to(q_t.dtype), q_t, input_precision=PRECISION)  # [BK, BI]
        # Rows repeat across queries: fp32 atomics sum them (the order, hence rounding, varies on a GPU).
        tl.atomic_add(dk_ptr + k_offs, dkg, mask=k_mask, sem="relaxed")
    tl.store(dq_ptr + q_offs, dq.to(dq_ptr.dtype.element_ty), mask=q_mask)
    tl.store(dw_ptr + (b * T + t) * HI + tl.arange(0, BLOCK_H), dw, mask=head_ok)
