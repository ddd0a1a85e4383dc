"""Process-group plumbing of the learner ranks: rendezvous, backend and device choice, and an autograd all-to-all.

torch.distributed is initialised here (gloo on CPU, NCCL with CUDA) before DeepSpeed sees it; DeepSpeed's
comm layer then wraps the existing default group instead of starting its own launcher discovery.
"""
from __future__ import annotations

import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist

BACKENDS = ("auto", "gloo", "nccl")


def free_port() -> int:
    """A TCP port that was free on this host a moment ago (the OS picks it), for the rendezvous store."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def node_address() -> str:
    """This host's address as the other ranks reach it (Ray's view of the node, else loopback)."""
    try:
        import ray

        if ray.is_initialized():
            return ray.util.get_node_ip_address()
    except ImportError:
        pass
    return "127.0.0.1"


def learner_device() -> torch.device:
    """The device of this rank: its (only visible) GPU when there is one, else the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def resolve_backend(name: str, device: torch.device) -> str:
    """The torch.distributed backend: auto = nccl on CUDA, gloo on CPU; nccl without CUDA is an error."""
    if name not in BACKENDS:
        raise ValueError(f"backend {name!r} is not one of {BACKENDS}")
    if name == "auto":
        return "nccl" if device.type == "cuda" else "gloo"
    if name == "nccl" and device.type != "cuda":
        raise ValueError("backend 'nccl' needs CUDA devices, but this learner rank runs on the CPU")
    return name


def init_process_group(
    rank: int, world_size: int, address: str, port: int, backend: str, timeout_s: float = 600.0
) -> None:
    """Join the learner group (rank 0 hosts the TCP store) and hand the group to DeepSpeed's comm layer."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside [0, {world_size})")
    # DeepSpeed reads the launcher variables to decide whether it must discover a launcher itself.
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK="0", MASTER_ADDR=address, MASTER_PORT=str(port)
    )
    dist.init_process_group(
        backend,
        init_method=f"tcp://{address}:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout_s),
    )
    import deepspeed

    deepspeed.init_distributed(dist_backend=backend, dist_init_required=False)


class _AllToAll(torch.autograd.Function):
    """Variable-split all-to-all whose backward sends the gradients back along the reverse splits."""

    @staticmethod
    def forward(ctx, x, send_splits, recv_splits, group):
        ctx.splits, ctx.group = (send_splits, recv_splits), group
        out = x.new_empty((sum(recv_splits), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), recv_splits, send_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        send_splits, recv_splits = ctx.splits
        grad_in = grad_out.new_empty((sum(send_splits), *grad_out.shape[1:]))
        dist.all_to_all_single(grad_in, grad_out.contiguous(), send_splits, recv_splits, group=ctx.group)
        return grad_in, None, None, None


def all_to_all(x: torch.Tensor, send_splits: list[int], recv_splits: list[int], group=None) -> torch.Tensor:
    """Send block i of x (send_splits[i] rows) to group rank i, receive recv_splits[i] rows from it.

    x [sum(send_splits), ...] -> [sum(recv_splits), ...], differentiable (the backward is the reverse exchange).
    """
    return _AllToAll.apply(x, list(send_splits), list(recv_splits), group)


def all_reduce_sum(x: torch.Tensor, group=None) -> torch.Tensor:
    """A summed copy of x over the group (x itself is left as it was)."""
    out = x.detach().clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out


def all_reduce_max(value: int, device: torch.device, group=None) -> int:
    """The largest of an integer over the group."""
    t = torch.tensor([value], dtype=torch.long, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return int(t.item())
