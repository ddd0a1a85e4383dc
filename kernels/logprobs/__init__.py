"""The one dispatch point of the fused log-prob/entropy op: Triton on CUDA when present, else the chunked torch form.

Selection rules (and the JOINTRL_KERNELS override) are in jointrl/kernels/dispatch.py; the maths and the
shapes are documented in naive.py.
"""
from __future__ import annotations

from jointrl.kernels.dispatch import select_ops
from jointrl.kernels.logprobs import naive
from jointrl.kernels.logprobs.naive import DEFAULT_CHUNK, full_logprobs


def token_logprobs(hidden, weight, targets, temperature=1.0, chunk_size=DEFAULT_CHUNK, return_entropy=True):
    """fp32 log-probs of targets [N] and entropies [N] (or None) under softmax(hidden @ weight^T / temperature)."""
    ops = select_ops(__name__, naive, hidden)
    return ops.token_logprobs(hidden, weight, targets, temperature, chunk_size, return_entropy)


__all__ = ["DEFAULT_CHUNK", "full_logprobs", "token_logprobs"]
