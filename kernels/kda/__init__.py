"""The one dispatch point of the KDA op: Triton on CUDA when present, else the pure-torch ground truth.

JOINTRL_KERNELS=naive|triton forces a path (tests and debugging); unset, CUDA tensors take Triton when
jointrl/kernels/kda/triton.py exists (same two functions) and everything else takes naive.
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from types import ModuleType

import torch

from jointrl.kernels.kda import naive

_PATHS = ("naive", "triton")


@functools.cache
def _triton_ops() -> ModuleType | None:
    """The Triton form, imported on first use; None while it does not exist or triton is not installed."""
    if importlib.util.find_spec("triton") is None or importlib.util.find_spec(f"{__name__}.triton") is None:
        return None
    return importlib.import_module(f"{__name__}.triton")


def _ops(x: torch.Tensor) -> ModuleType:
    forced = os.environ.get("JOINTRL_KERNELS", "")
    if forced and forced not in _PATHS:
        raise ValueError(f"JOINTRL_KERNELS={forced!r}; expected one of {', '.join(_PATHS)}")
    if forced == "naive" or not (forced == "triton" or x.is_cuda):
        return naive
    ops = _triton_ops()
    if ops is None and forced == "triton":
        raise RuntimeError("JOINTRL_KERNELS=triton but the KDA op has no usable Triton form")
    return ops or naive


def chunk_kda(q, k, v, g, beta, scale, initial_state=None, output_final_state=False, chunk_size=64):
    """Chunkwise KDA (training, prefill): q, k, g [B, T, H, K], v [B, T, H, V], beta [B, T, H] -> (o, state)."""
    return _ops(q).chunk_kda(q, k, v, g, beta, scale, initial_state, output_final_state, chunk_size)


def recurrent_kda(q, k, v, g, beta, scale, initial_state=None, output_final_state=False):
    """Step-by-step KDA (decode): same arguments as `chunk_kda` without the chunk size -> (o, state)."""
    return _ops(q).recurrent_kda(q, k, v, g, beta, scale, initial_state, output_final_state)


__all__ = ["chunk_kda", "recurrent_kda"]
