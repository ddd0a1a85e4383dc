"""Triton kernels of the chunkwise KDA forward and the launcher that chains them.

Shape legend: B = batch, T = tokens, H = heads, K = key dim, V = value dim, N = chunks, C = chunk size,
BS = sub-chunk rows (16), BC = chunk rows padded to a power of two >= 16, BK / BV = key / value tiles,
BKD = key tile of the diagonal sub-chunk blocks (16),
KP = K padded to a power of two >= 16.

The math is the WY form of kernels/kda/naive.py `chunk_kda` (its docstring names every symbol); five
kernels run in order, each reading what the previous ones wrote to global memory:
  1. `_decay_cumsum_kernel`  G = in-chunk cumulative log decay                       grid (N, B*H)
  2. `_intra_scores_kernel`  L = diag(beta) A_kk and M = scale * A_qk, one 16-row
                             sub-chunk of one chunk per program                       grid (N*ceil(C/16), B*H)
  3. `_wy_solve_kernel`      (I + L)^-1 by forward substitution, then
                             u = (I + L)^-1 diag(beta) V, w = (I + L)^-1 diag(beta) (K * exp(G))  grid (N, B*H)
  4. `_state_scan_kernel`    the only sequential part: the state entering each chunk,
                             the written values U = u - w S, and the final state      grid (B*H, V / BV)
  5. `_output_kernel`        O = (scale Q * exp(G)) S + M U                           grid (N, B*H, V / BV)

Numerical guarantee of step 2. A[r, j] = sum_d k_r k_j exp(G_r - G_j) is never formed through one
reference point for the whole chunk (exp(-G_j) overflows under strong decay). Off-diagonal 16 x 16
blocks (row sub-chunk i, column sub-chunk j < i) factor the decay at the first row p of sub-chunk i:
exp(G_r - G_p) * exp(G_p - G_c), two sums of g over spans that do not overlap; for a decay (g <= 0,
which the model's gate guarantees) both factors lie in [0, 1], so nothing overflows, and a factor that
underflows drops a term already below fp32's smallest normal times |k_r||k_c|. Diagonal blocks take
exp(G_r - G_c) directly and only for causal pairs r >= c, so they are exact for any g.

All tensors are contiguous; token-major ones ([B, T, H, D]) advance H * D per token. Every kernel
computes in fp32 and multiplies with fp32 `tl.dot` at the precision the launcher passes.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from jointrl.kernels import buffers

SUB_CHUNK = 16
# fp32 products at full precision: tf32 would add ~1e-3 relative error against the fp32 ground truth.
DOT_PRECISION = "ieee"


@triton.jit
def _token_offsets(i_b, i_h, t, T, H: tl.constexpr, D: tl.constexpr):
    """Element offset of (b, t, h, 0) in a contiguous [B, T, H, D] tensor, in int64."""
    return ((i_b.to(tl.int64) * T + t) * H + i_h) * D


@triton.jit
def _decay_cumsum_kernel(
    g_ptr, gc_ptr, T,
    H: tl.constexpr, K: tl.constexpr, C: tl.constexpr, BC: tl.constexpr, BK: tl.constexpr,
):
    """One chunk of one head: gc = cumsum of g over the chunk's rows, fp32."""
    i_n, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    rows = tl.arange(0, BC)
    t = i_n * C + rows
    row_ok = (rows < C) & (t < T)
    offs = _token_offsets(i_b, i_h, t, T, H, K)  # [BC]
    for k0 in range(0, K, BK):
        d = k0 + tl.arange(0, BK)
        mask = row_ok[:, None] & (d < K)[None, :]
        g = tl.load(g_ptr + offs[:, None] + d[None, :], mask=mask, other=0.0).to(tl.float32)  # [BC, BK]
        tl.store(gc_ptr + offs[:, None] + d[None, :], tl.cumsum(g, axis=0), mask=mask)


@triton.jit
def _intra_scores_kernel(
    q_ptr, k_ptr, gc_ptr, beta_ptr, akk_ptr, aqk_ptr, scale, T,
    H: tl.constexpr, K: tl.constexpr, C: tl.constexpr, NS: tl.constexpr,
    BS: tl.constexpr, BK: tl.constexpr, BKD: tl.constexpr, DOT: tl.constexpr,
):
    """Rows of one sub-chunk: L[r, :r] = beta_r A_kk[r, :r] and M[r, :r+1] = scale A_qk[r, :r+1] (see module doc)."""
    i_ns, i_bh = tl.program_id(0), tl.program_id(1)
    i_n, i_s = i_ns // NS, i_ns % NS
    i_b, i_h = i_bh // H, i_bh % H
    sub = tl.arange(0, BS)
    r = i_s * BS + sub  # in-chunk rows of this sub-chunk
    t_r = i_n * C + r
    r_ok = (r < C) & (t_r < T)
    offs_r = _token_offsets(i_b, i_h, t_r, T, H, K)  # [BS]
    offs_a = _token_offsets(i_b, i_h, t_r, T, H, C)  # [BS], rows of the [B, T, H, C] score buffers
    beta = tl.load(beta_ptr + (i_b.to(tl.int64) * T + t_r) * H + i_h, mask=r_ok, other=0.0).to(tl.float32)
    t_ref = i_n * C + i_s * BS
    # Scalar validity enters masks as a length limit (d < 0 loads nothing): the interpreter cannot
    # broadcast a scalar boolean against a block in `&`.
    k_ref = tl.where((i_s * BS < C) & (t_ref < T), K, 0)
    offs_ref = _token_offsets(i_b, i_h, t_ref, T, H, K)

    # Earlier sub-chunks: every column row precedes the reference row, so all of them are valid tokens.
    for j_s in range(0, i_s):
        c = j_s * BS + sub
        offs_c = _token_offsets(i_b, i_h, i_n * C + c, T, H, K)  # [BS]
        acc_kk = tl.zeros([BS, BS], dtype=tl.float32)
        acc_qk = tl.zeros([BS, BS], dtype=tl.float32)
        for k0 in range(0, K, BK):
            d = k0 + tl.arange(0, BK)
            m_r = r_ok[:, None] & (d < K)[None, :]
            m_c = (sub >= 0)[:, None] & (d < k_ref)[None, :]  # [BS, BK], all columns real when the rows are
            k_r = tl.load(k_ptr + offs_r[:, None] + d[None, :], mask=m_r, other=0.0).to(tl.float32)  # [BS, BK]
            q_r = tl.load(q_ptr + offs_r[:, None] + d[None, :], mask=m_r, other=0.0).to(tl.float32)
            g_r = tl.load(gc_ptr + offs_r[:, None] + d[None, :], mask=m_r, other=0.0)
            g_ref = tl.load(gc_ptr + offs_ref + d, mask=d < k_ref, other=0.0)  # [BK]
            k_c = tl.load(k_ptr + offs_c[:, None] + d[None, :], mask=m_c, other=0.0).to(tl.float32)
            g_c = tl.load(gc_ptr + offs_c[:, None] + d[None, :], mask=m_c, other=0.0)
            decay_r = tl.exp(tl.where(m_r, g_r - g_ref[None, :], 0.0))  # exp(G_r - G_p) <= 1 for a decay
            k_c = k_c * tl.exp(tl.where(m_c, g_ref[None, :] - g_c, 0.0))  # exp(G_p - G_c) <= 1 for a decay
            acc_kk += tl.dot(k_r * decay_r, tl.trans(k_c), input_precision=DOT)
            acc_qk += tl.dot(q_r * decay_r, tl.trans(k_c), input_precision=DOT)
        mask = r_ok[:, None] & (c < C)[None, :]
        tl.store(akk_ptr + offs_a[:, None] + c[None, :], beta[:, None] * acc_kk, mask=mask)
        tl.store(aqk_ptr + offs_a[:, None] + c[None, :], scale * acc_qk, mask=mask)

    # The diagonal block as one [BS, BS, BKD] product per key tile: rows and columns are the same tokens,
    # and exp is taken only of causal spans G_r - G_c (r >= c, r a real token), so it is exact for any g.
    on_or_below = sub[:, None] >= sub[None, :]  # [BS, BS]
    causal = (on_or_below & r_ok[:, None])[:, :, None]  # [BS, BS, 1]
    acc_kk = tl.zeros([BS, BS], dtype=tl.float32)
    acc_qk = tl.zeros([BS, BS], dtype=tl.float32)
    for k0 in range(0, K, BKD):
        d = k0 + tl.arange(0, BKD)
        m_r = r_ok[:, None] & (d < K)[None, :]
        k_r = tl.load(k_ptr + offs_r[:, None] + d[None, :], mask=m_r, other=0.0).to(tl.float32)  # [BS, BKD]
        q_r = tl.load(q_ptr + offs_r[:, None] + d[None, :], mask=m_r, other=0.0).to(tl.float32)
        g_r = tl.load(gc_ptr + offs_r[:, None] + d[None, :], mask=m_r, other=0.0)
        span = tl.where(causal, g_r[:, None, :] - g_r[None, :, :], 0.0)  # [BS, BS, BKD]
        k_c = k_r[None, :, :] * tl.exp(span)  # k_c exp(G_r - G_c)
        acc_kk += tl.sum(k_r[:, None, :] * k_c, axis=2)
        acc_qk += tl.sum(q_r[:, None, :] * k_c, axis=2)
    mask = r_ok[:, None] & (r < C)[None, :]
    below = sub[:, None] > sub[None, :]
    tl.store(akk_ptr + offs_a[:, None] + r[None, :], tl.where(below, beta[:, None] * acc_kk, 0.0), mask=mask)
    tl.store(aqk_ptr + offs_a[:, None] + r[None, :], tl.where(on_or_below, scale * acc_qk, 0.0), mask=mask)


@triton.jit
def _wy_solve_kernel(
    k_ptr, v_ptr, gc_ptr, beta_ptr, akk_ptr, w_ptr, u_ptr, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, C: tl.constexpr,
    BC: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, DOT: tl.constexpr,
):
    """One chunk of one head: invert the unit lower-triangular I + L, then u and w through the inverse."""
    i_n, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    rows = tl.arange(0, BC)
    t = i_n * C + rows
    r_ok = (rows < C) & (t < T)
    # X = (I + L)^-1 - I is strictly lower; row i follows from rows < i: X_i = -L_i - L_i X.
    x = tl.zeros([BC, BC], dtype=tl.float32)
    offs_l = _token_offsets(i_b, i_h, i_n * C, T, H, C)  # row 0 of the chunk in the [B, T, H, C] buffer
    for i in range(1, C):
        l_len = tl.where(i_n * C + i < T, i, 0)  # a row past T is a padding row of L, all zero
        l_i = tl.load(akk_ptr + offs_l + i * H * C + rows, mask=rows < l_len, other=0.0)
        x_i = -l_i - tl.sum(l_i[:, None] * x, axis=0)  # [BC]
        x = tl.where((rows == i)[:, None], x_i[None, :], x)
    inverse = x + tl.where(rows[:, None] == rows[None, :], 1.0, 0.0)  # [BC, BC]
    beta = tl.load(beta_ptr + (i_b.to(tl.int64) * T + t) * H + i_h, mask=r_ok, other=0.0).to(tl.float32)

    offs_v = _token_offsets(i_b, i_h, t, T, H, V)
    for v0 in range(0, V, BV):
        e = v0 + tl.arange(0, BV)
        mask = r_ok[:, None] & (e < V)[None, :]
        v = tl.load(v_ptr + offs_v[:, None] + e[None, :], mask=mask, other=0.0).to(tl.float32)  # [BC, BV]
        u = tl.dot(inverse, beta[:, None] * v, input_precision=DOT)
        tl.store(u_ptr + offs_v[:, None] + e[None, :], u, mask=mask)
    offs_k = _token_offsets(i_b, i_h, t, T, H, K)
    for k0 in range(0, K, BK):
        d = k0 + tl.arange(0, BK)
        mask = r_ok[:, None] & (d < K)[None, :]
        k = tl.load(k_ptr + offs_k[:, None] + d[None, :], mask=mask, other=0.0).to(tl.float32)  # [BC, BK]
        g = tl.load(gc_ptr + offs_k[:, None] + d[None, :], mask=mask, other=0.0)
        w = tl.dot(inverse, beta[:, None] * k * tl.exp(g), input_precision=DOT)
        tl.store(w_ptr + offs_k[:, None] + d[None, :], w, mask=mask)


@triton.jit
def _state_scan_kernel(
    k_ptr, gc_ptr, w_ptr, u_ptr, h0_ptr, h_ptr, vnew_ptr, ht_ptr, T, NT,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, C: tl.constexpr,
    BC: tl.constexpr, KP: tl.constexpr, BV: tl.constexpr, HAS_H0: tl.constexpr, DOT: tl.constexpr,
):
    """One head, one value tile: walk the chunks in order carrying the [K, BV] state in registers."""
    i_bh, i_v = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    d = tl.arange(0, KP)
    e = i_v * BV + tl.arange(0, BV)
    state_mask = (d < K)[:, None] & (e < V)[None, :]
    state_offs = d[:, None] * V + e[None, :]  # [KP, BV] within one [K, V] state
    if HAS_H0:
        state = tl.load(h0_ptr + i_bh.to(tl.int64) * K * V + state_offs, mask=state_mask, other=0.0).to(tl.float32)
    else:
        state = tl.zeros([KP, BV], dtype=tl.float32)
    rows = tl.arange(0, BC)
    for i_n in range(0, NT):
        tl.store(h_ptr + (i_bh.to(tl.int64) * NT + i_n) * K * V + state_offs, state, mask=state_mask)
        t = i_n * C + rows
        r_ok = (rows < C) & (t < T)
        offs_k = _token_offsets(i_b, i_h, t, T, H, K)  # [BC]
        offs_v = _token_offsets(i_b, i_h, t, T, H, V)
        mask_k = r_ok[:, None] & (d < K)[None, :]
        mask_v = r_ok[:, None] & (e < V)[None, :]
        w = tl.load(w_ptr + offs_k[:, None] + d[None, :], mask=mask_k, other=0.0)  # [BC, KP]
        u = tl.load(u_ptr + offs_v[:, None] + e[None, :], mask=mask_v, other=0.0)  # [BC, BV]
        written = u - tl.dot(w, state, input_precision=DOT)
        tl.store(vnew_ptr + offs_v[:, None] + e[None, :], written, mask=mask_v)
        # The chunk's last real token carries its total decay (padding rows past T decay nothing).
        t_last = tl.minimum(i_n * C + C, T) - 1
        g_last = tl.load(gc_ptr + _token_offsets(i_b, i_h, t_last, T, H, K) + d, mask=d < K, other=0.0)  # [KP]
        g = tl.load(gc_ptr + offs_k[:, None] + d[None, :], mask=mask_k, other=0.0)
        k = tl.load(k_ptr + offs_k[:, None] + d[None, :], mask=mask_k, other=0.0).to(tl.float32)
        k = k * tl.exp(tl.where(mask_k, g_last[None, :] - g, 0.0))  # [BC, KP]
        state = state * tl.exp(g_last)[:, None] + tl.dot(tl.trans(k), written, input_precision=DOT)
    tl.store(ht_ptr + i_bh.to(tl.int64) * K * V + state_offs, state, mask=state_mask)


@triton.jit
def _output_kernel(
    q_ptr, gc_ptr, h_ptr, aqk_ptr, vnew_ptr, o_ptr, scale, T, NT,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, C: tl.constexpr,
    BC: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, DOT: tl.constexpr,
):
    """One chunk, one head, one value tile: O = (scale Q * exp(G)) S_in + M U."""
    i_n, i_bh, i_v = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    rows = tl.arange(0, BC)
    t = i_n * C + rows
    r_ok = (rows < C) & (t < T)
    e = i_v * BV + tl.arange(0, BV)
    offs_k = _token_offsets(i_b, i_h, t, T, H, K)  # [BC]
    h_base = (i_bh.to(tl.int64) * NT + i_n) * K * V
    acc = tl.zeros([BC, BV], dtype=tl.float32)
    for k0 in range(0, K, BK):
        d = k0 + tl.arange(0, BK)
        mask = r_ok[:, None] & (d < K)[None, :]
        q = tl.load(q_ptr + offs_k[:, None] + d[None, :], mask=mask, other=0.0).to(tl.float32)  # [BC, BK]
        g = tl.load(gc_ptr + offs_k[:, None] + d[None, :], mask=mask, other=0.0)
        state_mask = (d < K)[:, None] & (e < V)[None, :]
        state = tl.load(h_ptr + h_base + d[:, None] * V + e[None, :], mask=state_mask, other=0.0)  # [BK, BV]
        acc += tl.dot(q * tl.exp(g), state, input_precision=DOT)
    acc = acc * scale
    causal = r_ok[:, None] & (rows[None, :] <= rows[:, None])
    m = tl.load(aqk_ptr + _token_offsets(i_b, i_h, t, T, H, C)[:, None] + rows[None, :], mask=causal, other=0.0)
    offs_v = _token_offsets(i_b, i_h, t, T, H, V)
    mask_v = r_ok[:, None] & (e < V)[None, :]
    written = tl.load(vnew_ptr + offs_v[:, None] + e[None, :], mask=mask_v, other=0.0)  # [BC, BV]
    acc += tl.dot(m, written, input_precision=DOT)
    tl.store(o_ptr + offs_v[:, None] + e[None, :], acc.to(o_ptr.dtype.element_ty), mask=mask_v)


def _tile(n: int, cap: int) -> int:
    """A power-of-two tile covering n, at least 16 (tl.dot's minimum) and at most cap (unless 16 > cap)."""
    return max(16, min(cap, triton.next_power_of_2(n)))


def chunk_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Chunkwise KDA forward: o [B, T, H, V] in v's dtype, final state and per-chunk entering states, fp32."""
    q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
    b, t, h, dk = q.shape
    dv = v.shape[-1]
    c = chunk_size
    n = triton.cdiv(t, c)
    bc = max(16, triton.next_power_of_2(c))
    ns = triton.cdiv(c, SUB_CHUNK)
    bk, kp, bv = _tile(dk, 64), max(16, triton.next_power_of_2(dk)), _tile(dv, 32)
    dev = q.device

    gc = buffers.empty(b, t, h, dk, dtype=torch.float32, device=dev)  # [B, T, H, K] in-chunk cumsum of g
    akk = buffers.empty(b, t, h, c, dtype=torch.float32, device=dev)  # [B, T, H, C] row r of L per token
    aqk = buffers.empty(b, t, h, c, dtype=torch.float32, device=dev)  # [B, T, H, C] row r of M per token
    w = buffers.empty(b, t, h, dk, dtype=torch.float32, device=dev)  # [B, T, H, K]
    u = buffers.empty(b, t, h, dv, dtype=torch.float32, device=dev)  # [B, T, H, V]
    written = buffers.empty(b, t, h, dv, dtype=torch.float32, device=dev)  # [B, T, H, V]
    states = buffers.empty(b, h, n, dk, dv, dtype=torch.float32, device=dev)  # [B, H, N, K, V]
    final = buffers.empty(b, h, dk, dv, dtype=torch.float32, device=dev)  # [B, H, K, V]
    o = buffers.empty_like(v)  # [B, T, H, V]
    h0 = initial_state.contiguous() if initial_state is not None else final  # final: an unread placeholder

    _decay_cumsum_kernel[(n, b * h)](g, gc, t, H=h, K=dk, C=c, BC=bc, BK=bk)
    _intra_scores_kernel[(n * ns, b * h)](
        q, k, gc, beta, akk, aqk, scale, t, H=h, K=dk, C=c, NS=ns, BS=SUB_CHUNK, BK=bk, BKD=16, DOT=DOT_PRECISION
    )
    _wy_solve_kernel[(n, b * h)](
        k, v, gc, beta, akk, w, u, t, H=h, K=dk, V=dv, C=c, BC=bc, BK=bk, BV=bv, DOT=DOT_PRECISION
    )
    _state_scan_kernel[(b * h, triton.cdiv(dv, bv))](
        k, gc, w, u, h0, states, written, final, t, n,
        H=h, K=dk, V=dv, C=c, BC=bc, KP=kp, BV=bv, HAS_H0=initial_state is not None, DOT=DOT_PRECISION,
    )
    _output_kernel[(n, b * h, triton.cdiv(dv, bv))](
        q, gc, states, aqk, written, o, scale, t, n, H=h, K=dk, V=dv, C=c, BC=bc, BK=bk, BV=bv, DOT=DOT_PRECISION
    )
    return o, final, states
