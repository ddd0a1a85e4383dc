"""The policy network: embedding, a stack of hybrid-attention + FFN/MoE blocks, final norm and LM head.

Shape legend: B = batch rows, T = new tokens this call, D = dim, V = vocab, L = MoE layers,
k = routed experts per token, S = DSA layers, k_s = selected past tokens per query.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from jointrl.model.cache import ModelCache
from jointrl.model.config import ModelConfig
from jointrl.model.dsa import GatedDSA
from jointrl.model.ffn import SwiGLU
from jointrl.model.kda import KDAttention
from jointrl.model.mla import GatedMLA
from jointrl.model.moe import MoE

ATTENTION_CLASSES = {"K": KDAttention, "S": GatedDSA, "L": GatedMLA}


@dataclass
class ModelOutput:
    """What one forward returns; routing fields are what rollout records for replay."""

    logits: torch.Tensor | None  # [B, T, V] fp32, None when return_logits=False
    hidden: torch.Tensor  # [B, T, D] after the final norm (input of the LM head)
    routing: torch.Tensor | None  # [B, T, L, k] routed expert ids per MoE layer, None without MoE layers
    sparse_topk: torch.Tensor | None  # [B, T, S, k_s] DSA slot selections (-1 = none), None without DSA
    expert_load: torch.Tensor | None  # [L, E] valid tokens routed to each expert
    aux_loss: torch.Tensor  # scalar: balance losses + indexer losses (0 when both are off)


class Block(nn.Module):
    """Pre-norm residual block: attention of the layer's kind, then a dense or MoE FFN."""

    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__()
        self.kind = cfg.layer_kind(layer_idx)
        self.is_moe = cfg.is_moe(layer_idx)
        self.attn_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.attn = ATTENTION_CLASSES[self.kind](cfg, layer_idx)
        self.ffn_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.ffn = MoE(cfg, layer_idx) if self.is_moe else SwiGLU(cfg.dim, cfg.dense_hidden)

    def forward(self, x, positions, valid, cache=None, routing=None, topk_indices=None):
        """One block; returns the new residual stream and the block's aux dict."""
        extra = {"topk_indices": topk_indices} if self.kind == "S" else {}
        h, aux = self.attn(self.attn_norm(x), positions, valid, cache=cache, **extra)
        x = x + h
        if self.is_moe:
            f, ffn_aux = self.ffn(self.ffn_norm(x), valid=valid, routing=routing)
            aux = {**aux, **ffn_aux}
        else:
            f = self.ffn(self.ffn_norm(x))
        return x + f, aux


class Transformer(nn.Module):
    """The sparse MoE policy with hybrid delta / sparse / latent attention."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        # Recompute each block's activations in backward instead of keeping them (training without a cache).
        self.activation_checkpointing = False
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.weight
        self._init_weights()

    def _init_weights(self) -> None:
        # Layers initialise their own special parameters (decay gates, biases); only the plain
        # embedding and head are set here, so a meta-device build stays cheap.
        nn.init.normal_(self.embed.weight, std=self.cfg.init_std)
        if not self.cfg.tie_embeddings:
            nn.init.normal_(self.lm_head.weight, std=self.cfg.init_std)

    @property
    def moe_layers(self) -> list[int]:
        return [i for i, block in enumerate(self.layers) if block.is_moe]

    @property
    def dsa_layers(self) -> list[int]:
        return [i for i, block in enumerate(self.layers) if block.kind == "S"]

    def forward(
        self,
        tokens: torch.Tensor,
        valid: torch.Tensor | None = None,
        cache: ModelCache | None = None,
        routing: torch.Tensor | None = None,
        sparse_topk: torch.Tensor | None = None,
        return_logits: bool = True,
    ) -> ModelOutput:
        """Run T new tokens [B, T]; with a cache they continue what the cache has seen.

        valid [B, T] marks real tokens (False = left padding). routing [B, T, L, k] and sparse_topk
        [B, T, S, k_s] replay the experts and DSA selections recorded at rollout.
        """
        # Non-reentrant checkpointing replays the block with the same routing and selections it returned.
        recompute = partial(checkpoint, use_reentrant=False) if self.activation_checkpointing and self.training else None
        out = backbone(self.layers, self.norm, self.embed(tokens), valid, cache, routing, sparse_topk, checkpoint_fn=recompute)
        if return_logits:
            out.logits = self.head(out.hidden)
        return out

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """fp32 logits [..., V] of final hidden states [..., D]: callers that need a few positions' logits skip the
        rest."""
        return self.lm_head(hidden).float()

    def update_router_biases(self, expert_load: torch.Tensor) -> None:
        """Aux-loss-free balancing: nudge each MoE layer's selection bias from its load [L, E]."""
        for load, i in zip(expert_load, self.moe_layers):
            self.layers[i].ffn.update_router_bias(load)

    def allocate_cache(self, batch: int, capacity: int) -> ModelCache:
        """Fresh inference state for `batch` rows and `capacity` columns, on the model's device."""
        p = self.embed.weight
        return ModelCache.allocate(self.cfg, batch, capacity, device=p.device, dtype=p.dtype)


def token_positions(valid: torch.Tensor, cache: ModelCache | None) -> torch.Tensor:
    """Rotary position of each new token [B, T]: real tokens count on from what the cache has seen, padding sits at 0."""
    start = cache.n_valid if cache is not None else torch.zeros(valid.shape[0], dtype=torch.long, device=valid.device)
    return (start[:, None] + valid.long().cumsum(dim=1) - 1).clamp_min(0)


def backbone(
    layers: nn.ModuleList,
    norm: nn.Module,
    x: torch.Tensor,
    valid: torch.Tensor | None = None,
    cache: ModelCache | None = None,
    routing: torch.Tensor | None = None,
    sparse_topk: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    checkpoint_fn: Callable | None = None,
) -> ModelOutput:
    """The blocks and the final norm over embedded tokens x [B, T, D]: a ModelOutput without logits.

    Transformer.forward and the exported transformers model both run this, so they cannot drift apart.
    positions [B, T] default to token_positions; checkpoint_fn(block, *args), when given, runs each block
    during training without a cache (activation checkpointing); the cache, if any, advances past the T columns.
    """
    b, t = x.shape[:2]
    if valid is None:
        valid = torch.ones(b, t, dtype=torch.bool, device=x.device)
    if positions is None:
        positions = token_positions(valid, cache)
    expert_ids, loads, selections = [], [], []
    aux_loss = x.new_zeros((), dtype=torch.float32)
    moe_idx = dsa_idx = 0
    for i, block in enumerate(layers):
        layer_routing = layer_topk = None
        if block.is_moe and routing is not None:
            layer_routing = routing[:, :, moe_idx]
        if block.kind == "S" and sparse_topk is not None:
            layer_topk = sparse_topk[:, :, dsa_idx]
        layer_cache = cache.layers[i] if cache is not None else None
        if checkpoint_fn is not None and cache is None and torch.is_grad_enabled():
            x, aux = checkpoint_fn(block, x, positions, valid, None, layer_routing, layer_topk)
        else:
            x, aux = block(x, positions, valid, cache=layer_cache, routing=layer_routing, topk_indices=layer_topk)
        if block.is_moe:
            expert_ids.append(aux["expert_ids"])
            loads.append(aux["expert_load"])
            aux_loss = aux_loss + aux["balance_loss"]
            moe_idx += 1
        if block.kind == "S":
            selections.append(aux["topk_indices"])
            aux_loss = aux_loss + aux["indexer_loss"]
            dsa_idx += 1

    if cache is not None:
        cache.n_valid = cache.n_valid + valid.long().sum(dim=1)
        cache.length += t
    return ModelOutput(
        logits=None,
        hidden=norm(x),
        routing=torch.stack(expert_ids, dim=2) if expert_ids else None,
        sparse_topk=torch.stack(selections, dim=2) if selections else None,
        expert_load=torch.stack(loads) if loads else None,
        aux_loss=aux_loss,
    )
