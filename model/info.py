"""Size of a model on paper: parameters (total / active), layer kinds, weight and inference-state memory.

Counts come from building the model on the `meta` device, so the full-scale preset costs no memory.
"Active" parameters are what one token touches: everything except the routed experts it was not sent
to (embedding and head included, as published MoE sizes count them).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from jointrl.model.config import LAYER_KIND_NAMES, ModelConfig
from jointrl.model.transformer import Transformer

BF16_BYTES = 2
# MXFP4: 4 bits per element plus one 8-bit scale per 32 elements.
MXFP4_BYTES = (4 + 8 / 32) / 8
ROUTED_EXPERT_MARK = ".ffn.experts."


@dataclass
class ModelInfo:
    """Counts and byte sizes of one configuration."""

    name: str
    total_params: int
    active_params: int
    routed_expert_params: int
    embedding_params: int  # input embedding + head (once if tied)
    layers_by_kind: dict[str, int]
    moe_layers: int
    weights_bf16_bytes: int
    weights_mxfp4_bytes: int  # routed experts in MXFP4, everything else bf16
    context: int
    attn_cache_bytes: int  # latent KV (+ index keys) for `context` tokens of one sequence, bf16
    kda_state_bytes: int  # recurrent (fp32) + conv (bf16) state of one sequence, independent of context

    @property
    def state_bytes_per_token(self) -> float:
        return (self.attn_cache_bytes + self.kda_state_bytes) / self.context


def model_info(cfg: ModelConfig, context: int = 131072) -> ModelInfo:
    """Count a configuration's parameters on the meta device and size its inference state."""
    with torch.device("meta"):
        model = Transformer(cfg)
    total = routed = embedding = 0
    seen: set[int] = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen:
            continue
        seen.add(id(param))
        total += param.numel()
        if ROUTED_EXPERT_MARK in name:
            routed += param.numel()
        if name.startswith(("embed.", "lm_head.")):
            embedding += param.numel()
    active = total - routed + routed * cfg.n_active // cfg.n_experts

    kinds = {LAYER_KIND_NAMES[k]: cfg.layer_pattern.count(k) for k in LAYER_KIND_NAMES}
    per_token = 0
    for kind in cfg.layer_pattern:
        if kind in "SL":
            per_token += (cfg.kv_lora_rank + cfg.qk_rope_dim) * BF16_BYTES
        if kind == "S":
            per_token += cfg.index_head_dim * BF16_BYTES
    kda_layers = cfg.layer_pattern.count("K")
    h, k = cfg.kda_heads, cfg.kda_head_dim
    kda_state = kda_layers * (h * k * k * 4 + (cfg.kda_conv_size - 1) * 3 * h * k * BF16_BYTES)
    return ModelInfo(
        name=cfg.name,
        total_params=total,
        active_params=active,
        routed_expert_params=routed,
        embedding_params=embedding,
        layers_by_kind=kinds,
        moe_layers=len(cfg.moe_layers),
        weights_bf16_bytes=total * BF16_BYTES,
        weights_mxfp4_bytes=int((total - routed) * BF16_BYTES + routed * MXFP4_BYTES),
        context=context,
        attn_cache_bytes=per_token * context,
        kda_state_bytes=kda_state,
    )
