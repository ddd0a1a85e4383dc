"""Per-layer inference state: latent KV (+ index keys) for attention layers, recurrent + conv state for KDA.

Shape legend: B = batch rows, S = cache capacity (slots), H = heads, K/V = key/value head dims,
C = latent width, R = rotary dims, I = indexer key dim, W = short-conv window (kernel - 1).

Slot j of an attention cache holds the token at column j of the (left-padded) sequence the model has
seen so far, so sparse-attention indices mean the same thing with and without a cache. Rows of
different prompt lengths are left-padded; `valid` marks real tokens and padded slots are never attended.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from jointrl.model.config import ModelConfig


@dataclass
class KDAState:
    """Recurrent state of one delta-attention layer; O(1) in the context length."""

    recurrent: torch.Tensor  # [B, H, K, V] fp32, S_t of the delta rule
    conv: torch.Tensor  # [B, W, 3*H*K] last W pre-conv inputs of q, k, v (concatenated channels)


@dataclass
class AttnCache:
    """Compressed KV of one latent-attention layer (and its indexer keys in a DSA layer)."""

    kv_latent: torch.Tensor  # [B, S, C] normalised KV latent
    k_rope: torch.Tensor  # [B, S, R] decoupled rotary key, already rotated (R may be 0)
    index_keys: torch.Tensor | None  # [B, S, I] indexer keys, already rotated; None outside DSA layers
    valid: torch.Tensor  # [B, S] bool, True where a real token was written
    length: int = 0  # slots filled so far (the same for every row)

    def append(self, kv_latent, k_rope, valid, index_keys=None) -> slice:
        """Write T new slots after `length`; return the slice written."""
        t = kv_latent.shape[1]
        end = self.length + t
        if end > self.kv_latent.shape[1]:
            raise ValueError(f"cache overflow: {end} tokens exceed its capacity of {self.kv_latent.shape[1]}")
        written = slice(self.length, end)
        self.kv_latent[:, written] = kv_latent
        self.k_rope[:, written] = k_rope
        self.valid[:, written] = valid
        if self.index_keys is not None:
            assert index_keys is not None, "a DSA cache needs index keys on every append"
            self.index_keys[:, written] = index_keys
        self.length = end
        return written


class ModelCache:
    """One state object per layer, allocated for a batch and a capacity."""

    def __init__(self, layers: list[KDAState | AttnCache], n_valid: torch.Tensor):
        self.layers = layers
        # Real (non-padding) tokens seen per row [B]: the rotary position of each row's next token.
        self.n_valid = n_valid
        # Columns seen so far, padding included; the model advances it after each forward.
        self.length = 0

    @classmethod
    def allocate(cls, cfg: ModelConfig, batch: int, capacity: int, device=None, dtype=torch.float32) -> "ModelCache":
        """Zero state for every layer of `cfg`: `capacity` slots for attention layers."""
        layers: list[KDAState | AttnCache] = []
        for kind in cfg.layer_pattern:
            if kind == "K":
                h, k = cfg.kda_heads, cfg.kda_head_dim
                layers.append(
                    KDAState(
                        recurrent=torch.zeros(batch, h, k, k, device=device, dtype=torch.float32),
                        conv=torch.zeros(batch, cfg.kda_conv_size - 1, 3 * h * k, device=device, dtype=dtype),
                    )
                )
            else:
                index_keys = None
                if kind == "S":
                    index_keys = torch.zeros(batch, capacity, cfg.index_head_dim, device=device, dtype=dtype)
                layers.append(
                    AttnCache(
                        kv_latent=torch.zeros(batch, capacity, cfg.kv_lora_rank, device=device, dtype=dtype),
                        k_rope=torch.zeros(batch, capacity, cfg.qk_rope_dim, device=device, dtype=dtype),
                        index_keys=index_keys,
                        valid=torch.zeros(batch, capacity, device=device, dtype=torch.bool),
                    )
                )
        return cls(layers, n_valid=torch.zeros(batch, dtype=torch.long, device=device))

    def __len__(self) -> int:
        return len(self.layers)
