"""Gated multi-head latent attention (MLA): DeepSeek-V3 compressed KV with an optional per-head sigmoid output gate.

Shape legend: B = batch rows, T = new tokens this call, S = key slots (T without a cache; the cache's
length after this call's append with one), D = model dim, H = heads, N = per-head no-rope q/k dims,
R = rotary dims (0 = NoPE), V = per-head value dim, C = KV latent width, Q = query latent width (or D).

Parameter names and layouts follow transformers' deepseek_v3 / kimi_linear attention (q_a_proj,
q_a_layernorm, q_b_proj or q_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj); the gate
adds g_proj. Each query head's dims are [nope | rope]; kv_b_proj's rows are [k_nope | v] per head.
The cache holds the normalised latent and the rotated shared rope key, never per-head keys or values.
Export: with rotary dims the ungated layer is deepseek_v3 with rope_interleave (which stores rotated
pairs de-interleaved; dot products, hence outputs, are the same); kimi_linear never rotates, so it is
the target of the NoPE variants only (qk_rope_dim = 0, or mla_rope False: the rope dims stay unrotated).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from jointrl.kernels.sparse_attn import candidate_mask
from jointrl.model.cache import AttnCache
from jointrl.model.config import ModelConfig
from jointrl.model.rope import apply_rope


def visible_slots(k_valid: torch.Tensor, start: int, t: int) -> torch.Tensor:
    """Causal, valid slots per query plus the query's own slot: k_valid [B, S] -> [B, T, S] bool.

    The own slot matters only for a padded query (all its earlier slots are padding too): it keeps the
    softmax row non-empty so the output stays finite, and no valid query ever sees a padded slot.
    """
    slot = torch.arange(k_valid.shape[1], device=k_valid.device)
    q_slot = start + torch.arange(t, device=k_valid.device)
    own = slot[None, :] == q_slot[:, None]  # [T, S]
    return candidate_mask(k_valid, start, t) | own[None]


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor, scale: float) -> torch.Tensor:
    """Masked softmax attention: q [B, T, H, E], k [B, S, H, E], v [B, S, H, F], allowed [B, T, S] -> [B, T, H, F]."""
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=allowed[:, None], scale=scale
    )
    return out.transpose(1, 2)


class GatedMLA(nn.Module):
    """One latent-attention layer: `y, aux = layer(x, positions, valid, cache=None)`, aux is empty.

    With attn_output_gate False it is exactly the plain deepseek_v3 / kimi_linear MLA layout.
    """

    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.dim = cfg.dim
        self.heads = cfg.attn_heads
        self.nope_dim, self.rope_dim, self.v_dim = cfg.qk_nope_dim, cfg.qk_rope_dim, cfg.v_head_dim
        self.latent_dim = cfg.kv_lora_rank
        self.rope_theta = cfg.rope_theta
        self.rotate = cfg.mla_rope
        self.scale = cfg.qk_head_dim**-0.5
        self.init_std = cfg.init_std
        qk_width = self.heads * cfg.qk_head_dim
        if cfg.q_lora_rank > 0:
            self.q_a_proj = nn.Linear(cfg.dim, cfg.q_lora_rank, bias=False)
            self.q_a_layernorm = nn.RMSNorm(cfg.q_lora_rank, eps=cfg.latent_eps)
            self.q_b_proj = nn.Linear(cfg.q_lora_rank, qk_width, bias=False)
        else:
            self.q_proj = nn.Linear(cfg.dim, qk_width, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(cfg.dim, cfg.kv_lora_rank + cfg.qk_rope_dim, bias=False)
        self.kv_a_layernorm = nn.RMSNorm(cfg.kv_lora_rank, eps=cfg.latent_eps)
        self.kv_b_proj = nn.Linear(cfg.kv_lora_rank, self.heads * (cfg.qk_nope_dim + cfg.v_head_dim), bias=False)
        self.g_proj = nn.Linear(cfg.dim, self.heads * cfg.v_head_dim, bias=False) if cfg.attn_output_gate else None
        self.o_proj = nn.Linear(self.heads * cfg.v_head_dim, cfg.dim, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Normal linear weights with the config's std; norms start at 1."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=self.init_std)
            elif isinstance(module, (nn.RMSNorm, nn.LayerNorm)):
                module.reset_parameters()

    def check_inputs(self, x: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor) -> None:
        """Raise ValueError when x, positions or valid do not follow the layer calling convention."""
        if x.dim() != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"x {tuple(x.shape)} must be [B, T, D] with D = {self.dim}")
        if positions.shape != x.shape[:2] or positions.is_floating_point():
            raise ValueError(
                f"positions {tuple(positions.shape)} {positions.dtype} must be integer [B, T] = {tuple(x.shape[:2])}"
            )
        if valid.shape != x.shape[:2] or valid.dtype != torch.bool:
            raise ValueError(f"valid {tuple(valid.shape)} {valid.dtype} must be bool [B, T] = {tuple(x.shape[:2])}")

    def project_q(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries: (q_nope [B, T, H, N], rotated q_rope [B, T, H, R], query latent [B, T, Q] for the indexer)."""
        if hasattr(self, "q_a_proj"):
            latent = self.q_a_layernorm(self.q_a_proj(x))
            q = self.q_b_proj(latent)
        else:
            latent = x
            q = self.q_proj(x)
        q = q.view(*x.shape[:2], self.heads, self.nope_dim + self.rope_dim)  # [B, T, H, N + R]
        q_nope, q_rope = q.split([self.nope_dim, self.rope_dim], dim=-1)
        return q_nope, self._rope(q_rope, positions), latent

    def project_kv(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What the cache stores: (normalised latent [B, T, C], rotated shared rope key [B, T, R])."""
        latent, k_rope = self.kv_a_proj_with_mqa(x).split([self.latent_dim, self.rope_dim], dim=-1)
        return self.kv_a_layernorm(latent), self._rope(k_rope, positions)

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # mla_rope False (Kimi Linear): the rope dims stay a plain, unrotated part of query and shared key.
        return apply_rope(x, positions, self.rope_theta, interleaved=True) if self.rotate else x

    def _kv_b_weight(self) -> tuple[torch.Tensor, torch.Tensor]:
        """kv_b_proj split per head: key part [H, N, C] and value part [H, V, C]."""
        w = self.kv_b_proj.weight.view(self.heads, self.nope_dim + self.v_dim, self.latent_dim)
        return w[:, : self.nope_dim], w[:, self.nope_dim :]

    def expand_kv(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-head keys and values from the latent [B, S, C]: (k_nope [B, S, H, N], v [B, S, H, V])."""
        kv = self.kv_b_proj(latent).view(*latent.shape[:2], self.heads, self.nope_dim + self.v_dim)
        k_nope, v = kv.split([self.nope_dim, self.v_dim], dim=-1)
        return k_nope, v

    def absorb_query(self, q_nope: torch.Tensor, q_rope: torch.Tensor) -> torch.Tensor:
        """MQA-form query over [latent | rope key]: q_nope folded through kv_b's key part -> [B, T, H, C + R]."""
        w_k, _ = self._kv_b_weight()
        q_latent = torch.einsum("bthn,hnc->bthc", q_nope, w_k)  # [B, T, H, C]
        return torch.cat([q_latent, q_rope], dim=-1)

    def latent_to_value(self, o_latent: torch.Tensor) -> torch.Tensor:
        """Attention output over latents [B, T, H, C] through kv_b's value part -> [B, T, H, V]."""
        _, w_v = self._kv_b_weight()
        return torch.einsum("bthc,hvc->bthv", o_latent, w_v)

    def output(self, x: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        """Gate the per-head outputs o [B, T, H, V] from x and project back to [B, T, D]."""
        o = o.flatten(2)  # [B, T, H * V]
        if self.g_proj is not None:
            o = o * torch.sigmoid(self.g_proj(x))
        return self.o_proj(o)

    def extend(
        self,
        cache: AttnCache | None,
        latent: torch.Tensor,
        k_rope: torch.Tensor,
        valid: torch.Tensor,
        index_keys: torch.Tensor | None = None,
    ) -> tuple[int, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Append the new tokens to the cache, if any: (start slot, latent, k_rope, valid, index keys) of every slot."""
        if cache is None:
            return 0, latent, k_rope, valid, index_keys
        if cache.kv_latent.shape[0] != latent.shape[0]:
            raise ValueError(f"cache holds {cache.kv_latent.shape[0]} rows but x has {latent.shape[0]}")
        if (cache.index_keys is None) != (index_keys is None):
            kind = "holds index keys (a DSA layer's)" if cache.index_keys is not None else "has no index keys"
            raise ValueError(f"layer {self.layer_idx}: its cache {kind}; build caches with ModelCache.allocate")
        start = cache.length
        written = cache.append(latent, k_rope, valid, index_keys)
        seen = slice(0, written.stop)
        keys = None if cache.index_keys is None else cache.index_keys[:, seen]
        return start, cache.kv_latent[:, seen], cache.k_rope[:, seen], cache.valid[:, seen], keys

    def dense_attention(
        self,
        q_nope: torch.Tensor,
        q_rope: torch.Tensor,
        latent: torch.Tensor,
        k_rope: torch.Tensor,
        k_valid: torch.Tensor,
        start: int,
        absorb: bool,
    ) -> torch.Tensor:
        """Per-head output [B, T, H, V] of the T queries over every visible slot of latent [B, S, C].

        absorb=False expands the latent to per-head keys and values (cheapest when S ~ T); absorb=True
        folds kv_b into the query and output and attends over the shared latent (cheapest for decode).
        """
        allowed = visible_slots(k_valid, start, q_nope.shape[1])  # [B, T, S]
        b, s = latent.shape[:2]
        if absorb:
            q = self.absorb_query(q_nope, q_rope)  # [B, T, H, C + R]
            k = torch.cat([latent, k_rope], dim=-1)[:, :, None].expand(b, s, self.heads, -1)  # [B, S, H, C + R]
            o_latent = _attend(q, k, latent[:, :, None].expand(b, s, self.heads, -1), allowed, self.scale)
            return self.latent_to_value(o_latent)
        k_nope, v = self.expand_kv(latent)  # [B, S, H, N], [B, S, H, V]
        k = torch.cat([k_nope, k_rope[:, :, None].expand(b, s, self.heads, -1)], dim=-1)  # [B, S, H, N + R]
        return _attend(torch.cat([q_nope, q_rope], dim=-1), k, v, allowed, self.scale)

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        valid: torch.Tensor,
        cache: AttnCache | None = None,
        absorb: bool | None = None,
    ) -> tuple[torch.Tensor, dict]:
        """x [B, T, D] -> (y [B, T, D], {}); absorb None = absorbed form with a cache, expanded without."""
        self.check_inputs(x, positions, valid)
        q_nope, q_rope, _ = self.project_q(x, positions)
        latent, k_rope = self.project_kv(x, positions)
        start, latent, k_rope, k_valid, _ = self.extend(cache, latent, k_rope, valid)
        absorb = cache is not None if absorb is None else absorb
        o = self.dense_attention(q_nope, q_rope, latent, k_rope, k_valid, start, absorb)
        return self.output(x, o), {}
