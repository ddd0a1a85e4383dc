"""Output buffers for kernels: uninitialised normally, NaN-filled under JOINTRL_POISON_OUTPUTS=1 (tests).

A kernel that forgets to write an element then fails its comparison against the naive path instead of
passing on whatever the allocator left there.
"""
from __future__ import annotations

import os

import torch


def empty(*shape: int, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """torch.empty, or a NaN-filled tensor when outputs are poisoned (integer dtypes get their minimum)."""
    if os.environ.get("JOINTRL_POISON_OUTPUTS") != "1":
        return torch.empty(*shape, dtype=dtype, device=device)
    fill = float("nan") if dtype.is_floating_point else torch.iinfo(dtype).min
    return torch.full(shape, fill, dtype=dtype, device=device)


def empty_like(x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """`empty` with x's shape, device and (unless given) dtype."""
    return empty(*x.shape, dtype=dtype or x.dtype, device=x.device)
