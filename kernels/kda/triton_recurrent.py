"""Triton kernel of the token-by-token KDA recurrence (decode), with its launcher.

Shape legend: B = batch, T = tokens, H = heads, K = key dim, V = value dim, KP = K padded to a power of
two >= 16, BV = value tile.

One program owns one head and one value tile and walks the tokens in order, keeping its [K, BV] slice
of the state in registers; value columns of the state never mix, so the tiles are independent.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from jointrl.kernels import buffers


@triton.jit
def _recurrent_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, h0_ptr, o_ptr, ht_ptr, scale, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, KP: tl.constexpr, BV: tl.constexpr, HAS_H0: tl.constexpr,
):
    """One head, one value tile: decay, delta-rule write and read for each token in turn."""
    i_bh, i_v = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    d = tl.arange(0, KP)
    e = i_v * BV + tl.arange(0, BV)
    d_ok, e_ok = d < K, e < V
    state_offs = i_bh.to(tl.int64) * K * V + d[:, None] * V + e[None, :]  # [KP, BV]
    state_mask = d_ok[:, None] & e_ok[None, :]
    if HAS_H0:
        state = tl.load(h0_ptr + state_offs, mask=state_mask, other=0.0).to(tl.float32)
    else:
        state = tl.zeros([KP, BV], dtype=tl.float32)
    for t in range(0, T):
        row = i_b.to(tl.int64) * T * H + t * H + i_h  # (b, t, h) as a flat [B, T, H] index
        q = tl.load(q_ptr + row * K + d, mask=d_ok, other=0.0).to(tl.float32) * scale  # [KP]
        k = tl.load(k_ptr + row * K + d, mask=d_ok, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + row * K + d, mask=d_ok, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + row * V + e, mask=e_ok, other=0.0).to(tl.float32)  # [BV]
        beta = tl.load(beta_ptr + row).to(tl.float32)
        state = state * tl.exp(g)[:, None]
        residual = v - tl.sum(k[:, None] * state, axis=0)  # [BV]
        state = state + (beta * k)[:, None] * residual[None, :]
        o = tl.sum(q[:, None] * state, axis=0)  # [BV]
        tl.store(o_ptr + row * V + e, o.to(o_ptr.dtype.element_ty), mask=e_ok)
    tl.store(ht_ptr + state_offs, state, mask=state_mask)


def recurrent_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-by-token KDA forward: o [B, T, H, V] in v's dtype and the final state [B, H, K, V] in fp32."""
    q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
    b, t, h, dk = q.shape
    dv = v.shape[-1]
    kp = max(16, triton.next_power_of_2(dk))
    bv = max(16, min(32, triton.next_power_of_2(dv)))
    o = buffers.empty_like(v)  # [B, T, H, V]
    final = buffers.empty(b, h, dk, dv, dtype=torch.float32, device=q.device)  # [B, H, K, V]
    h0 = initial_state.contiguous() if initial_state is not None else final  # final: an unread placeholder
    _recurrent_kernel[(b * h, triton.cdiv(dv, bv))](
        q, k, v, g, beta, h0, o, final, scale, t, H=h, K=dk, V=dv, KP=kp, BV=bv, HAS_H0=initial_state is not None
    )
    return o, final
