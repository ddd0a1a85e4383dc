"""The mixture-of-experts FFN: a router with aux-loss-free balancing, shared experts and dropless routed experts.

Shape legend: B = batch rows, T = time, N = B * T tokens, E = routed experts, G = expert groups,
k = experts per token, D = dim, F = expert width.

Routing follows DeepSeek-V3: affinities s = sigmoid (or softmax) of fp32 router logits; a per-expert bias
is added to s only to choose the top-k experts (optionally only inside the best groups), while the
mixing weights are the chosen, unbiased s, normalised and scaled. The bias moves after each step toward
uniform expert load instead of an auxiliary loss; a small sequence-wise balance loss is optional.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from jointrl.kernels.moe import grouped_swiglu, permute, unpermute_combine
from jointrl.model.config import ModelConfig
from jointrl.model.ffn import SwiGLU


def select_experts(
    scores: torch.Tensor, bias: torch.Tensor, k: int, n_groups: int = 1, topk_groups: int = 1
) -> torch.Tensor:
    """Top-k experts of scores + bias, limited to each token's best topk_groups groups: [N, E] -> [N, k]."""
    biased = scores + bias  # [N, E]
    if n_groups > 1:
        n, e = biased.shape
        grouped = biased.view(n, n_groups, e // n_groups)  # [N, G, E/G]
        # A group is as good as its two best experts, so one lucky expert cannot claim a whole group.
        group_score = grouped.topk(min(2, e // n_groups), dim=-1).values.sum(-1)  # [N, G]
        kept = group_score.topk(topk_groups, dim=-1).indices  # [N, topk_groups]
        dropped = torch.ones_like(group_score, dtype=torch.bool).scatter_(1, kept, False)  # [N, G]
        # -inf, not 0: biased sigmoid scores can be negative and must still lose to every kept expert.
        biased = grouped.masked_fill(dropped[..., None], float("-inf")).view(n, e)  # [N, E]
    return biased.topk(k, dim=-1).indices  # [N, k]


def routing_weights(scores: torch.Tensor, expert_ids: torch.Tensor, normalize: bool, scale: float) -> torch.Tensor:
    """Mixing weights of the chosen experts from the unbiased affinities: [N, E], [N, k] -> [N, k]."""
    weights = scores.gather(1, expert_ids)  # [N, k]
    if normalize:
        weights = weights / weights.sum(-1, keepdim=True).clamp_min(1e-20)
    return weights * scale


def sequence_balance_loss(scores: torch.Tensor, expert_ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """DeepSeek-V3 sequence-wise balance loss (without its coefficient), averaged over non-empty rows.

    Per row: sum_i f_i * P_i with f_i = E / (k * T) * #(tokens choosing i) and P_i = mean over tokens of
    s_i / sum_j s_j, both over the row's T valid tokens. scores [B, T, E], expert_ids [B, T, k], valid [B, T].
    """
    n_experts, k = scores.shape[-1], expert_ids.shape[-1]
    mask = valid[..., None]  # [B, T, 1]
    n_tokens = valid.sum(1).to(scores.dtype)  # [B]
    picks = torch.zeros_like(scores).scatter_add_(-1, expert_ids, torch.ones_like(expert_ids, dtype=scores.dtype))
    picks = torch.where(mask, picks, 0.0).sum(1)  # [B, E]
    frac = picks * n_experts / (k * n_tokens.clamp_min(1.0))[:, None]  # [B, E]
    share = scores / scores.sum(-1, keepdim=True)  # [B, T, E]
    prob = torch.where(mask, share, 0.0).sum(1) / n_tokens.clamp_min(1.0)[:, None]  # [B, E]
    per_row = (frac * prob).sum(-1)  # [B]
    # Rows with no valid token contribute 0 to the sum and are left out of the mean.
    return per_row.sum() / (n_tokens > 0).sum().clamp_min(1)


class Router(nn.Module):
    """Router weight [E, D] and the balancing bias [E]; forward gives the fp32 affinities."""

    def __init__(self, dim: int, n_experts: int, scoring: str, init_std: float):
        super().__init__()
        self.scoring = scoring
        self.init_std = init_std
        self.weight = nn.Parameter(torch.empty(n_experts, dim))
        # A buffer: it is checkpointed and moved with the model, but no optimizer ever touches it.
        self.register_buffer("e_score_correction_bias", torch.zeros(n_experts, dtype=torch.float32))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Normal(0, init_std) weight, zero bias."""
        nn.init.normal_(self.weight, mean=0.0, std=self.init_std)
        with torch.no_grad():
            self.e_score_correction_bias.zero_()

    def _apply(self, fn, recurse=True):
        # The bias moves in steps of ~1e-3 that bf16 would round away; casts keep it fp32 on the new device.
        bias = self.e_score_correction_bias
        out = super()._apply(fn, recurse)
        moved = self.e_score_correction_bias
        if moved.dtype != torch.float32:
            self.e_score_correction_bias = bias.to(device=moved.device)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Affinities of each token for each expert: [N, D] -> [N, E] fp32."""
        logits = F.linear(x.float(), self.weight.float())  # [N, E]
        if self.scoring == "softmax":
            return logits.softmax(dim=-1)
        return logits.sigmoid()


class RoutedExperts(nn.Module):
    """E SwiGLU experts stored stacked; the one place the routed expert math runs."""

    def __init__(self, n_experts: int, dim: int, hidden: int, init_std: float):
        super().__init__()
        self.init_std = init_std
        self.gate_proj = nn.Parameter(torch.empty(n_experts, hidden, dim))  # [E, F, D]
        self.up_proj = nn.Parameter(torch.empty(n_experts, hidden, dim))  # [E, F, D]
        self.down_proj = nn.Parameter(torch.empty(n_experts, dim, hidden))  # [E, D, F]
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Normal(0, init_std) init of every expert."""
        for weight in (self.gate_proj, self.up_proj, self.down_proj):
            nn.init.normal_(weight, mean=0.0, std=self.init_std)

    def forward(self, x_sorted: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """Run expert e on its counts[e] contiguous rows: x_sorted [M, D], counts [E] -> [M, D]."""
        return grouped_swiglu(x_sorted, counts, self.gate_proj, self.up_proj, self.down_proj)


class MoE(nn.Module):
    """DeepSeek-V3-style MoE FFN of one layer: shared experts on every token plus k routed experts."""

    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__()
        if not cfg.is_moe(layer_idx):
            raise ValueError(f"layer {layer_idx} is a dense layer (first_dense_layers={cfg.first_dense_layers})")
        group_size = cfg.n_experts // cfg.n_groups
        if cfg.topk_groups * group_size < cfg.n_active:
            raise ValueError(
                f"topk_groups={cfg.topk_groups} groups of {group_size} experts cannot hold n_active={cfg.n_active}"
            )
        self.cfg = cfg
        self.layer_idx = layer_idx
        self.gate = Router(cfg.dim, cfg.n_experts, cfg.router_scoring, cfg.init_std)
        self.experts = RoutedExperts(cfg.n_experts, cfg.dim, cfg.expert_hidden, cfg.init_std)
        self.shared_experts = (
            SwiGLU(cfg.dim, cfg.n_shared * cfg.expert_hidden, init_std=cfg.init_std) if cfg.n_shared else None
        )

    def forward(
        self, x: torch.Tensor, valid: torch.Tensor | None = None, routing: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """x [B, T, D] -> (y [B, T, D], aux); `routing` [B, T, k] replays expert ids (weights stay live).

        aux: expert_ids [B, T, k] long, expert_load [E] float (choices by valid tokens), balance_loss
        (scalar, already times seq_aux_loss_coef). Padded tokens (valid False) are routed but do not count,
        and their `routing` entries may hold anything (e.g. -1).
        """
        cfg = self.cfg
        b, t, d = x.shape
        if valid is None:
            valid = torch.ones(b, t, dtype=torch.bool, device=x.device)
        elif valid.shape != (b, t):
            raise ValueError(f"valid has shape {tuple(valid.shape)}, expected {(b, t)}")
        flat = x.reshape(b * t, d)  # [N, D]
        flat_valid = valid.reshape(b * t)  # [N]

        scores = self.gate(flat)  # [N, E] fp32
        with torch.no_grad():
            chosen = select_experts(
                scores, self.gate.e_score_correction_bias, cfg.n_active, cfg.n_groups, cfg.topk_groups
            )  # [N, k]
        if routing is not None:
            chosen = self._replayed(routing, valid, chosen)
        weights = routing_weights(scores, chosen, cfg.norm_topk_prob, cfg.route_scale)  # [N, k]

        x_sorted, order, counts = permute(flat, chosen, cfg.n_experts)  # [N*k, D], [N*k], [E]
        y = unpermute_combine(self.experts(x_sorted, counts), order, weights)  # [N, D]
        if self.shared_experts is not None:
            y = y + self.shared_experts(flat)

        per_copy_valid = flat_valid[:, None].expand(-1, cfg.n_active).reshape(-1).float()  # [N*k]
        load = torch.zeros(cfg.n_experts, device=x.device).index_add_(0, chosen.reshape(-1), per_copy_valid)  # [E]
        expert_ids = chosen.view(b, t, cfg.n_active)  # [B, T, k]
        if cfg.seq_aux_loss_coef > 0:
            balance = cfg.seq_aux_loss_coef * sequence_balance_loss(scores.view(b, t, -1), expert_ids, valid)
        else:
            balance = scores.new_zeros(())
        aux = {"expert_ids": expert_ids, "expert_load": load, "balance_loss": balance}
        return y.view(b, t, d), aux

    def _replayed(self, routing: torch.Tensor, valid: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor:
        """Replayed ids [N, k]; padded positions may hold anything and fall back to the router's choice."""
        n, k = fresh.shape
        if routing.shape != (*valid.shape, k):
            raise ValueError(f"routing has shape {tuple(routing.shape)}, expected {(*valid.shape, k)}")
        if routing.dtype.is_floating_point or routing.dtype == torch.bool:
            raise ValueError(f"routing must hold integer expert ids, got dtype {routing.dtype}")
        ids = routing.reshape(n, k).to(device=fresh.device, dtype=torch.long)  # [N, k]
        flat_valid = valid.reshape(n)  # [N]
        out_of_range = ((ids < 0) | (ids >= self.cfg.n_experts)).any(-1) & flat_valid  # [N]
        if bool(out_of_range.any()):
            bad = ids[out_of_range][0].tolist()
            raise ValueError(f"routing holds expert ids {bad} outside [0, {self.cfg.n_experts}) at a valid token")
        return torch.where(flat_valid[:, None], ids, fresh)

    @torch.no_grad()
    def update_router_bias(self, load: torch.Tensor) -> None:
        """Aux-loss-free balancing step: bias += router_bias_rate * sign(mean(load) - load), load [E] over all ranks."""
        bias = self.gate.e_score_correction_bias
        if load.shape != bias.shape:
            raise ValueError(f"load has shape {tuple(load.shape)}, expected ({bias.numel()},)")
        load = load.to(device=bias.device, dtype=torch.float32)
        bias.add_(self.cfg.router_bias_rate * torch.sign(load.mean() - load))
