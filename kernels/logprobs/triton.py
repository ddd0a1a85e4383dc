"""Triton token log-probabilities and entropy of a linear head: fused forward, tiled recompute backward.

Shape legend: N = tokens, D = hidden dim, V = vocabulary, C = vocabulary columns per backward chunk,
S = vocabulary splits of the forward, BN / BV / BD = token / vocabulary / hidden tile sizes.

Forward (`_forward_kernel`, grid [N / BN, S]): each program owns BN tokens and one contiguous run of
vocabulary tiles. Per tile it forms the [BN, BV] logits with tl.dot over D tiles, then updates a running
max m, s = sum exp(z - m), a = sum exp(z - m)(z - m) and picks up the target's logit. The S partial
states are merged in torch ([S, N], tiny): splitting the vocabulary keeps the GPU busy when N / BN
alone is below the number of SMs. No logits leave the chip.

Backward, per chunk of C vocabulary columns (the only buffer is dlogits [N, C]):
  `_dlogits_kernel` (grid [N / BN, C / BV]) recomputes each logits tile, log p = (z - m) - log s from
  the saved max m and log s (as log_softmax does, so likely tokens keep log p to its own precision), and writes
      dlogits = (g_lp (onehot - p) - g_ent p (log p + entropy)) / temperature
  then `_matmul_kernel` (grid [rows / BM, D / BK]) accumulates d_hidden += dlogits @ weight[chunk] and
  writes d_weight[chunk] = dlogits^T @ hidden, each program owning one output tile (no atomics, so
  results are deterministic). Accumulation is fp32 throughout; outputs are fp32, gradients come back
  in the inputs' dtype. The maths is spelled out in naive.py, the ground truth this file is tested on.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from jointrl.kernels import buffers
from jointrl.kernels.logprobs.naive import DEFAULT_CHUNK, check_chunk, check_inputs

# Tile sizes: (BN, BV, BD, warps) for the logits kernels and (BM, BK, BR, warps) for the matmul. The
# interpreter runs each program as numpy calls, so small tiles (still >= 16 for tl.dot) keep tests fast.
_GPU = {"logits": (64, 128, 64, 8), "matmul": (64, 128, 32, 4)}
_INTERPRETED = {"logits": (16, 32, 16, 1), "matmul": (16, 32, 16, 1)}
# The interpreter has no SMs to fill; asking for 8 programs splits the vocabulary of test-sized inputs
# (N <= 64 is at most 4 token blocks), so the merge of partial states runs under test.
_INTERPRETED_PROGRAMS = 8


def _config(x: torch.Tensor) -> dict:
    return _GPU if x.is_cuda else _INTERPRETED


def _precision(dtype: torch.dtype) -> str | None:
    # fp32 inputs: three tf32 passes keep logits near fp32 accuracy on NVIDIA tensor cores (RL ratios
    # are sensitive to logprob error; ROCm has no tf32x3, so full fp32 there); 16-bit inputs multiply
    # natively with fp32 accumulation (None: the backend's default).
    if dtype != torch.float32:
        return None
    return "ieee" if torch.version.hip else "tf32x3"


def _upcast(x: torch.Tensor) -> bool:
    # The interpreter multiplies bf16 tiles as their raw uint16 bits (triton 3.9), so off the GPU
    # 16-bit tiles become fp32 before tl.dot; on the GPU they stay 16-bit for the tensor cores.
    return not x.is_cuda and x.dtype != torch.float32


@triton.jit
def _logits_tile(h_ptr, w_ptr, rows, cols, row_ok, col_ok, D, s_hn, s_hd, s_wv, s_wd, inv_temp,
                 BLOCK_N: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_D: tl.constexpr, PRECISION: tl.constexpr,
                 UPCAST: tl.constexpr):
    """fp32 logits of BN tokens x BV vocabulary rows, divided by the temperature: [BN, BV]."""
    acc = tl.zeros((BLOCK_N, BLOCK_V), dtype=tl.float32)
    for d0 in range(0, D, BLOCK_D):
        dd = d0 + tl.arange(0, BLOCK_D)
        d_ok = dd < D
        h = tl.load(h_ptr + rows[:, None] * s_hn + dd[None, :] * s_hd, mask=row_ok[:, None] & d_ok[None, :], other=0.0)
        w = tl.load(w_ptr + cols[:, None] * s_wv + dd[None, :] * s_wd, mask=col_ok[:, None] & d_ok[None, :], other=0.0)
        if UPCAST:
            h, w = h.to(tl.float32), w.to(tl.float32)
        acc = tl.dot(h, tl.trans(w), acc, input_precision=PRECISION)
    return acc * inv_temp


@triton.jit
def _forward_kernel(h_ptr, w_ptr, t_ptr, m_ptr, s_ptr, a_ptr, z_ptr,
                    N, V, D, s_hn, s_hd, s_wv, s_wd, inv_temp, tiles_per_split,
                    WITH_ENTROPY: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_V: tl.constexpr,
                    BLOCK_D: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    """Partial (max, sum exp, sum exp * shifted logit, target logit) of BN tokens over one vocabulary split."""
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < N
    target = tl.load(t_ptr + rows, mask=row_ok, other=-1)
    m = tl.full((BLOCK_N,), float("-inf"), dtype=tl.float32)
    s = tl.zeros((BLOCK_N,), dtype=tl.float32)
    a = tl.zeros((BLOCK_N,), dtype=tl.float32)
    picked = tl.zeros((BLOCK_N,), dtype=tl.float32)
    first = split * tiles_per_split
    last = tl.minimum(first + tiles_per_split, tl.cdiv(V, BLOCK_V))
    for tile in range(first, last):
        cols = tile * BLOCK_V + tl.arange(0, BLOCK_V)
        col_ok = cols < V
        z = _logits_tile(h_ptr, w_ptr, rows, cols, row_ok, col_ok, D, s_hn, s_hd, s_wv, s_wd, inv_temp,
                         BLOCK_N, BLOCK_V, BLOCK_D, PRECISION, UPCAST)
        picked += tl.sum(tl.where(cols[None, :] == target[:, None], z, 0.0), axis=1)
        # Every tile holds at least one real column, so m_new is finite; padded columns stay finite
        # (0) and are zeroed after the exp, so no inf * 0 arises anywhere.
        m_new = tl.maximum(m, tl.max(tl.where(col_ok[None, :], z, float("-inf")), axis=1))
        rescale = tl.exp(m - m_new)
        shifted = tl.where(col_ok[None, :], z - m_new[:, None], 0.0)
        e = tl.where(col_ok[None, :], tl.exp(shifted), 0.0)
        if WITH_ENTROPY:
            # Re-measure the old terms from the new max (m = -inf only while s = 0, before the first tile).
            a = (a + tl.where(s > 0, m - m_new, 0.0) * s) * rescale
            a += tl.sum(e * shifted, axis=1)
        s = s * rescale + tl.sum(e, axis=1)
        m = m_new
    out = split * N + rows
    tl.store(m_ptr + out, m, mask=row_ok)
    tl.store(s_ptr + out, s, mask=row_ok)
    tl.store(a_ptr + out, a, mask=row_ok)
    tl.store(z_ptr + out, picked, mask=row_ok)


@triton.jit
def _dlogits_kernel(h_ptr, w_ptr, t_ptr, m_ptr, logs_ptr, ent_ptr, glp_ptr, gent_ptr, out_ptr,
                    N, V, D, v0, width, s_hn, s_hd, s_wv, s_wd, s_on, s_ov, inv_temp,
                    HAS_LP_GRAD: tl.constexpr, HAS_ENT_GRAD: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_V: tl.constexpr, BLOCK_D: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    """Gradient w.r.t. the raw logits (hidden @ weight^T) of one [BN, BV] tile of the chunk at column v0."""
    pid_n = tl.program_id(0)
    pid_v = tl.program_id(1)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    local = pid_v * BLOCK_V + tl.arange(0, BLOCK_V)
    cols = v0 + local
    row_ok = rows < N
    col_ok = (local < width) & (cols < V)
    z = _logits_tile(h_ptr, w_ptr, rows, cols, row_ok, col_ok, D, s_hn, s_hd, s_wv, s_wd, inv_temp,
                     BLOCK_N, BLOCK_V, BLOCK_D, PRECISION, UPCAST)
    m = tl.load(m_ptr + rows, mask=row_ok, other=0.0)
    log_s = tl.load(logs_ptr + rows, mask=row_ok, other=0.0)
    log_p = (z - m[:, None]) - log_s[:, None]
    p = tl.exp(log_p)
    grad = tl.zeros((BLOCK_N, BLOCK_V), dtype=tl.float32)
    if HAS_LP_GRAD:
        target = tl.load(t_ptr + rows, mask=row_ok, other=-1)
        g_lp = tl.load(glp_ptr + rows, mask=row_ok, other=0.0)
        grad += g_lp[:, None] * (tl.where(cols[None, :] == target[:, None], 1.0, 0.0) - p)
    if HAS_ENT_GRAD:
        entropy = tl.load(ent_ptr + rows, mask=row_ok, other=0.0)
        g_ent = tl.load(gent_ptr + rows, mask=row_ok, other=0.0)
        grad -= g_ent[:, None] * p * (log_p + entropy[:, None])
    grad = grad * inv_temp
    ptrs = out_ptr + rows[:, None] * s_on + local[None, :] * s_ov
    tl.store(ptrs, grad.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, K, R, s_am, s_ar, s_br, s_bk, s_cm, s_ck,
                   ACCUMULATE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                   BLOCK_R: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    """One [BM, BK] tile of c = a @ b (or c += a @ b), a [M, R], b [R, K], any strides, fp32 accumulation."""
    pid_m = tl.program_id(0)
    pid_k = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rk = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    m_ok = rm < M
    k_ok = rk < K
    acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rr = r0 + tl.arange(0, BLOCK_R)
        r_ok = rr < R
        a = tl.load(a_ptr + rm[:, None] * s_am + rr[None, :] * s_ar, mask=m_ok[:, None] & r_ok[None, :], other=0.0)
        b = tl.load(b_ptr + rr[:, None] * s_br + rk[None, :] * s_bk, mask=r_ok[:, None] & k_ok[None, :], other=0.0)
        if UPCAST:
            a, b = a.to(tl.float32), b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    ptrs = c_ptr + rm[:, None] * s_cm + rk[None, :] * s_ck
    mask = m_ok[:, None] & k_ok[None, :]
    if ACCUMULATE:
        acc += tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    tl.store(ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, accumulate: bool) -> None:
    """out (+)= a [M, R] @ b [R, K] with the Triton tile kernel; out [M, K] of any float dtype."""
    block_m, block_k, block_r, warps = _config(a)["matmul"]
    m, r = a.shape
    k = b.shape[1]
    grid = (triton.cdiv(m, block_m), triton.cdiv(k, block_k))
    _matmul_kernel[grid](
        a, b, out, m, k, r, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        ACCUMULATE=accumulate, BLOCK_M=block_m, BLOCK_K=block_k, BLOCK_R=block_r,
        PRECISION=_precision(a.dtype), UPCAST=_upcast(a), num_warps=warps,
    )


def _splits(n_blocks: int, n_tiles: int, x: torch.Tensor) -> int:
    """Vocabulary splits: enough programs for two waves over the SMs, never more splits than tiles."""
    if x.is_cuda:
        programs = 2 * torch.cuda.get_device_properties(x.device).multi_processor_count
    else:
        programs = _INTERPRETED_PROGRAMS
    wanted = max(1, triton.cdiv(programs, n_blocks))
    tiles_per_split = triton.cdiv(n_tiles, min(wanted, n_tiles))
    # Recount from the rounded-up run length so that no split is left without a tile.
    return triton.cdiv(n_tiles, tiles_per_split)


def _forward(hidden, weight, targets, temperature, with_entropy):
    """(logprobs [N], entropy [N] or None, max logit m [N], log s [N]), all fp32."""
    n, d = hidden.shape
    v = weight.shape[0]
    if n == 0:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, (empty if with_entropy else None), empty, empty
    block_n, block_v, block_d, warps = _config(hidden)["logits"]
    n_blocks, n_tiles = triton.cdiv(n, block_n), triton.cdiv(v, block_v)
    splits = _splits(n_blocks, n_tiles, hidden)
    partial = [buffers.empty(splits, n, dtype=torch.float32, device=hidden.device) for _ in range(4)]
    m, s, a, picked = partial  # each [S, N]
    _forward_kernel[(n_blocks, splits)](
        hidden, weight, targets, m, s, a, picked,
        n, v, d, hidden.stride(0), hidden.stride(1), weight.stride(0), weight.stride(1),
        1.0 / temperature, triton.cdiv(n_tiles, splits),
        WITH_ENTROPY=with_entropy, BLOCK_N=block_n, BLOCK_V=block_v, BLOCK_D=block_d,
        PRECISION=_precision(hidden.dtype), UPCAST=_upcast(hidden), num_warps=warps,
    )
    peak = m.amax(dim=0)  # [N]
    rescale = torch.exp(m - peak)  # [S, N]
    total = (s * rescale).sum(dim=0)  # [N]
    log_s = total.log()
    logprobs = (picked.sum(dim=0) - peak) - log_s  # only the split holding the target added a non-zero
    entropy = None
    if with_entropy:
        # Each split measured its terms from its own max; re-measure them from the global one.
        shifted = ((a + (m - peak) * s) * rescale).sum(dim=0)
        entropy = log_s - shifted / total
    return logprobs, entropy, peak, log_s


def _backward(hidden, weight, targets, m, log_s, entropy, g_lp, g_ent, temperature, chunk_size, want_h, want_w):
    """(d_hidden [N, D] or None, d_weight [V, D] or None) in the inputs' dtype, by chunks of C columns."""
    n, d = hidden.shape
    v = weight.shape[0]
    if n == 0:
        return (torch.zeros_like(hidden) if want_h else None), (torch.zeros_like(weight) if want_w else None)
    block_n, block_v, block_d, warps = _config(hidden)["logits"]
    # Unused pointers still need a tensor; m is never read through them (the constexpr flags prune the loads).
    g_lp_arg = g_lp.float().contiguous() if g_lp is not None else m
    g_ent_arg = g_ent.float().contiguous() if g_ent is not None else m
    ent_arg = entropy if g_ent is not None else m
    width_max = min(chunk_size, v)
    # dlogits in the inputs' dtype: the two matmuls below take equal operand dtypes, and bf16 dlogits
    # halve the chunk buffer (each value is computed in fp32 and rounded once).
    dlogits = buffers.empty(n, width_max, dtype=hidden.dtype, device=hidden.device)  # [N, C]
    d_hidden = buffers.empty(n, d, dtype=torch.float32, device=hidden.device) if want_h else None  # [N, D]
    d_weight = buffers.empty(v, d, dtype=weight.dtype, device=weight.device) if want_w else None  # [V, D]
    for v0 in range(0, v, chunk_size):
        width = min(chunk_size, v - v0)
        grid = (triton.cdiv(n, block_n), triton.cdiv(width, block_v))
        _dlogits_kernel[grid](
            hidden, weight, targets, m, log_s, ent_arg, g_lp_arg, g_ent_arg, dlogits,
            n, v, d, v0, width, hidden.stride(0), hidden.stride(1), weight.stride(0), weight.stride(1),
            dlogits.stride(0), dlogits.stride(1), 1.0 / temperature,
            HAS_LP_GRAD=g_lp is not None, HAS_ENT_GRAD=g_ent is not None,
            BLOCK_N=block_n, BLOCK_V=block_v, BLOCK_D=block_d, PRECISION=_precision(hidden.dtype),
            UPCAST=_upcast(hidden), num_warps=warps,
        )
        chunk = dlogits[:, :width]  # [N, C]
        if want_h:
            _matmul(chunk, weight[v0 : v0 + width], d_hidden, accumulate=v0 > 0)  # [N, D]
        if want_w:
            _matmul(chunk.t(), hidden, d_weight[v0 : v0 + width], accumulate=False)  # [C, D]
    return (d_hidden.to(hidden.dtype) if want_h else None), d_weight


class _TritonLogprobs(torch.autograd.Function):
    """Fused forward; backward recomputes logits tile by tile from the saved max, log s and entropy."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, temperature, chunk_size, with_entropy):
        logprobs, entropy, m, log_s = _forward(hidden, weight, targets, temperature, with_entropy)
        ctx.save_for_backward(hidden, weight, targets, m, log_s, entropy if with_entropy else m.new_zeros(0))
        ctx.temperature, ctx.chunk_size = temperature, chunk_size
        ctx.set_materialize_grads(False)
        return logprobs, entropy if with_entropy else m.new_zeros(0)

    @staticmethod
    @once_differentiable
    def backward(ctx, g_lp, g_ent):
        hidden, weight, targets, m, log_s, entropy = ctx.saved_tensors
        want_h, want_w = ctx.needs_input_grad[:2]
        if g_ent is not None and entropy.numel() == 0:
            g_ent = None  # the entropy was not returned, so nothing downstream used it
        if (g_lp is None and g_ent is None) or not (want_h or want_w):
            return None, None, None, None, None, None
        d_hidden, d_weight = _backward(
            hidden, weight, targets, m, log_s, entropy, g_lp, g_ent, ctx.temperature, ctx.chunk_size, want_h, want_w
        )
        return d_hidden, d_weight, None, None, None, None


def token_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    temperature: float = 1.0,
    chunk_size: int = DEFAULT_CHUNK,
    return_entropy: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log_softmax(hidden @ weight^T / temperature) at targets [N] fp32, and entropy [N] fp32 (or None)."""
    check_inputs(hidden, weight, targets, temperature)
    check_chunk(chunk_size)
    if hidden.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"the Triton path takes fp32, bf16 or fp16 inputs, got {hidden.dtype}; use the naive path")
    logprobs, entropy = _TritonLogprobs.apply(
        hidden, weight, targets.long().contiguous(), float(temperature), chunk_size, bool(return_entropy)
    )
    return logprobs, entropy if return_entropy else None
