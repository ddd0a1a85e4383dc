"""The one dispatch point of the MXFP4 matmul: Triton on CUDA when importable, else the pure-torch ground truth.

JOINTRL_KERNELS=naive|triton forces a path (tests and debugging); unset, CUDA tensors take Triton when
jointrl/kernels/mxfp4/triton.py exists and imports, and everything else takes naive. Decoding
(dequantize_mxfp4) is the format's definition, so it is exported from the naive path only.
"""
from __future__ import annotations

import importlib
import os
from functools import lru_cache
from types import ModuleType

import torch

from jointrl.kernels.mxfp4 import naive
from jointrl.kernels.mxfp4.naive import (
    BLOCK_SIZE,
    E2M1_VALUES,
    SCALE_BIAS,
    check_mxfp4,
    dequantize_mxfp4,
    e8m0_to_float,
    unpack_nibbles,
)

_PATHS = ("naive", "triton")


@lru_cache(maxsize=1)
def _triton() -> tuple[ModuleType | None, str]:
    """The Triton form (same functions as naive.py) and, when it cannot be imported, why."""
    try:
        return importlib.import_module(f"{__name__}.triton"), ""
    except ImportError as err:
        return None, str(err)


def _ops(x: torch.Tensor) -> ModuleType:
    forced = os.environ.get("JOINTRL_KERNELS", "")
    if forced and forced not in _PATHS:
        raise ValueError(f"JOINTRL_KERNELS={forced!r}; expected one of {', '.join(_PATHS)}")
    if forced == "naive":
        return naive
    triton_ops, why = _triton()
    if forced == "triton" and triton_ops is None:
        raise RuntimeError(f"JOINTRL_KERNELS=triton but the MXFP4 Triton kernel cannot be imported: {why}")
    if triton_ops is not None and (forced == "triton" or x.is_cuda):
        return triton_ops
    return naive


def mxfp4_matmul(
    x: torch.Tensor, blocks: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x [..., K] @ dequantize_mxfp4(blocks [N, K/32, 16], scales [N, K/32]).T (+ bias [N]) -> [..., N]."""
    return _ops(x).mxfp4_matmul(x, blocks, scales, bias)


__all__ = [
    "BLOCK_SIZE",
    "E2M1_VALUES",
    "SCALE_BIAS",
    "check_mxfp4",
    "dequantize_mxfp4",
    "e8m0_to_float",
    "mxfp4_matmul",
    "unpack_nibbles",
]
