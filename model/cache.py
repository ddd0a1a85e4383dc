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
        """Write T new slots after `length` (growing the capacity when needed); return the slice written."""
        t = kv_latent.shape[1]
        end = self.length + t
        if end > self.kv_latent.shape[1]:
            # Doubling keeps the cost of growth amortised O(1) per token.
            self._resize(max(end, 2 * self.kv_latent.shape[1]))
        written = slice(self.length, end)
        self.kv_latent[:, written] = kv_latent
        self.k_rope[:, written] = k_rope
        self.valid[:, written] = valid
        if self.index_keys is not None:
            assert index_keys is not None, "a DSA cache needs index keys on every append"
            self.index_keys[:, written] = index_keys
        self.length = end
        return written

    def _resize(self, capacity: int) -> None:
        def fit(x: torch.Tensor) -> torch.Tensor:
            out = x.new_zeros((x.shape[0], capacity, *x.shape[2:]))
            n = min(self.length, capacity)
            out[:, :n] = x[:, :n]
            return out

        self.kv_latent, self.k_rope, self.valid = fit(self.kv_latent), fit(self.k_rope), fit(self.valid)
        if self.index_keys is not None:
            self.index_keys = fit(self.index_keys)

    def pack_rows(self) -> None:
        """Move each row's real slots to the front, in order, and shrink `length` to the longest row."""
        filled = self.valid[:, : self.length]  # [B, S]
        # A stable sort on "is padding" keeps real slots in their original order.
        order = (~filled).long().argsort(dim=1, stable=True)  # [B, S]
        for name in ("kv_latent", "k_rope", "valid", "index_keys"):
            x = getattr(self, name)
            if x is not None:
                index = order.reshape(*order.shape, *([1] * (x.dim() - 2))).expand(-1, -1, *x.shape[2:])
                x[:, : self.length] = x[:, : self.length].gather(1, index)
        new_length = int(filled.sum(dim=1).max()) if filled.numel() else 0
        self.valid[:, new_length : self.length] = False
        self.length = new_length


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

    def reset_rows(self, rows: list[int]) -> None:
        """Forget everything rows have seen, so a new sequence can start there (continuous batching)."""
        if not rows:
            return
        index = torch.tensor(rows, device=self.n_valid.device)
        for layer in self.layers:
            if isinstance(layer, KDAState):
                layer.recurrent[index] = 0
                layer.conv[index] = 0
            else:
                layer.valid[index] = False
        self.n_valid[index] = 0

    def take_rows(self, rows: list[int]) -> ModelCache:
        """A copy of some rows' state, their attention slots packed to the front: a forward over only these rows
        runs on it, and `put_rows` writes the result back."""
        index = torch.tensor(rows, device=self.n_valid.device)
        layers: list[KDAState | AttnCache] = []
        for layer in self.layers:
            if isinstance(layer, KDAState):
                layers.append(KDAState(recurrent=layer.recurrent[index], conv=layer.conv[index]))
                continue
            seen = slice(0, layer.length)
            part = AttnCache(
                kv_latent=layer.kv_latent[index, seen], k_rope=layer.k_rope[index, seen],
                index_keys=None if layer.index_keys is None else layer.index_keys[index, seen],
                valid=layer.valid[index, seen], length=layer.length,
            )
            part.pack_rows()
            layers.append(part)
        taken = ModelCache(layers, n_valid=self.n_valid[index])
        taken.length = next((layer.length for layer in layers if isinstance(layer, AttnCache)), 0)
        return taken

    def put_rows(self, rows: list[int], part: ModelCache, sources: list[int]) -> None:
        """Replace the state of each of `rows` by row `sources[j]` of `part` (a `take_rows` copy, run further).

        A row's slots keep their order and land in the last columns, so every later append follows them.
        """
        dst = torch.tensor(rows, device=self.n_valid.device)
        src = torch.tensor(sources, device=self.n_valid.device)
        for layer, piece in zip(self.layers, part.layers):
            if isinstance(layer, KDAState):
                # index_select, not indexing: a source copied to several rows sums their gradients in training
                # (shared openings), and indexing's backward sums them in a thread-dependent order on CPU.
                layer.recurrent[dst] = piece.recurrent.index_select(0, src)
                layer.conv[dst] = piece.conv.index_select(0, src)
                continue
            m = piece.length
            if m > layer.length:
                if m > layer.kv_latent.shape[1]:
                    layer._resize(max(m, 2 * layer.kv_latent.shape[1]))
                layer.valid[:, layer.length : m] = False  # the new columns are padding for every other row
                layer.length = m
            end = layer.length
            layer.valid[dst] = False
            for name in ("kv_latent", "k_rope", "valid", "index_keys"):
                target = getattr(layer, name)
                if target is not None:
                    target[dst, end - m : end] = getattr(piece, name)[:, :m].index_select(0, src)
        self.n_valid[dst] = part.n_valid[src]
        self.length = next((layer.length for layer in self.layers if isinstance(layer, AttnCache)), self.length)

    def compact(self) -> int:
        """Pack every row's real slots to the front so padding stops costing attention; return slots freed.

        Attention only ever reads a row's own real slots (positions come from `n_valid`), so repacking
        changes no output. Slot indices recorded before a compaction (DSA selections) refer to the old
        layout: convert them to per-row token indices first (`row_token_index`).
        """
        attn = [layer for layer in self.layers if isinstance(layer, AttnCache)]
        if not attn:
            return 0
        before = attn[0].length
        for layer in attn:
            layer.pack_rows()
        self.length = attn[0].length
        return before - self.length

    def row_token_index(self) -> torch.Tensor | None:
        """[B, S]: for each filled slot, the index of its token among its row's real tokens (-1 on padding)."""
        attn = next((layer for layer in self.layers if isinstance(layer, AttnCache)), None)
        if attn is None:
            return None
        valid = attn.valid[:, : attn.length]
        return torch.where(valid, valid.long().cumsum(dim=1) - 1, torch.full_like(valid, -1, dtype=torch.long))
