"""The one dispatch point of the sparse-attention ops: Triton on CUDA when present, else the pure-torch ground truth.

Selection rules (and the JOINTRL_KERNELS override) are in jointrl/kernels/dispatch.py; shapes and
semantics are documented in naive.py.
"""
from __future__ import annotations

import torch

from jointrl.kernels.dispatch import select_ops
from jointrl.kernels.sparse_attn import naive
from jointrl.kernels.sparse_attn.naive import candidate_mask


def indexer_scores(q, weights, k, indices=None):
    """Indexer scores: q [B, T, Hi, I], weights [B, T, Hi], k [B, S, I] -> [B, T, S], or [B, T, K] at indices."""
    return select_ops(__name__, naive, q).indexer_scores(q, weights, k, indices)


def indexer_topk(q, weights, k, k_valid, start, topk):
    """Best `topk` causal, valid slots per query, -1 padded: -> [B, T, topk] int64."""
    return select_ops(__name__, naive, q).indexer_topk(q, weights, k, k_valid, start, topk)


def sparse_mla_attention(q, kv, indices, scale, v_dim):
    """Attention of q [B, T, H, E] over the listed slots of kv [B, S, E]: -> [B, T, H, v_dim]."""
    return select_ops(__name__, naive, q).sparse_mla_attention(q, kv, indices, scale, v_dim)


def attention_mass(q, kv, indices, scale):
    """Head-summed, renormalised attention probabilities at the listed slots: -> [B, T, K] (no grad)."""
    return select_ops(__name__, naive, q).attention_mass(q, kv, indices, scale)


__all__ = ["attention_mass", "candidate_mask", "indexer_scores", "indexer_topk", "sparse_mla_attention"]
