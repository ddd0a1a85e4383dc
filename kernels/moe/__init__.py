"""The one dispatch point of the MoE dispatch ops: Triton on CUDA when present, else the pure-torch ground truth.

Selection rules (and the JOINTRL_KERNELS override) are in jointrl/kernels/dispatch.py.
"""
from __future__ import annotations

import torch

from jointrl.kernels.dispatch import select_ops
from jointrl.kernels.moe import naive


def permute(
    x: torch.Tensor, expert_ids: torch.Tensor, n_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Group token copies by expert: x [N, D], expert_ids [N, k] -> x_sorted [N*k, D], order [N*k], counts [E]."""
    return select_ops(__name__, naive, x).permute(x, expert_ids, n_experts)


def grouped_swiglu(
    x_sorted: torch.Tensor,
    counts: torch.Tensor,
    gate_proj: torch.Tensor,
    up_proj: torch.Tensor,
    down_proj: torch.Tensor,
) -> torch.Tensor:
    """SwiGLU of each contiguous expert group: x_sorted [M, D], gate/up [E, F, D], down [E, D, F] -> [M, D]."""
    return select_ops(__name__, naive, x_sorted).grouped_swiglu(x_sorted, counts, gate_proj, up_proj, down_proj)


def unpermute_combine(y_sorted: torch.Tensor, order: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Weighted top-k sum back in token order: y_sorted [N*k, D], order [N*k], weights [N, k] -> [N, D]."""
    return select_ops(__name__, naive, y_sorted).unpermute_combine(y_sorted, order, weights)


__all__ = ["permute", "grouped_swiglu", "unpermute_combine"]
