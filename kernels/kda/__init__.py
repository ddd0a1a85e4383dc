"""The one dispatch point of the KDA op: Triton on CUDA when present, else the pure-torch ground truth.

Selection rules (and the JOINTRL_KERNELS override) are in jointrl/kernels/dispatch.py.
"""
from __future__ import annotations

from jointrl.kernels.dispatch import select_ops
from jointrl.kernels.kda import naive


def chunk_kda(q, k, v, g, beta, scale, initial_state=None, output_final_state=False, chunk_size=64):
    """Chunkwise KDA (training, prefill): q, k, g [B, T, H, K], v [B, T, H, V], beta [B, T, H] -> (o, state)."""
    return select_ops(__name__, naive, q).chunk_kda(q, k, v, g, beta, scale, initial_state, output_final_state, chunk_size)


def recurrent_kda(q, k, v, g, beta, scale, initial_state=None, output_final_state=False):
    """Step-by-step KDA (decode): same arguments as `chunk_kda` without the chunk size -> (o, state)."""
    return select_ops(__name__, naive, q).recurrent_kda(q, k, v, g, beta, scale, initial_state, output_final_state)


__all__ = ["chunk_kda", "recurrent_kda"]
