"""Rotary position embedding, in both layouts the model uses (interleaved pairs and split halves)."""
from __future__ import annotations

import torch


def rope_angles(positions: torch.Tensor, dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles for integer positions; each [*positions.shape, dim // 2]."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32) / dim))
    angles = positions.to(torch.float32)[..., None] * inv_freq
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, positions: torch.Tensor, theta: float, interleaved: bool) -> torch.Tensor:
    """Rotate the last dim of x [B, T, ..., R] by positions [B, T].

    interleaved=True rotates pairs (x0, x1), (x2, x3), … (DeepSeek latent attention); False rotates
    (x_i, x_{i+R/2}) (the indexer's non-interleaved layout).
    """
    dim = x.shape[-1]
    if dim == 0:
        return x
    cos, sin = rope_angles(positions, dim, theta)  # [B, T, R/2]
    # Broadcast over any head dims between T and R.
    for _ in range(x.dim() - 3):
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    xf = x.float()
    if interleaved:
        a, b = xf[..., 0::2], xf[..., 1::2]
        out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    else:
        a, b = xf[..., : dim // 2], xf[..., dim // 2 :]
        out = torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return out.to(x.dtype)
