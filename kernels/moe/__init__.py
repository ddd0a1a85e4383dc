"""The one dispatch point of the MoE dispatch ops: Triton on CUDA when present, else the pure-torch ground truth.

JOINTRL_KERNELS=naive|triton forces a path (tests and debugging); unset, CUDA tensors take Triton when it
exists and everything else takes naive. Only the naive path exists so far.
"""
from __future__ import annotations

import os
from types import ModuleType

import torch

from jointrl.kernels.moe import naive

# A Triton form lands as jointrl/kernels/moe/triton.py with the same three functions.
_TRITON: ModuleType | None = None
_PATHS = ("naive", "triton")


def _ops(x: torch.Tensor) -> ModuleType:
    forced = os.environ.get("JOINTRL_KERNELS", "")
    if forced and forced not in _PATHS:
        raise ValueError(f"JOINTRL_KERNELS={forced!r}; expected one of {', '.join(_PATHS)}")
    if forced == "triton" and _TRITON is None:
        raise RuntimeError("JOINTRL_KERNELS=triton but the MoE ops have no Triton form yet")
    if forced == "triton" or (not forced and x.is_cuda and _TRITON is not None):
        return _TRITON  # type: ignore[return-value]
    return naive


def permute(
    x: torch.Tensor, expert_ids: torch.Tensor, n_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Group token copies by expert: x [N, D], expert_ids [N, k] -> x_sorted [N*k, D], order [N*k], counts [E]."""
    return _ops(x).permute(x, expert_ids, n_experts)


def grouped_swiglu(
    x_sorted: torch.Tensor,
    counts: torch.Tensor,
    gate_proj: torch.Tensor,
    up_proj: torch.Tensor,
    down_proj: torch.Tensor,
) -> torch.Tensor:
    """SwiGLU of each contiguous expert group: x_sorted [M, D], gate/up [E, F, D], down [E, D, F] -> [M, D]."""
    return _ops(x_sorted).grouped_swiglu(x_sorted, counts, gate_proj, up_proj, down_proj)


def unpermute_combine(y_sorted: torch.Tensor, order: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Weighted top-k sum back in token order: y_sorted [N*k, D], order [N*k], weights [N, k] -> [N, D]."""
    return _ops(y_sorted).unpermute_combine(y_sorted, order, weights)


__all__ = ["permute", "grouped_swiglu", "unpermute_combine"]
