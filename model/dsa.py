"""Gated dynamic sparse attention (DSA): gated MLA whose queries attend only the slots a lightning indexer picks.

Shape legend: B = batch rows, T = new tokens this call, S = key slots (see mla.py), D = model dim,
H = heads, V = per-head value dim, C = KV latent width, R = rotary dims, Hi = indexer heads,
I = indexer dim, k = cfg.index_topk selected slots per query.

Attention runs in the absorbed (MQA) form over the shared latent, as DeepSeek-V3.2 does, so each
selected slot is read once for all heads. The indexer trains only from aux["indexer_loss"] (top-k is
not differentiable); `indexer_stage` follows the DeepSeek-V3.2 schedule:
  dense  (warm-up): attention is dense; the loss matches the indexer to the main attention over every
         causal candidate.
  sparse (default): attention covers the selected slots only; the loss is taken over that set, and the
         indexer reads detached inputs so this loss trains the indexer alone.
"""
from __future__ import annotations

from typing import Literal

import torch

from jointrl.kernels.sparse_attn import (
    attention_mass,
    candidate_mask,
    indexer_scores,
    indexer_topk,
    sparse_mla_attention,
)
from jointrl.model.cache import AttnCache
from jointrl.model.config import ModelConfig
from jointrl.model.indexer import LightningIndexer, indexer_loss
from jointrl.model.mla import GatedMLA

IndexerStage = Literal["dense", "sparse"]


class GatedDSA(GatedMLA):
    """One DSA layer: `y, aux = layer(x, positions, valid, cache=None, topk_indices=None)`.

    aux["topk_indices"] [B, T, k] (slot numbers, best first, -1 padded) is always returned; passing it
    back as topk_indices replays that selection bit for bit. aux["indexer_loss"] is a scalar, computed
    while autograd is on and 0 otherwise (generation has no use for it).
    """

    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__(cfg, layer_idx)
        self.topk = cfg.index_topk
        self.indexer = LightningIndexer(cfg)
        self._stage: IndexerStage = "sparse"

    @property
    def indexer_stage(self) -> IndexerStage:
        """'dense' for the indexer warm-up, 'sparse' for sparse training and inference."""
        return self._stage

    @indexer_stage.setter
    def indexer_stage(self, stage: str) -> None:
        if stage not in ("dense", "sparse"):
            raise ValueError(f"indexer_stage={stage!r}; expected 'dense' or 'sparse'")
        self._stage = stage  # type: ignore[assignment]

    def _check_selection(self, indices: torch.Tensor, valid_slots: torch.Tensor, start: int) -> torch.Tensor:
        """A replayed selection [B, T, K] as int64, after checking it only names visible slots."""
        if indices.dim() != 3 or indices.is_floating_point():
            raise ValueError(f"topk_indices {tuple(indices.shape)} {indices.dtype} must be integer [B, T, K]")
        indices = indices.long()
        t, s = indices.shape[1], valid_slots.shape[1]
        allowed = candidate_mask(valid_slots, start, t)  # [B, T, S]
        listed = indices >= 0
        in_range = (indices >= -1) & (indices < s)
        seen = allowed.gather(-1, indices.clamp(0, s - 1)) | ~listed
        if not bool((in_range & seen).all()):
            raise ValueError(f"topk_indices name slots outside each query's causal, valid candidates (of 0..{s - 1})")
        return indices

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        valid: torch.Tensor,
        cache: AttnCache | None = None,
        topk_indices: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict]:
        """x [B, T, D] -> (y [B, T, D], {"topk_indices": [B, T, k], "indexer_loss": scalar})."""
        self.check_inputs(x, positions, valid)
        if topk_indices is not None and topk_indices.shape[:2] != x.shape[:2]:
            raise ValueError(f"topk_indices {tuple(topk_indices.shape)} must start with [B, T] = {tuple(x.shape[:2])}")
        sparse = self._stage == "sparse"
        q_nope, q_rope, q_latent = self.project_q(x, positions)
        latent, k_rope = self.project_kv(x, positions)
        # Sparse stage: the indexer's loss must not reach the main model, so its inputs leave the graph here.
        x_index, q_index = (x.detach(), q_latent.detach()) if sparse else (x, q_latent)
        index_q, index_w = self.indexer.queries(q_index, x_index, positions)  # [B, T, Hi, I], [B, T, Hi]
        index_k = self.indexer.keys(x_index, positions)  # [B, T, I]
        start, latent, k_rope, k_valid, index_k = self.extend(cache, latent, k_rope, valid, index_k)

        if topk_indices is None:
            topk_indices = indexer_topk(index_q, index_w, index_k, k_valid, start, self.topk)
        else:
            topk_indices = self._check_selection(topk_indices, k_valid, start)

        q = self.absorb_query(q_nope, q_rope)  # [B, T, H, C + R]
        kv = torch.cat([latent, k_rope], dim=-1)  # [B, S, C + R]
        if sparse:
            o_latent = sparse_mla_attention(q, kv, topk_indices, self.scale, self.latent_dim)
            o = self.latent_to_value(o_latent)  # [B, T, H, V]
        else:
            o = self.dense_attention(q_nope, q_rope, latent, k_rope, k_valid, start, absorb=cache is not None)

        loss = x.new_zeros((), dtype=torch.float32)
        if torch.is_grad_enabled():
            if sparse:
                slots = topk_indices
                logits = indexer_scores(index_q, index_w, index_k, slots)  # [B, T, k]
            else:
                allowed = candidate_mask(k_valid, start, x.shape[1])  # [B, T, S]
                slot_ids = torch.arange(kv.shape[1], device=x.device).expand_as(allowed)
                slots = torch.where(allowed, slot_ids, -1)
                logits = indexer_scores(index_q, index_w, index_k).masked_fill(~allowed, float("-inf"))
            target = attention_mass(q.detach(), kv.detach(), slots, self.scale)
            loss = indexer_loss(target, logits, valid)
        return self.output(x, o), {"topk_indices": topk_indices, "indexer_loss": loss}
