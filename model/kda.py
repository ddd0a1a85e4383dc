"""Kimi-style gated delta attention (KDA): short convs, per-channel decay, delta-rule state, gated output norm.

Shape legend: B = batch rows, T = new tokens this call, D = model dim, H = heads, K = head dim (keys and
values alike), R = gate rank, W = cached conv window (kernel - 1), P = 3 * H * K conv channels (q | k | v).

Parameter names follow the reference Kimi Linear checkpoints one to one, except that `A_log` is stored
as [H] (the reference keeps [1, 1, H, 1]).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from jointrl.kernels.kda import chunk_kda, recurrent_kda
from jointrl.model.cache import KDAState
from jointrl.model.config import ModelConfig

# The reference kernels normalise q and k as x / sqrt(|x|^2 + eps) with this eps.
_L2_EPS = 1e-6


def l2_normalize(x: torch.Tensor, eps: float = _L2_EPS) -> torch.Tensor:
    """Scale the last dim to unit length (eps inside the square root, as the reference kernels do)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


class GatedRMSNorm(nn.Module):
    """Per-head RMSNorm of the attention output, multiplied by a sigmoid output gate; computed in fp32."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        """x, gate [..., K] -> fp32 [..., K]."""
        x = x.float()
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float()
        return normed * torch.sigmoid(gate.float())


class KDAttention(nn.Module):
    """One KDA layer: `y, aux = layer(x, positions, valid, cache=None)`, aux is always empty."""

    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.heads, self.head_dim = cfg.kda_heads, cfg.kda_head_dim
        self.chunk_size = cfg.kda_chunk_size
        self.window = cfg.kda_conv_size - 1
        self.init_std = cfg.init_std
        width = self.heads * self.head_dim
        self.q_proj = nn.Linear(cfg.dim, width, bias=False)
        self.k_proj = nn.Linear(cfg.dim, width, bias=False)
        self.v_proj = nn.Linear(cfg.dim, width, bias=False)
        self.q_conv1d = nn.Conv1d(width, width, cfg.kda_conv_size, groups=width, bias=False)
        self.k_conv1d = nn.Conv1d(width, width, cfg.kda_conv_size, groups=width, bias=False)
        self.v_conv1d = nn.Conv1d(width, width, cfg.kda_conv_size, groups=width, bias=False)
        self.f_a_proj = nn.Linear(cfg.dim, cfg.kda_gate_rank, bias=False)
        self.f_b_proj = nn.Linear(cfg.kda_gate_rank, width, bias=False)
        self.A_log = nn.Parameter(torch.empty(self.heads))
        self.dt_bias = nn.Parameter(torch.empty(width))
        self.b_proj = nn.Linear(cfg.dim, self.heads, bias=False)
        self.g_a_proj = nn.Linear(cfg.dim, cfg.kda_gate_rank, bias=False)
        self.g_b_proj = nn.Linear(cfg.kda_gate_rank, width, bias=False)
        self.o_norm = GatedRMSNorm(self.head_dim, cfg.norm_eps)
        self.o_proj = nn.Linear(width, cfg.dim, bias=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Normal linear weights, default conv init, decay rates exp(A_log) ~ U[1, 16], dt in [1e-3, 0.1]."""
        for linear in (self.q_proj, self.k_proj, self.v_proj, self.f_a_proj, self.f_b_proj, self.b_proj,
                       self.g_a_proj, self.g_b_proj, self.o_proj):
            nn.init.normal_(linear.weight, mean=0.0, std=self.init_std)
        for conv in (self.q_conv1d, self.k_conv1d, self.v_conv1d):
            conv.reset_parameters()
        self.A_log.uniform_(1.0, 16.0).log_()
        # softplus(dt_bias) = dt, log-uniform in [1e-3, 0.1] as in the reference; x + log(-expm1(-x)) is
        # the inverse softplus without overflow.
        dt = self.dt_bias.uniform_(math.log(1e-3), math.log(1e-1)).exp()
        self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        self.o_norm.weight.fill_(1.0)

    def decay_gate(self, x: torch.Tensor) -> torch.Tensor:
        """Per-channel log decay g = -exp(A_log) * softplus(f_b(f_a(x)) + dt_bias) <= 0, fp32 [B, T, H, K]."""
        pre = self.f_b_proj(self.f_a_proj(x)).float() + self.dt_bias.float()  # [B, T, H*K]
        pre = pre.unflatten(-1, (self.heads, self.head_dim))  # [B, T, H, K]
        return -self.A_log.float().exp()[:, None] * F.softplus(pre)

    def _short_conv(
        self, qkv: torch.Tensor, valid: torch.Tensor, window: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Depthwise causal conv + SiLU of qkv [B, T, P] after `window` [B, W, P], over real tokens only.

        A stable sort on validity moves padded columns in front of the window, so each real token's taps
        reach exactly the real inputs before it wherever the padding sits (left padding, a ragged chunk,
        a padded decode step). Returns the outputs in column order and the new window (last W real inputs).
        """
        b, _, p = qkv.shape
        full = torch.cat([window.to(qkv.dtype), qkv], dim=1)  # [B, W + T, P]
        real = torch.cat([valid.new_ones(b, self.window), valid], dim=1)  # [B, W + T]
        order = torch.argsort(real.to(torch.int8), dim=1, stable=True)  # padding first, real columns in order
        packed = full.gather(1, order[..., None].expand(-1, -1, p))  # [B, W + T, P]
        weight = torch.cat([self.q_conv1d.weight, self.k_conv1d.weight, self.v_conv1d.weight])  # [P, 1, W + 1]
        out = F.conv1d(F.pad(packed.transpose(1, 2), (self.window, 0)), weight, groups=p)  # [B, P, W + T]
        unpack = torch.argsort(order, dim=1)[..., None].expand(-1, -1, p)
        out = out.transpose(1, 2).gather(1, unpack)[:, self.window :]  # [B, T, P] in column order
        return F.silu(out), packed[:, packed.shape[1] - self.window :]

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        valid: torch.Tensor | None,
        cache: KDAState | None = None,
    ) -> tuple[torch.Tensor, dict]:
        """x [B, T, D] -> y [B, T, D]; positions are unused (KDA is position-free); updates `cache` in place."""
        b, t, _ = x.shape
        if valid is None:
            valid = torch.ones(b, t, dtype=torch.bool, device=x.device)
        if cache is not None and cache.recurrent.shape[0] != b:
            raise ValueError(f"KDA cache holds {cache.recurrent.shape[0]} rows but the input has {b}")
        # Padded tokens are skipped by the conv and get beta = 0 and g = 0, so they neither write nor decay
        # the state: a row's real tokens compute what the same row without padding does.
        qkv = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1)  # [B, T, P]
        qkv = qkv.masked_fill(~valid[..., None], 0.0)
        window = cache.conv if cache is not None else qkv.new_zeros(b, self.window, qkv.shape[-1])
        mixed, new_window = self._short_conv(qkv, valid, window)
        q, k, v = mixed.float().unflatten(-1, (3, self.heads, self.head_dim)).unbind(2)  # each [B, T, H, K]
        q, k = l2_normalize(q), l2_normalize(k)
        g = self.decay_gate(x).masked_fill(~valid[..., None, None], 0.0)
        beta = torch.sigmoid(self.b_proj(x).float()).masked_fill(~valid[..., None], 0.0)  # [B, T, H]
        scale = self.head_dim**-0.5

        if cache is None:
            o, _ = chunk_kda(q, k, v, g, beta, scale, chunk_size=self.chunk_size)
        elif t == 1:
            o, cache.recurrent = recurrent_kda(q, k, v, g, beta, scale, cache.recurrent, output_final_state=True)
        else:
            o, cache.recurrent = chunk_kda(
                q, k, v, g, beta, scale, cache.recurrent, output_final_state=True, chunk_size=self.chunk_size
            )
        if cache is not None:
            cache.conv = new_window.to(cache.conv.dtype)

        gate = self.g_b_proj(self.g_a_proj(x)).unflatten(-1, (self.heads, self.head_dim))  # [B, T, H, K]
        o = self.o_norm(o, gate).to(x.dtype).flatten(2)  # [B, T, H*K]
        return self.o_proj(o), {}
