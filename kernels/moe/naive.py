"""Dropless MoE dispatch in plain torch: permute token copies by expert, run each expert, weighted un-permute.

Shape legend: N = tokens, k = experts per token, M = N * k token copies, E = experts, D = dim,
F = expert width.

This is the ground truth the fused kernels are checked against; it favours clarity over speed (the
expert loop syncs counts to the host once per call).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def permute(
    x: torch.Tensor, expert_ids: torch.Tensor, n_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Copy each token once per chosen expert and group the copies by expert.

    x [N, D], expert_ids [N, k] -> x_sorted [M, D], order [M] (copy index n * k + j of each sorted row),
    counts [E] (rows per expert). The sort is stable, so within an expert copies keep token order.
    """
    k = expert_ids.shape[1]
    flat_ids = expert_ids.reshape(-1)  # [M]
    order = torch.argsort(flat_ids, stable=True)  # [M]
    counts = torch.bincount(flat_ids, minlength=n_experts)  # [E]
    x_sorted = x.index_select(0, order // k)  # [M, D]
    return x_sorted, order, counts


def grouped_swiglu(
    x_sorted: torch.Tensor,
    counts: torch.Tensor,
    gate_proj: torch.Tensor,
    up_proj: torch.Tensor,
    down_proj: torch.Tensor,
) -> torch.Tensor:
    """SwiGLU of each contiguous expert group.

    x_sorted [M, D], counts [E], gate_proj / up_proj [E, F, D], down_proj [E, D, F] -> [M, D].
    """
    sizes = counts.tolist()
    assert sum(sizes) == x_sorted.shape[0], "counts must sum to the number of sorted rows"
    outputs = []
    # split and unbind, not an index per expert: each index's backward fills a zero gradient of the whole tensor.
    groups = zip(x_sorted.split(sizes), gate_proj.unbind(0), up_proj.unbind(0), down_proj.unbind(0))
    for rows, gate, up, down in groups:  # [n, D], [F, D], [F, D], [D, F]
        # Empty groups still run (on zero rows) so every expert gets a (zero) gradient, never None.
        hidden = F.silu(rows @ gate.t()) * (rows @ up.t())  # [n, F]
        outputs.append(hidden @ down.t())  # [n, D]
    return torch.cat(outputs, dim=0)  # [M, D]


def unpermute_combine(y_sorted: torch.Tensor, order: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Return each copy to its token and sum its k copies with their weights.

    y_sorted [M, D], order [M] (from permute), weights [N, k] -> [N, D].
    """
    n, k = weights.shape
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=order.device)  # [M] sorted row of copy n * k + j
    copies = y_sorted.index_select(0, inverse).view(n, k, y_sorted.shape[-1])  # [N, k, D]
    # Accumulate in fp32: the weights are fp32 router outputs and the k-sum should not round per term.
    combined = torch.einsum("nkd,nk->nd", copies.float(), weights.float())  # [N, D]
    return combined.to(y_sorted.dtype)
