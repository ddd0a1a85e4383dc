"""The dense SwiGLU feed-forward block, used by the first dense layers and as the MoE shared expert.

Shape legend: D = dim, H = hidden width.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)) with bias-free projections."""

    def __init__(self, dim: int, hidden: int, init_std: float = 0.02):
        super().__init__()
        if dim <= 0 or hidden <= 0:
            raise ValueError(f"SwiGLU needs positive sizes, got dim={dim}, hidden={hidden}")
        self.init_std = init_std
        self.gate_proj = nn.Linear(dim, hidden, bias=False)  # [H, D]
        self.up_proj = nn.Linear(dim, hidden, bias=False)  # [H, D]
        self.down_proj = nn.Linear(hidden, dim, bias=False)  # [D, H]
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Normal(0, init_std) init of the three projections."""
        for proj in (self.gate_proj, self.up_proj, self.down_proj):
            nn.init.normal_(proj.weight, mean=0.0, std=self.init_std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[..., D] -> [..., D]."""
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
