"""Triton kernels of attention over listed slots of a shared (MQA) latent kv: forward, backward, attention mass.

Shape legend: B = batch rows, T = queries, S = key slots, K = listed slots per query, H = attention
heads, E = query/key width, C = value width (the leading C channels of each kv row), R = E - C (the
trailing rotary channels, keyed but never read as values); BLOCK_* are padded tile sizes.

Each program takes one query and a group of BLOCK_H heads, so a gathered kv row is read once for all
heads of the group (the point of the absorbed form). Rows are split as [C | R] so a 512 + 64 latent
pads to 512 + 64, not to 1024. Softmax statistics are fp32; a query with no listed slot gets lse = 0,
zero output and zero gradients. Base offsets are int64.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _gather_rows(kv_ptr, idx, b, S, E, C, BLOCK_K: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr,
                 HAS_TAIL: tl.constexpr):
    """kv rows at idx [BK] as value part [BK, BC] and tail [BK, BR] (zeros where unlisted or padded)."""
    # idx < S only keeps the gather in bounds; callers list real slots.
    listed = (idx >= 0) & (idx < S)
    rows = (b * S + idx) * E  # [BK]
    cd = tl.arange(0, BLOCK_C)
    kv_c = tl.load(kv_ptr + rows[:, None] + cd[None, :], mask=listed[:, None] & (cd < C)[None, :], other=0.0)
    if HAS_TAIL:
        rd = C + tl.arange(0, BLOCK_R)
        kv_r = tl.load(kv_ptr + rows[:, None] + rd[None, :], mask=listed[:, None] & (rd < E)[None, :], other=0.0)
    else:
        kv_r = tl.zeros([BLOCK_K, BLOCK_R], dtype=kv_c.dtype)
    return listed, rows, kv_c, kv_r


@triton.jit
def _scores(q_c, q_r, kv_c, kv_r, listed, scale, HAS_TAIL: tl.constexpr, PRECISION: tl.constexpr):
    """Scaled scores [BH, BK] of the head group against the gathered rows, -inf at unlisted slots."""
    s = tl.dot(q_c, tl.trans(kv_c), input_precision=PRECISION)
    if HAS_TAIL:
        s += tl.dot(q_r, tl.trans(kv_r), input_precision=PRECISION)
    return tl.where(listed[None, :], s * scale, float("-inf"))


@triton.jit
def attention_fwd(
    q_ptr, kv_ptr, idx_ptr, out_ptr, lse_ptr, T, S, H, E, C, K, scale,
    BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr,
    HAS_TAIL: tl.constexpr, STATS_ONLY: tl.constexpr, PRECISION: tl.constexpr,
):
    """Grid (T, H / BLOCK_H, B): online softmax over the query's listed rows; writes out (unless STATS_ONLY) and lse."""
    t, hg, b = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
    heads = hg * BLOCK_H + tl.arange(0, BLOCK_H)
    cd, rd = tl.arange(0, BLOCK_C), C + tl.arange(0, BLOCK_R)
    head_ok = heads < H
    q_rows = ((b * T + t) * H + heads) * E  # [BH]
    c_mask = head_ok[:, None] & (cd < C)[None, :]
    q_c = tl.load(q_ptr + q_rows[:, None] + cd[None, :], mask=c_mask, other=0.0)  # [BH, BC]
    r_mask = head_ok[:, None] & (rd < E)[None, :]
    q_r = tl.load(q_ptr + q_rows[:, None] + rd[None, :], mask=r_mask, other=0.0)  # [BH, BR]
    m = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_C], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        slots = k0 + tl.arange(0, BLOCK_K)
        idx = tl.load(idx_ptr + (b * T + t) * K + slots, mask=slots < K, other=-1)  # [BK]
        listed, rows, kv_c, kv_r = _gather_rows(kv_ptr, idx, b, S, E, C, BLOCK_K, BLOCK_C, BLOCK_R, HAS_TAIL)
        s = _scores(q_c, q_r, kv_c, kv_r, listed, scale, HAS_TAIL, PRECISION)  # [BH, BK]
        m_new = tl.maximum(m, tl.max(s, axis=1))
        # While nothing is listed yet the running max is -inf; shifting by 0 keeps exp() free of NaN.
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(s - m_use[:, None])  # [BH, BK], 0 at unlisted slots
        alpha = tl.exp(m - m_use)
        l = l * alpha + tl.sum(p, axis=1)
        if not STATS_ONLY:
            acc = acc * alpha[:, None] + tl.dot(p.to(kv_c.dtype), kv_c, input_precision=PRECISION)
        m = m_new
    lse = tl.where(l > 0.0, m + tl.log(tl.maximum(l, 1e-30)), 0.0)
    tl.store(lse_ptr + (b * T + t) * H + heads, lse, mask=head_ok)
    if not STATS_ONLY:
        # l = 0 only for a query with no listed slot, where acc is 0 too: the output is 0, as in naive.py.
        out = acc / tl.maximum(l, 1e-30)[:, None]
        out_rows = ((b * T + t) * H + heads) * C
        tl.store(out_ptr + out_rows[:, None] + cd[None, :], out.to(out_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def attention_bwd(
    q_ptr, kv_ptr, idx_ptr, out_ptr, dout_ptr, lse_ptr, dq_ptr, dkv_ptr, T, S, H, E, C, K, scale,
    BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr,
    HAS_TAIL: tl.constexpr, WRITE_DKV: tl.constexpr, PRECISION: tl.constexpr,
):
    """Grid (T, H / BLOCK_H, B): recomputes p from lse, writes dq, and atomically adds dkv into fp32 rows."""
    t, hg, b = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
    heads = hg * BLOCK_H + tl.arange(0, BLOCK_H)
    cd, rd = tl.arange(0, BLOCK_C), C + tl.arange(0, BLOCK_R)
    head_ok = heads < H
    c_mask = head_ok[:, None] & (cd < C)[None, :]
    r_mask = head_ok[:, None] & (rd < E)[None, :]
    q_rows = ((b * T + t) * H + heads) * E  # [BH]
    o_rows = ((b * T + t) * H + heads) * C  # [BH]
    q_c = tl.load(q_ptr + q_rows[:, None] + cd[None, :], mask=c_mask, other=0.0)  # [BH, BC]
    q_r = tl.load(q_ptr + q_rows[:, None] + rd[None, :], mask=r_mask, other=0.0)  # [BH, BR]
    do = tl.load(dout_ptr + o_rows[:, None] + cd[None, :], mask=c_mask, other=0.0)  # [BH, BC]
    o = tl.load(out_ptr + o_rows[:, None] + cd[None, :], mask=c_mask, other=0.0)
    # delta = sum_k p dp = dO . O: the softmax backward's row term, formed once per head.
    delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), axis=1)  # [BH]
    lse = tl.load(lse_ptr + (b * T + t) * H + heads, mask=head_ok, other=0.0)  # [BH]
    dq_c = tl.zeros([BLOCK_H, BLOCK_C], dtype=tl.float32)
    dq_r = tl.zeros([BLOCK_H, BLOCK_R], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        slots = k0 + tl.arange(0, BLOCK_K)
        idx = tl.load(idx_ptr + (b * T + t) * K + slots, mask=slots < K, other=-1)  # [BK]
        listed, rows, kv_c, kv_r = _gather_rows(kv_ptr, idx, b, S, E, C, BLOCK_K, BLOCK_C, BLOCK_R, HAS_TAIL)
        s = _scores(q_c, q_r, kv_c, kv_r, listed, scale, HAS_TAIL, PRECISION)  # [BH, BK]
        p = tl.where(head_ok[:, None], tl.exp(s - lse[:, None]), 0.0)  # [BH, BK]
        dp = tl.dot(do, tl.trans(kv_c), input_precision=PRECISION)  # [BH, BK]
        ds = p * (dp - delta[:, None])  # d loss / d (scaled score)
        dq_c += tl.dot(ds.to(kv_c.dtype), kv_c, input_precision=PRECISION)
        if HAS_TAIL:
            dq_r += tl.dot(ds.to(kv_r.dtype), kv_r, input_precision=PRECISION)
        if WRITE_DKV:
            ds_t = tl.trans(ds)  # [BK, BH]
            dkv_c = tl.dot(ds_t.to(q_c.dtype), q_c, input_precision=PRECISION) * scale
            dkv_c += tl.dot(tl.trans(p).to(do.dtype), do, input_precision=PRECISION)  # [BK, BC]
            # Rows repeat across queries (and may within a list): fp32 atomics sum them, in an order (hence
            # rounding) that varies on a GPU.
            tl.atomic_add(dkv_ptr + rows[:, None] + cd[None, :], dkv_c, mask=listed[:, None] & (cd < C)[None, :],
                          sem="relaxed")
            if HAS_TAIL:
                dkv_r = tl.dot(ds_t.to(q_r.dtype), q_r, input_precision=PRECISION) * scale  # [BK, BR]
                tl.atomic_add(dkv_ptr + rows[:, None] + rd[None, :], dkv_r, mask=listed[:, None] & (rd < E)[None, :],
                              sem="relaxed")
    tl.store(dq_ptr + q_rows[:, None] + cd[None, :], (dq_c * scale).to(dq_ptr.dtype.element_ty), mask=c_mask)
    if HAS_TAIL:
        tl.store(dq_ptr + q_rows[:, None] + rd[None, :], (dq_r * scale).to(dq_ptr.dtype.element_ty), mask=r_mask)


@triton.jit
def attention_mass(
    q_ptr, kv_ptr, idx_ptr, lse_ptr, mass_ptr, T, S, H, E, C, K, scale,
    BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr,
    HAS_TAIL: tl.constexpr, PRECISION: tl.constexpr,
):
    """Grid (T, B): head-summed probabilities at the query's listed slots, divided by H; lse from attention_fwd.

    Every head's probabilities sum to 1 over a non-empty list, so the head sum totals H and dividing
    by H renormalises it exactly as naive.py does (up to rounding); an empty list stays all zero.
    """
    t, b = tl.program_id(0), tl.program_id(1).to(tl.int64)
    cd, rd = tl.arange(0, BLOCK_C), C + tl.arange(0, BLOCK_R)
    for k0 in range(0, K, BLOCK_K):
        slots = k0 + tl.arange(0, BLOCK_K)
        idx = tl.load(idx_ptr + (b * T + t) * K + slots, mask=slots < K, other=-1)  # [BK]
        listed, rows, kv_c, kv_r = _gather_rows(kv_ptr, idx, b, S, E, C, BLOCK_K, BLOCK_C, BLOCK_R, HAS_TAIL)
        total = tl.zeros([BLOCK_K], dtype=tl.float32)
        # Heads are walked inside the key block: the query's H x E row stays cached, kv rows are read once.
        for h0 in range(0, H, BLOCK_H):
            heads = h0 + tl.arange(0, BLOCK_H)
            head_ok = heads < H
            q_rows = ((b * T + t) * H + heads) * E
            q_c = tl.load(q_ptr + q_rows[:, None] + cd[None, :], mask=head_ok[:, None] & (cd < C)[None, :], other=0.0)
            q_r = tl.load(q_ptr + q_rows[:, None] + rd[None, :], mask=head_ok[:, None] & (rd < E)[None, :], other=0.0)
            lse = tl.load(lse_ptr + (b * T + t) * H + heads, mask=head_ok, other=0.0)
            s = _scores(q_c, q_r, kv_c, kv_r, listed, scale, HAS_TAIL, PRECISION)  # [BH, BK]
            p = tl.where(head_ok[:, None], tl.exp(s - lse[:, None]), 0.0)
            total += tl.sum(p, axis=0)
        tl.store(mass_ptr + (b * T + t) * K + slots, total / H, mask=slots < K)
