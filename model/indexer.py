"""The lightning indexer of DSA layers (DeepSeek-V3.2): cheap ReLU scores that pick each query's slots, and its loss.

Shape legend: B = batch rows, T = tokens, D = model dim, Q = query latent width (or D without a
query bottleneck), Hi = indexer heads, I = indexer dim, Ri = its rotary dims, K = candidate slots.

score(t, s) = sum_h w_h(t) relu(q_h(t) . k(s)) with one shared index key per token. Parameter names
follow transformers' deepseek_v32 indexer (wq_b, wk, k_norm, weights_proj); rotary is non-interleaved
on the leading Ri dims of queries and keys, as there.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from jointrl.model.config import ModelConfig
from jointrl.model.rope import apply_rope


class LightningIndexer(nn.Module):
    """Index queries and weights from the query latent and x, one normalised index key per token from x."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.heads, self.head_dim, self.rope_dim = cfg.index_heads, cfg.index_head_dim, cfg.index_rope_dim
        self.rope_theta = cfg.rope_theta
        self.init_std = cfg.init_std
        # Reads the normalised query latent, or x itself when queries have no bottleneck.
        self.wq_b = nn.Linear(cfg.q_lora_rank or cfg.dim, self.heads * self.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, self.head_dim, bias=False)
        self.k_norm = nn.LayerNorm(self.head_dim, eps=cfg.latent_eps)
        self.weights_proj = nn.Linear(cfg.dim, self.heads, bias=False)
        # Folded into the head weights, as the reference does: 1/sqrt(Hi) for the sum, 1/sqrt(I) for the dot.
        self.weight_scale = self.heads**-0.5 * self.head_dim**-0.5
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Normal linear weights with the config's std; the key norm starts as identity."""
        for linear in (self.wq_b, self.wk, self.weights_proj):
            nn.init.normal_(linear.weight, mean=0.0, std=self.init_std)
        self.k_norm.reset_parameters()

    def _rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        rot, rest = x.split([self.rope_dim, self.head_dim - self.rope_dim], dim=-1)
        return torch.cat([apply_rope(rot, positions, self.rope_theta, interleaved=False), rest], dim=-1)

    def queries(
        self, q_latent: torch.Tensor, x: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Index queries [B, T, Hi, I] from q_latent [B, T, Q] and scaled head weights [B, T, Hi] from x [B, T, D]."""
        q = self.wq_b(q_latent).view(*q_latent.shape[:2], self.heads, self.head_dim)  # [B, T, Hi, I]
        return self._rotate(q, positions), self.weights_proj(x) * self.weight_scale

    def keys(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The shared index key of each token, rotated: x [B, T, D] -> [B, T, I]."""
        return self._rotate(self.k_norm(self.wk(x)), positions)


def indexer_loss(target: torch.Tensor, logits: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Mean over rows of KL(target || softmax(logits)) over each query's candidate slots (DeepSeek-V3.2).

    target [B, T, K]: the main attention's head-summed distribution (rows sum to 1, 0 off-candidate);
    logits [B, T, K]: index scores, -inf off-candidate; rows [B, T] bool: queries that count (valid ones).
    Rows without any candidate are skipped; the result is a differentiable scalar in fp32.
    """
    rows = rows & (target.sum(dim=-1) > 0)
    # Skipped rows may be all -inf; zero them so log_softmax stays finite there.
    logits = logits.float().masked_fill(~rows[..., None], 0.0)
    on = target > 0
    log_index = F.log_softmax(logits, dim=-1).masked_fill(~on, 0.0)
    log_target = target.clamp_min(torch.finfo(torch.float32).tiny).log()
    per_row = torch.where(on, target * (log_target - log_index), 0.0).sum(dim=-1)  # [B, T]
    return (per_row * rows).sum() / rows.sum().clamp_min(1)
