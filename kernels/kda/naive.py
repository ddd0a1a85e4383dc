"""Pure-torch KDA (delta rule with per-channel decay): the step recurrence and the chunkwise WY form.

Shape legend: B = batch, T = tokens, H = heads, K = key dim, V = value dim, N = chunks, C = chunk size.

Per head the state S is [K, V]. One step t decays each key channel, then writes with the delta rule:
    S' = exp(g_t)[:, None] * S_{t-1}
    S_t = S' + beta_t k_t (v_t - S'^T k_t)^T
    o_t = S_t^T (scale * q_t)
Both forms compute in fp32, return o in v's dtype and the final state in fp32. This file is the ground
truth the Triton kernel is tested against, so it favours plain statements over speed.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def _check_inputs(q, k, v, g, beta, initial_state) -> None:
    if q.dim() != 4:
        raise ValueError(f"q {tuple(q.shape)} must be [B, T, H, K]")
    b, t, h, dk = q.shape
    if k.shape != q.shape or g.shape != q.shape:
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)} and g {tuple(g.shape)} must share [B, T, H, K]")
    if v.dim() != 4 or v.shape[:3] != (b, t, h):
        raise ValueError(f"v {tuple(v.shape)} must be [B, T, H, V] with the B, T, H of q {tuple(q.shape)}")
    if beta.shape != (b, t, h):
        raise ValueError(f"beta {tuple(beta.shape)} must be [B, T, H] = {(b, t, h)}")
    if t == 0:
        raise ValueError("KDA needs at least one token, got T = 0")
    expected = (b, h, dk, v.shape[-1])
    if initial_state is not None and tuple(initial_state.shape) != expected:
        raise ValueError(f"initial_state {tuple(initial_state.shape)} must be [B, H, K, V] = {expected}")


def _initial_state(initial_state: torch.Tensor | None, shape: tuple[int, ...], device) -> torch.Tensor:
    if initial_state is None:
        return torch.zeros(shape, device=device, dtype=torch.float32)
    return initial_state.float()


def recurrent_kda(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Token-by-token KDA: o [B, T, H, V] and the final state [B, H, K, V] (or None)."""
    _check_inputs(q, k, v, g, beta, initial_state)
    b, t, h, dk = q.shape
    out_dtype = v.dtype
    q, k, v, g, beta = (x.float() for x in (q, k, v, g, beta))
    q = q * scale
    state = _initial_state(initial_state, (b, h, dk, v.shape[-1]), q.device)  # [B, H, K, V]
    outputs = []
    for i in range(t):
        state = g[:, i].exp()[..., None] * state
        k_i = k[:, i]  # [B, H, K]
        residual = v[:, i] - torch.einsum("bhk,bhkv->bhv", k_i, state)  # [B, H, V]
        state = state + torch.einsum("bhk,bhv->bhkv", beta[:, i, :, None] * k_i, residual)
        outputs.append(torch.einsum("bhk,bhkv->bhv", q[:, i], state))
    o = torch.stack(outputs, dim=1)  # [B, T, H, V]
    return o.to(out_dtype), state if output_final_state else None


def _to_chunks(x: torch.Tensor, chunk_size: int, pad: int) -> torch.Tensor:
    """[B, T, H, ...] -> fp32 [B, H, N, C, ...], zero-padded at the end of T."""
    x = x.float()
    x = F.pad(x, (0, 0) * (x.dim() - 2) + (0, pad))
    x = x.unflatten(1, (x.shape[1] // chunk_size, chunk_size))  # [B, N, C, H, ...]
    return x.movedim(3, 1)


# Largest decay (in log space) across one chunk for which the factorised intra-chunk products stay far from
# fp32 overflow: each factor is at most exp(span) and exp(88) is the fp32 limit.
_FACTORISE_SPAN = 60.0


def _intra_chunk(q: torch.Tensor, k: torch.Tensor, g: torch.Tensor, causal: torch.Tensor):
    """A[r, j] = sum_d k_r k_j exp(G_r - G_j) and M[r, j] = sum_d q_r k_j exp(G_r - G_j) on causal pairs.

    When every chunk's decay span is moderate, exp(G_r - G_j) = exp(G_r - G_ref) exp(G_ref - G_j) with the
    chunk's middle step as reference turns both into plain matmuls of [C, K] factors. Under stronger decay
    the factors could overflow, so the exact pairwise form is used: it builds [B, H, N, C, C, K] but masks
    the exponent before exp, keeping the upper triangle (exp(+hundreds)) from becoming inf * 0 = nan.
    """
    c = g.shape[-2]
    span = (g[..., :1, :] - g[..., -1:, :]).amax() if g.numel() else g.new_zeros(())
    if float(span.detach()) < _FACTORISE_SPAN:
        ref = g[..., c // 2 : c // 2 + 1, :]  # [B, H, N, 1, K]
        k_out = k * torch.exp(ref - g)  # [B, H, N, C, K]
        a_kk = (k * torch.exp(g - ref)) @ k_out.transpose(-1, -2)  # [B, H, N, C, C]
        m_qk = ((q * torch.exp(g - ref)) @ k_out.transpose(-1, -2)) * causal
        return a_kk, m_qk
    diff = g[..., :, None, :] - g[..., None, :, :]  # [B, H, N, C, C, K]
    decay = torch.exp(diff.masked_fill(~causal[..., None], float("-inf")))
    a_kk = torch.einsum("...rd,...rjd,...jd->...rj", k, decay, k)
    m_qk = torch.einsum("...rd,...rjd,...jd->...rj", q, decay, k)  # upper triangle already 0
    return a_kk, m_qk


def chunk_kda(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Chunkwise (WY / UT-transform) KDA, equal to `recurrent_kda`: o [B, T, H, V], final state or None.

    Inside a chunk, with G_r the cumulative log decay from the chunk start through step r and S0 the
    state entering the chunk, the values the delta rule actually writes are
        U = (I + diag(beta) A)^-1 diag(beta) (V - (K * exp(G)) S0),  A[r, j] = sum_d k_r k_j exp(G_r - G_j), j < r
    a unit lower-triangular system solved once per chunk for both terms (U = u - w S0). Then
        O = (Q * exp(G)) S0 + M U,        M[r, j] = sum_d q_r k_j exp(G_r - G_j), j <= r
        S_next = exp(G_last) S0 + (K * exp(G_last - G))^T U.
    """
    _check_inputs(q, k, v, g, beta, initial_state)
    if chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size} must be positive")
    b, t, h, dk = q.shape
    dv = v.shape[-1]
    out_dtype = v.dtype
    c = chunk_size
    n = -(-t // c)
    # Zero padding at the end is inert: beta = 0 writes nothing, g = 0 decays nothing, q = 0 reads nothing.
    q, k, v, g = (_to_chunks(x, c, n * c - t) for x in (q, k, v, g))  # [B, H, N, C, K or V]
    beta = _to_chunks(beta, c, n * c - t)  # [B, H, N, C]
    q = q * scale
    g = g.cumsum(-2)  # [B, H, N, C, K] log decay from the chunk start through each step

    causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()  # [C, C], row r may see column j <= r
    strict = causal.tril(-1)
    a_kk, m_qk = _intra_chunk(q, k, g, causal)
    a_kk = a_kk * strict  # [B, H, N, C, C]

    lower = torch.eye(c, device=q.device) + beta[..., None] * a_kk  # [B, H, N, C, C] unit lower-triangular
    u = torch.linalg.solve_triangular(lower, beta[..., None] * v, upper=False, unitriangular=True)  # [B, H, N, C, V]
    w = torch.linalg.solve_triangular(
        lower, beta[..., None] * k * g.exp(), upper=False, unitriangular=True
    )  # [B, H, N, C, K]

    state = _initial_state(initial_state, (b, h, dk, dv), q.device)  # [B, H, K, V]
    outputs = []
    # Chunks taken apart once: indexing chunk i of each tensor inside the loop made every index's backward fill a
    # zero gradient of the whole tensor and add them all up (a tenth of a CPU training step); unbind's backward
    # stacks the chunks' gradients, the same numbers.
    chunks = zip(*(x.unbind(2) for x in (q, k, g, u, w, m_qk)))
    for q_i, k_i, g_i, u_i, w_i, m_i in chunks:  # [B, H, C, K | V | C]
        written = u_i - w_i @ state  # [B, H, C, V]
        outputs.append((q_i * g_i.exp()) @ state + m_i @ written)
        g_last = g_i[:, :, -1]  # [B, H, K]
        carried = k_i * (g_last[:, :, None] - g_i).exp()  # [B, H, C, K]
        state = g_last.exp()[..., None] * state + carried.transpose(-1, -2) @ written
    o = torch.stack(outputs, dim=2)  # [B, H, N, C, V]
    o = o.movedim(1, 3).flatten(1, 2)[:, :t]  # [B, T, H, V]
    return o.to(out_dtype), state if output_final_state else None
