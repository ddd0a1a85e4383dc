"""Triton streaming top-k of the lightning indexer: per query block, (score, slot) keys merged block by block.

Shape legend: B = batch rows, T = queries, S = key slots, Hi = indexer heads, I = indexer dim; per
program BLOCK_T queries, BLOCK_S key slots a step, and a buffer of the BLOCK_K (a power of two >= topk)
best keys per query.

Scores stay in registers: memory is O(B * T * topk) whatever S is. The sorting network is a bitonic one
on a [2] * log2(numel) hypercube view, like tl.sort, with min/max over each pair axis where tl.sort
uses xor_sum: the interpreter runs min/max in numpy (xor_sum falls back to a Python loop per element),
and on a GPU both are register shuffles.
"""
from __future__ import annotations

import triton
import triton.language as tl

# Below every real key (see _order_key): an empty place in the candidate buffer.
_EMPTY_KEY = tl.constexpr(-(2**63))


@triton.jit
def _order_key(scores, slots):
    """int64 keys ordered by (score, slot): scores [M, N] fp32 (no NaN, no -0.0), slots [N] int32."""
    bits = scores.to(tl.int32, bitcast=True)
    # Flipping the magnitude bits of negative floats makes signed-int order equal float order.
    ordered = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
    # The slot fills the low 32 bits, so of equal scores the later slot ranks higher, as in naive.py.
    return (ordered.to(tl.int64) << 32) | slots[None, :].to(tl.int64)


@triton.jit
def _indicator(N_DIMS: tl.constexpr, j: tl.constexpr):
    """0, 1 along the j-th innermost axis of a [2] * N_DIMS hypercube (broadcast elsewhere)."""
    return tl.reshape(tl.arange(0, 2), [1] * (N_DIMS - j - 1) + [2] + [1] * j)


@triton.jit
def _compare_swap(h, flip, j: tl.constexpr, N_DIMS: tl.constexpr):
    """One bitonic step on the j-th innermost axis of hypercube h: each pair ascending, or descending where flip."""
    lo = tl.min(h, axis=N_DIMS - 1 - j, keep_dims=True)
    hi = tl.max(h, axis=N_DIMS - 1 - j, keep_dims=True)
    return tl.where((flip ^ _indicator(N_DIMS, j)) != 0, hi, lo)


@triton.jit
def _bitonic_stage(h, stage: tl.constexpr, order: tl.constexpr, N_DIMS: tl.constexpr):
    """Merge bitonic runs of 2**stage on the innermost axes: ascending (0), descending (1) or alternating (2)."""
    if order == 2:
        flip = _indicator(N_DIMS, stage)
    else:
        flip = order
    for i in tl.static_range(stage):
        h = _compare_swap(h, flip, stage - 1 - i, N_DIMS)
    return h


@triton.jit
def _sort_rows(x, LOG_T: tl.constexpr, LOG_K: tl.constexpr, DESCENDING: tl.constexpr):
    """Every row of x [2**LOG_T, 2**LOG_K] sorted (a full bitonic sort)."""
    h = tl.reshape(x, [2] * (LOG_T + LOG_K))
    for stage in tl.static_range(1, LOG_K + 1):
        h = _bitonic_stage(h, stage, 2 if stage < LOG_K else DESCENDING, LOG_T + LOG_K)
    return tl.reshape(h, x.shape)


@triton.jit
def _merge_rows(x, LOG_T: tl.constexpr, LOG_K: tl.constexpr, DESCENDING: tl.constexpr):
    """Every bitonic row of x [2**LOG_T, 2**LOG_K] sorted (one bitonic merge)."""
    h = tl.reshape(x, [2] * (LOG_T + LOG_K))
    return tl.reshape(_bitonic_stage(h, LOG_K, DESCENDING, LOG_T + LOG_K), x.shape)


@triton.jit
def streaming_topk(
    q_ptr, w_ptr, k_ptr, valid_ptr, out_ptr, T, S, HI, I, start, TOPK,
    BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_I: tl.constexpr, PRECISION: tl.constexpr, LOG_T: tl.constexpr, LOG_S: tl.constexpr, LOG_K: tl.constexpr,
):
    """Grid (T / BLOCK_T, B): the best TOPK causal, valid slots of each query in a block, best first, -1 padded.

    Each block of BLOCK_S slots is scored, turned into keys, sorted descending and padded with empty
    keys to BLOCK_K; with the running buffer of the BLOCK_K best keys so far (ascending) its elementwise
    max holds the top BLOCK_K of both and is bitonic, so one bitonic merge sorts the buffer again.
    """
    pid_t, b = tl.program_id(0), tl.program_id(1).to(tl.int64)
    rows = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    row_ok = rows < T
    dims = tl.arange(0, BLOCK_I)
    dim_ok = dims < I
    # Every (query, head) pair is a row of one [BLOCK_T * BLOCK_H, BLOCK_I] tile, so a single tl.dot
    # scores all heads of all the block's queries: the dot keeps >= 16 rows even for one query.
    pairs = tl.arange(0, BLOCK_T * BLOCK_H)
    pair_t = pid_t * BLOCK_T + pairs // BLOCK_H
    pair_h = pairs % BLOCK_H
    pair_ok = (pair_t < T) & (pair_h < HI)
    q_offs = ((b * T + pair_t) * HI + pair_h) * I
    qp = tl.load(q_ptr + q_offs[:, None] + dims[None, :], mask=pair_ok[:, None] & dim_ok[None, :], other=0.0)
    wp = tl.load(w_ptr + (b * T + pair_t) * HI + pair_h, mask=pair_ok, other=0.0).to(tl.float32)  # [BT * BH]
    q_slot = start + rows  # [BT]
    best = tl.full([BLOCK_T, BLOCK_K], _EMPTY_KEY, dtype=tl.int64)  # ascending
    # Causality: no query of the block sees past the slot of its last query.
    stop = tl.minimum(S, start + tl.minimum(pid_t * BLOCK_T + BLOCK_T, T))
    for s0 in range(0, stop, BLOCK_S):
        cols = s0 + tl.arange(0, BLOCK_S)
        col_ok = cols < S
        kt_offs = (b * S + cols[None, :]) * I + dims[:, None]
        kt = tl.load(k_ptr + kt_offs, mask=dim_ok[:, None] & col_ok[None, :], other=0.0)  # [BI, BS]
        dots = tl.dot(qp, kt, input_precision=PRECISION)  # [BT * BH, BS]
        per_head = tl.reshape(wp[:, None] * tl.maximum(dots, 0.0), [BLOCK_T, BLOCK_H, BLOCK_S])
        scores = tl.sum(per_head, axis=1)  # [BT, BS]
        # -0.0 and 0.0 tie as floats, so they must share a key.
        scores = tl.where(scores == 0.0, 0.0, scores)
        ok = tl.load(valid_ptr + b * S + cols, mask=col_ok, other=0) != 0  # [BS]
        allowed = row_ok[:, None] & ok[None, :] & (cols[None, :] <= q_slot[:, None])
        # A -inf score is no candidate, as in naive.py.
        keys = tl.where(allowed & (scores != float("-inf")), _order_key(scores, cols), _EMPTY_KEY)  # [BT, BS]
        # Every block is merged: skipping blocks that improve no buffer (an scf.if around the merge)
        # breaks Triton 3.9's layout pass for some tile shapes.
        fresh = _sort_rows(keys, LOG_T, LOG_S, 1)  # [BT, BS] descending
        if BLOCK_S < BLOCK_K:
            # Trailing empty keys widen it to the buffer and keep it descending.
            first = (tl.arange(0, BLOCK_K // BLOCK_S) == 0)[None, :, None]
            fresh = tl.reshape(tl.where(first, fresh[:, None, :], _EMPTY_KEY), [BLOCK_T, BLOCK_K])
        best = _merge_rows(tl.maximum(best, fresh), LOG_T, LOG_K, 0)
    slots = tl.where(best != _EMPTY_KEY, best & 0xFFFFFFFF, -1)  # [BT, BK]
    # The buffer ascends: its column c holds rank BLOCK_K - 1 - c.
    rank = BLOCK_K - 1 - tl.arange(0, BLOCK_K)
    out_offs = (b * T + rows[:, None]) * TOPK + rank[None, :]
    tl.store(out_ptr + out_offs, slots, mask=row_ok[:, None] & (rank < TOPK)[None, :])
