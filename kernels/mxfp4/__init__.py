"""The one dispatch point of the MXFP4 matmul: Triton on CUDA when importable, else the pure-torch ground truth.

Selection rules (and the JOINTRL_KERNELS override) are in jointrl/kernels/dispatch.py. Decoding
(dequantize_mxfp4) is the format's definition, so it is exported from the naive path only.
"""
from __future__ import annotations

import torch

from jointrl.kernels.dispatch import select_ops
from jointrl.kernels.mxfp4 import naive
from jointrl.kernels.mxfp4.naive import (
    BLOCK_SIZE,
    E2M1_VALUES,
    SCALE_BIAS,
    check_matmul,
    check_mxfp4,
    dequantize_mxfp4,
    e8m0_to_float,
    unpack_nibbles,
)


def mxfp4_matmul(
    x: torch.Tensor, blocks: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x [..., K] @ dequantize_mxfp4(blocks [N, K/32, 16], scales [N, K/32]).T (+ bias [N]) -> [..., N]."""
    return select_ops(__name__, naive, x).mxfp4_matmul(x, blocks, scales, bias)


def mxfp4_grouped_matmul(
    x_sorted: torch.Tensor,
    counts: torch.Tensor,
    blocks: torch.Tensor,
    scales: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rows of x_sorted [M, K] grouped by counts [E], each times its expert's weight [E, N, B, 16] -> [M, N]."""
    return select_ops(__name__, naive, x_sorted).mxfp4_grouped_matmul(x_sorted, counts, blocks, scales, bias)


__all__ = [
    "BLOCK_SIZE",
    "E2M1_VALUES",
    "SCALE_BIAS",
    "check_matmul",
    "check_mxfp4",
    "dequantize_mxfp4",
    "e8m0_to_float",
    "mxfp4_grouped_matmul",
    "mxfp4_matmul",
    "unpack_nibbles",
]
