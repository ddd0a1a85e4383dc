"""Triton KDA: the same `chunk_kda` and `recurrent_kda` as naive.py, Triton forward, recompute backward.

Shape legend: B = batch, T = tokens, H = heads, K = key dim, V = value dim, N = chunks, C = chunk size.

Forward: `chunk_kda` runs the five chunkwise kernels of triton_chunk.py (intra-chunk scores built in
16-row blocks, never a [C, C, K] decay tensor), `recurrent_kda` the fused per-token kernel of
triton_recurrent.py.

Backward (both functions): recompute-based, not a Triton kernel. The forward keeps the fp32 state
entering every chunk (`chunk_kda` saves the [B, H, N, K, V] states its scan already wrote;
`recurrent_kda` reruns the chunk kernels in backward to get them). Walking the chunks from last to
first, autograd runs through naive.py's `chunk_kda` on that one chunk, with the saved entering state as
a leaf, and propagates the state gradient to the previous chunk. Gradients w.r.t. q, k, v, g, beta
and the initial state are therefore exactly those of the ground truth evaluated at the Triton states.
Cost: N small torch graphs in sequence, each holding one chunk's [B, H, C, C, K] decay tensor.
"""
from __future__ import annotations

import torch

from jointrl.kernels import buffers
from jointrl.kernels.kda import naive
# The ground truth's validation, so both paths reject the same inputs with the same messages.
from jointrl.kernels.kda.naive import _check_inputs
from jointrl.kernels.kda.triton_chunk import chunk_forward
from jointrl.kernels.kda.triton_recurrent import recurrent_forward

# Longest chunk the kernels tile: a chunk is one [C, C] register tile per program. The result does not
# depend on the chunk length, so a longer `chunk_size` runs as chunks of this length.
MAX_CHUNK = 64
# Chunk length `recurrent_kda`'s backward recomputes with (the recurrent form has none of its own).
RECURRENT_BACKWARD_CHUNK = 64


def _backward_by_chunks(
    inputs: tuple[torch.Tensor, ...],
    scale: float,
    initial_state: torch.Tensor | None,
    states: torch.Tensor,
    chunk_size: int,
    d_o: torch.Tensor,
    d_final: torch.Tensor | None,
) -> tuple[torch.Tensor, ...]:
    """Gradients of (o, final state) w.r.t. (q, k, v, g, beta, initial state), one chunk at a time, last first."""
    q, k, v, g, beta = inputs
    b, t, h, dk = q.shape
    grads = tuple(buffers.empty_like(x) for x in inputs)  # every chunk writes its own rows
    # [B, H, K, V] gradient of the state leaving the current chunk
    d_state = d_final.float() if d_final is not None else q.new_zeros(b, h, dk, v.shape[-1], dtype=torch.float32)
    for i in reversed(range(states.shape[2])):
        rows = slice(i * chunk_size, min((i + 1) * chunk_size, t))
        leaves = [x[:, rows].detach().requires_grad_() for x in inputs]
        entering = states[:, :, i].detach().requires_grad_()  # [B, H, K, V]
        with torch.enable_grad():
            o, leaving = naive.chunk_kda(*leaves, scale, entering, True, chunk_size)
        *chunk_grads, d_state = torch.autograd.grad((o, leaving), (*leaves, entering), (d_o[:, rows], d_state))
        for grad, chunk_grad in zip(grads, chunk_grads):
            grad[:, rows] = chunk_grad
    d_initial = d_state.to(initial_state.dtype) if initial_state is not None else None
    return (*grads, d_initial)


class _ChunkKDA(torch.autograd.Function):
    """Chunkwise Triton forward; backward through the ground truth chunk by chunk from the saved states."""

    @staticmethod
    def forward(ctx, q, k, v, g, beta, initial_state, scale, chunk_size):
        o, final, states = chunk_forward(q, k, v, g, beta, scale, initial_state, chunk_size)
        ctx.save_for_backward(q, k, v, g, beta, initial_state, states)
        ctx.scale, ctx.chunk_size = scale, chunk_size
        return o, final

    @staticmethod
    def backward(ctx, d_o, d_final):
        q, k, v, g, beta, initial_state, states = ctx.saved_tensors
        grads = _backward_by_chunks(
            (q, k, v, g, beta), ctx.scale, initial_state, states, ctx.chunk_size, d_o, d_final
        )
        return (*grads, None, None)


class _RecurrentKDA(torch.autograd.Function):
    """Fused per-token Triton forward; backward recomputes chunk states with the chunk kernels."""

    @staticmethod
    def forward(ctx, q, k, v, g, beta, initial_state, scale):
        o, final = recurrent_forward(q, k, v, g, beta, scale, initial_state)
        ctx.save_for_backward(q, k, v, g, beta, initial_state)
        ctx.scale = scale
        return o, final

    @staticmethod
    def backward(ctx, d_o, d_final):
        q, k, v, g, beta, initial_state = ctx.saved_tensors
        chunk_size = min(RECURRENT_BACKWARD_CHUNK, q.shape[1])
        _, _, states = chunk_forward(q, k, v, g, beta, ctx.scale, initial_state, chunk_size)
        grads = _backward_by_chunks((q, k, v, g, beta), ctx.scale, initial_state, states, chunk_size, d_o, d_final)
        return (*grads, None)


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
    """Chunkwise KDA with Triton kernels: o [B, T, H, V] in v's dtype and the fp32 final state [B, H, K, V] or None."""
    _check_inputs(q, k, v, g, beta, initial_state)
    if chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size} must be positive")
    o, final = _ChunkKDA.apply(q, k, v, g, beta, initial_state, float(scale), min(int(chunk_size), MAX_CHUNK))
    return o, final if output_final_state else None


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
    """Token-by-token KDA with a fused Triton kernel: o [B, T, H, V] and the fp32 final state or None."""
    _check_inputs(q, k, v, g, beta, initial_state)
    o, final = _RecurrentKDA.apply(q, k, v, g, beta, initial_state, float(scale))
    return o, final if output_final_state else None
