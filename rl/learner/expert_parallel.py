"""Expert parallelism for the MoE policy: each rank keeps E/ep routed experts and trades token rows by all-to-all.

Shape legend: M = token copies this rank routed (sorted by global expert id), E = experts per layer,
ep = expert-parallel group size, El = E / ep experts per rank, R = rows this rank received, D = dim.

EP rank r owns experts [r * El, (r + 1) * El). A forward splits the sorted copies by owning rank (they are
contiguous because the MoE layer sorts them by expert id), exchanges the per-expert counts and then the rows
(dropless: variable splits, nothing is cut at a capacity), regroups the received rows by local expert, runs
the model's expert math on the local slice and returns the results the same way. Autograd replays the
exchange in reverse, so an expert's gradient already sums the contributions of every rank of its EP group;
DeepSpeed then reduces it over the expert-data group only, because its parameters carry DeepSpeed's MoE
tags (`allreduce = False`, `group_name`).
"""
from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.distributed as dist
from torch import nn

from jointrl.kernels.moe import grouped_swiglu
from jointrl.model.moe import RoutedExperts
from jointrl.rl.learner.distributed import all_to_all

EXPERT_PARAMS = ("gate_proj", "up_proj", "down_proj")


def expert_group_name(ep_size: int) -> str:
    """The name DeepSpeed's groups module gives the expert / expert-data groups of this EP size."""
    return f"ep_size_{ep_size}"


def tag_expert_params(module: nn.Module, group_name: str) -> None:
    """Mark every parameter of module as an expert parameter of group_name, the way DeepSpeed's MoE does."""
    for param in module.parameters():
        # DeepSpeed skips allreduce=False parameters in the data-parallel reduction and reduces them over
        # the expert-data group named by group_name instead.
        param.allreduce = False
        param.group_name = group_name


def regroup_order(recv_counts: torch.Tensor) -> torch.Tensor:
    """Row order that turns source-major received rows into local-expert-major ones: [ep, El] -> [R].

    Received rows arrive as blocks (source s, local expert e) in order s-major; out[i] is the received row
    that goes to position i when the blocks are reordered e-major (within a block rows keep their order).
    """
    counts = recv_counts.reshape(-1)  # [ep * El] s-major
    src_start = (counts.cumsum(0) - counts).view_as(recv_counts)  # [ep, El]
    lens = recv_counts.t().reshape(-1)  # [El * ep] e-major
    starts = src_start.t().reshape(-1)  # [El * ep]
    dst_start = lens.cumsum(0) - lens  # [El * ep]
    n = int(counts.sum())
    shift = torch.repeat_interleave(starts - dst_start, lens, output_size=n)  # [R]
    return torch.arange(n, dtype=torch.long) + shift


class ExpertShard(nn.Module):
    """This rank's slice of one layer's routed experts; forward serves the whole EP group's tokens."""

    def __init__(self, experts: RoutedExperts, ep_rank: int, ep_size: int, group=None, group_name: str | None = None):
        super().__init__()
        n_experts = experts.gate_proj.shape[0]
        if n_experts % ep_size:
            raise ValueError(f"ep_size={ep_size} does not divide the {n_experts} experts of a layer")
        if not 0 <= ep_rank < ep_size:
            raise ValueError(f"ep_rank {ep_rank} is outside [0, {ep_size})")
        self.ep_rank, self.ep_size, self.group = ep_rank, ep_size, group
        self.n_experts, self.n_local = n_experts, n_experts // ep_size
        lo, hi = ep_rank * self.n_local, (ep_rank + 1) * self.n_local
        for name in EXPERT_PARAMS:
            full = getattr(experts, name)
            setattr(self, name, nn.Parameter(full.detach()[lo:hi].clone(), requires_grad=full.requires_grad))
        tag_expert_params(self, group_name or expert_group_name(ep_size))

    def forward(self, x_sorted: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """Same contract as RoutedExperts: x_sorted [M, D] sorted by global expert, counts [E] -> [M, D]."""
        if self.ep_size == 1:
            return grouped_swiglu(x_sorted, counts, self.gate_proj, self.up_proj, self.down_proj)
        send_counts = counts.view(self.ep_size, self.n_local)  # [ep, El] rows for each rank's experts
        recv_counts = torch.empty_like(send_counts)
        # recv_counts[s, e]: rows source s sends for local expert e.
        dist.all_to_all_single(recv_counts, send_counts.contiguous(), group=self.group)
        recv_counts = recv_counts.cpu()
        send_splits = send_counts.sum(1).tolist()
        recv_splits = recv_counts.sum(1).tolist()

        received = all_to_all(x_sorted, send_splits, recv_splits, self.group)  # [R, D] source-major
        order = regroup_order(recv_counts).to(x_sorted.device)  # [R]
        local_counts = recv_counts.sum(0).to(counts.device)  # [El]
        y_local = grouped_swiglu(
            received.index_select(0, order), local_counts, self.gate_proj, self.up_proj, self.down_proj
        )  # [R, D] expert-major
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel(), device=order.device)
        y_received = y_local.index_select(0, inverse)  # [R, D] source-major again
        return all_to_all(y_received, recv_splits, send_splits, self.group)  # [M, D]


def shard_experts(model: nn.Module, ep_rank: int, ep_size: int, group=None) -> list[str]:
    """Replace every RoutedExperts of model with this rank's ExpertShard; returns the replaced module names."""
    group_name = expert_group_name(ep_size)
    names = [name for name, module in model.named_modules() if isinstance(module, RoutedExperts)]
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, ExpertShard(getattr(parent, child), ep_rank, ep_size, group, group_name))
    return names


def expert_keys(model: nn.Module) -> list[str]:
    """State-dict keys of routed-expert weights (full or sharded), in module order."""
    return [
        f"{name}.{param}"
        for name, module in model.named_modules()
        if isinstance(module, (RoutedExperts, ExpertShard))
        for param in EXPERT_PARAMS
    ]


def shard_state(
    full: Mapping[str, torch.Tensor], keys: list[str], ep_rank: int, ep_size: int
) -> dict[str, torch.Tensor]:
    """EP rank ep_rank's view of a full state: expert keys sliced along dim 0, everything else as is."""
    out = dict(full)
    for key in keys:
        if key not in full:
            raise ValueError(f"state has no routed-expert weight {key!r}")
        n = full[key].shape[0]
        if n % ep_size:
            raise ValueError(f"ep_size={ep_size} does not divide the {n} experts of {key!r}")
        per = n // ep_size
        out[key] = full[key][ep_rank * per : (ep_rank + 1) * per]
    return out


def merge_shards(shards: list[Mapping[str, torch.Tensor]], keys: list[str]) -> dict[str, torch.Tensor]:
    """The full state from every EP rank's state, in EP-rank order: expert keys concatenated along dim 0."""
    out = dict(shards[0])
    for key in keys:
        out[key] = torch.cat([shard[key] for shard in shards], dim=0)
    return out


def gather_full_state(
    local: Mapping[str, torch.Tensor], keys: list[str], group=None
) -> dict[str, torch.Tensor]:
    """All-gather the expert shards of the EP group: every member gets the full state (detached)."""
    out = {name: tensor.detach() for name, tensor in local.items()}
    size = dist.get_world_size(group)
    for key in keys:
        shard = out[key].contiguous()
        parts = [torch.empty_like(shard) for _ in range(size)]
        dist.all_gather(parts, shard, group=group)
        out[key] = torch.cat(parts, dim=0)
    return out
