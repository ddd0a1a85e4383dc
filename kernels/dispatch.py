"""Picks an op's implementation: its Triton module for CUDA tensors when it imports, else its naive module.

Every op package (`kernels/<op>/`) holds `naive.py` and, once written, `triton.py` with the same
functions; its `__init__.py` calls `select_ops` once per call. JOINTRL_KERNELS=naive|triton forces a
path (tests and debugging); forcing triton where it cannot be imported is an error, never a silent fallback.
"""
from __future__ import annotations

import functools
import importlib
import os
from types import ModuleType

import torch

PATHS = ("naive", "triton")


@functools.cache
def _triton_module(package: str) -> tuple[ModuleType | None, str]:
    """`<package>.triton` imported on first use, or None and the reason it cannot be."""
    try:
        return importlib.import_module(f"{package}.triton"), ""
    except ImportError as err:
        return None, str(err)


def forced_path() -> str:
    """The path JOINTRL_KERNELS forces, or '' when unset."""
    forced = os.environ.get("JOINTRL_KERNELS", "")
    if forced and forced not in PATHS:
        raise ValueError(f"JOINTRL_KERNELS={forced!r}; expected one of {', '.join(PATHS)}")
    return forced


def select_ops(package: str, naive: ModuleType, x: torch.Tensor) -> ModuleType:
    """The module whose functions run on tensors like `x`."""
    forced = forced_path()
    if forced == "naive" or (not forced and not x.is_cuda):
        return naive
    ops, why = _triton_module(package)
    if ops is None:
        if forced == "triton":
            raise RuntimeError(f"JOINTRL_KERNELS=triton but {package} has no Triton form usable here: {why}")
        return naive
    return ops
