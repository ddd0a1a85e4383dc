"""Dropless MoE dispatch with Triton kernels: permute copies by expert, grouped SwiGLU experts, weighted un-permute.

Shape legend: N = tokens, k = experts per token, M = N * k token copies, E = experts, D = dim,
F = expert width.

Same functions, signatures and results as naive.py (the dispatch swaps the modules). The kernels live in
triton_rows.py (row movement) and triton_grouped.py (grouped GEMMs). What stays in torch: the stable sort
of expert ids (torch.argsort) and the per-expert histogram (torch.bincount), both single device calls.
No function here reads device values on the host, so a call never waits for the GPU.

Backward: the expert FFN saves only its inputs and recomputes the gate/up projections in one backward
kernel (activation memory of a checkpointed layer); gradients support one backward pass, not double
backward.
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from jointrl.kernels.moe import triton_grouped, triton_rows


class _Permute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, expert_ids: torch.Tensor, n_experts: int):
        k = expert_ids.shape[1]
        flat_ids = expert_ids.reshape(-1)  # [M]
        order = torch.argsort(flat_ids, stable=True)  # [M]
        counts = torch.bincount(flat_ids, minlength=n_experts)  # [E]
        inverse = triton_rows.invert(order)  # [M]
        x_sorted = triton_rows.gather_rows(x.contiguous(), order, k)  # [M, D]
        ctx.save_for_backward(inverse)
        ctx.n_tokens, ctx.k = x.shape[0], k
        ctx.mark_non_differentiable(order, counts)
        return x_sorted, order, counts

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_sorted, _grad_order, _grad_counts):
        (inverse,) = ctx.saved_tensors
        # Each token's gradient is the sum of its k copies' gradients.
        grad_x = triton_rows.combine(grad_sorted.contiguous(), inverse, ctx.n_tokens, ctx.k, None)  # [N, D]
        return grad_x, None, None


class _GroupedSwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x_sorted, counts, gate_proj, up_proj, down_proj):
        x, gate, up, down = (t.contiguous() for t in (x_sorted, gate_proj, up_proj, down_proj))
        hidden = triton_grouped.swiglu_hidden(x, counts, gate, up)  # [M, F]
        # y = h @ down[e]^T: down [E, D, F] read as [F, D] through its strides.
        y = triton_grouped.grouped_matmul(
            hidden, counts, down, (down.stride(0), down.stride(2), down.stride(1)), down.shape[1]
        )  # [M, D]
        ctx.save_for_backward(x, counts, gate, up, down)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y):
        x, counts, gate, up, down = ctx.saved_tensors
        n_experts, width, dim = gate.shape
        dy = grad_y.contiguous().to(x.dtype)  # [M, D]
        hidden, d_gate_pre, d_up_pre = triton_grouped.swiglu_backward(x, dy, counts, gate, up, down)  # [M, F] x3
        grad_x = grad_gate = grad_up = grad_down = None
        if ctx.needs_input_grad[0]:
            # dx = dg @ gate[e] + du @ up[e], both [E, F, D] read as [F, D] in place.
            strides = (gate.stride(0), gate.stride(1), gate.stride(2))
            grad_x = triton_grouped.grouped_matmul(d_gate_pre, counts, gate, strides, dim, d_up_pre, up)  # [M, D]
        if ctx.needs_input_grad[2] or ctx.needs_input_grad[3]:
            grad_gate, grad_up = triton_grouped.group_outer(
                d_gate_pre, x, counts, n_experts, gate.dtype, a2=d_up_pre
            )  # [E, F, D] x2
        if ctx.needs_input_grad[4]:
            grad_down, _ = triton_grouped.group_outer(dy, hidden, counts, n_experts, down.dtype)  # [E, D, F]
        return grad_x, None, grad_gate, grad_up, grad_down


class _UnpermuteCombine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y_sorted, order, weights):
        n, k = weights.shape
        y, w = y_sorted.contiguous(), weights.contiguous()
        inverse = triton_rows.invert(order)  # [M]
        out = triton_rows.combine(y, inverse, n, k, w)  # [N, D]
        ctx.save_for_backward(y, inverse, w)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        y, inverse, w = ctx.saved_tensors
        grad_y, grad_w = triton_rows.combine_backward(grad_out.contiguous(), y, inverse, w)  # [M, D], [N, k]
        return grad_y, None, grad_w


def permute(
    x: torch.Tensor, expert_ids: torch.Tensor, n_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Group token copies by expert: x [N, D], expert_ids [N, k] -> x_sorted [M, D], order [M], counts [E]."""
    if x.dim() != 2 or expert_ids.dim() != 2 or expert_ids.shape[0] != x.shape[0]:
        raise ValueError(
            f"permute expects x [N, D] and expert_ids [N, k]; got {tuple(x.shape)} and {tuple(expert_ids.shape)}"
        )
    return _Permute.apply(x, expert_ids, n_experts)


def grouped_swiglu(
    x_sorted: torch.Tensor,
    counts: torch.Tensor,
    gate_proj: torch.Tensor,
    up_proj: torch.Tensor,
    down_proj: torch.Tensor,
) -> torch.Tensor:
    """SwiGLU of each contiguous expert group: x_sorted [M, D], gate/up [E, F, D], down [E, D, F] -> [M, D]."""
    e, f, d = gate_proj.shape if gate_proj.dim() == 3 else (-1, -1, -1)
    if (
        e < 0 or x_sorted.dim() != 2 or x_sorted.shape[1] != d or up_proj.shape != gate_proj.shape
        or down_proj.shape != (e, d, f) or counts.shape != (e,)
    ):
        raise ValueError(
            "grouped_swiglu expects x_sorted [M, D], counts [E], gate/up [E, F, D], down [E, D, F]; got "
            f"{tuple(x_sorted.shape)}, {tuple(counts.shape)}, {tuple(gate_proj.shape)}, {tuple(up_proj.shape)}, "
            f"{tuple(down_proj.shape)}"
        )
    # Checked on the device, so the host never waits; a mismatch would leave rows unwritten.
    torch._assert_async(counts.sum() == x_sorted.shape[0], "counts must sum to the number of sorted rows")
    return _GroupedSwiGLU.apply(x_sorted, counts, gate_proj, up_proj, down_proj)


def unpermute_combine(y_sorted: torch.Tensor, order: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Weighted top-k sum back in token order: y_sorted [M, D], order [M], weights [N, k] -> [N, D]."""
    m = order.numel()
    if weights.dim() != 2 or y_sorted.dim() != 2 or weights.numel() != m or y_sorted.shape[0] != m:
        raise ValueError(
            "unpermute_combine expects y_sorted [N*k, D], order [N*k], weights [N, k]; got "
            f"{tuple(y_sorted.shape)}, {tuple(order.shape)}, {tuple(weights.shape)}"
        )
    return _UnpermuteCombine.apply(y_sorted, order, weights)
