"""Versioned, bucketed pushes of new policy weights to every rollout worker.

A push prepares the state dict once on the sending side (detached CPU copies, aliases such as a tied
head sent once, routed experts optionally quantised to MXFP4: 4.25 bits a weight instead of 16 or 32), cuts it
into buckets of bounded size, and publishes the buckets through a transport. Workers receive a
`WeightUpdate` (version + transport + handles) and pull the buckets one at a time, so no worker holds
a second full copy of the weights while loading.

On a cluster no single process may hold the whole policy, so the learner ranks publish it between them
(`rank_share`): each rank sends its share of the dense tensors and a slice of its experts' rows, named
`name[start:stop]` (a piece: rows start..stop of dim 0 of `name`); the driver only collects the handles into
one WeightUpdate, and a worker copies each piece into its rows. The shares of all ranks tile the policy
exactly once (tests/rl/rollout/test_weight_sync.py).

The transport is the part that differs between machines: `ObjectStoreTransport` puts each bucket in
the Ray object store once and every worker gets it from there (CPU, or GPUs without a shared NCCL
group). An NCCL transport fits the same two methods: `publish` starts the sender's broadcasts without
waiting (async ops) and returns the buckets' names, shapes and dtypes as handles; `fetch` receives each
broadcast into buffers of those shapes.
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import ray
import torch

from jointrl.model.checkpoint import split_by_bytes
from jointrl.model.mxfp4 import mxfp4_state_dict

DEFAULT_BUCKET_BYTES = 64 * 1024**2
Bucket = dict[str, torch.Tensor]


def prepare_state(state: Mapping[str, torch.Tensor], mxfp4_experts: bool = False) -> Bucket:
    """Detached CPU copies in order, a tensor aliasing an earlier one left out, routed experts optionally MXFP4."""
    # A tied weight is left out: the receiver's module already shares it.
    out = {name: state[name].detach().to("cpu", copy=True).contiguous() for name in unique_names(state)}
    return mxfp4_state_dict(out) if mxfp4_experts else out


_PIECE = re.compile(r"^(?P<name>.+)\[(?P<start>\d+):(?P<stop>\d+)\]$")


def piece_key(name: str, start: int, stop: int) -> str:
    """The bucket key of rows start..stop (dim 0) of tensor `name`."""
    return f"{name}[{start}:{stop}]"


def split_key(key: str) -> tuple[str, tuple[int, int] | None]:
    """(tensor name, (start, stop)) of a piece key; (key, None) for a whole tensor."""
    match = _PIECE.match(key)
    if match is None:
        return key, None
    return match["name"], (int(match["start"]), int(match["stop"]))


def unique_names(state: Mapping[str, torch.Tensor]) -> list[str]:
    """State-dict names in order, a tensor aliasing an earlier one (a tied head) left out."""
    names, seen = [], set()
    for name, tensor in state.items():
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if key not in seen:
            seen.add(key)
            names.append(name)
    return names


def assign_owners(state: Mapping[str, torch.Tensor], names: list[str], n_ranks: int) -> dict[str, int]:
    """Each name to the rank with the fewest bytes so far, in order (ties to the lower rank): same answer on every rank."""
    loads = [0] * n_ranks
    owners = {}
    for name in names:
        rank = min(range(n_ranks), key=lambda r: (loads[r], r))
        owners[name] = rank
        loads[rank] += state[name].numel() * state[name].element_size()
    return owners


def rank_share(
    local: Mapping[str, torch.Tensor], expert_keys: list[str], *, rank: int, world_size: int, ep_size: int,
    mxfp4_experts: bool = False,
) -> Bucket:
    """What learner rank `rank` publishes of its local state: detached CPU copies of its share.

    Dense tensors (everything but expert_keys; identical on every rank) are spread over all ranks by bytes. A
    rank's expert keys hold its EP slice, the rows [ep_rank * El, (ep_rank + 1) * El) of the full tensors, on
    world_size / ep_size replicas (ranks ep_rank, ep_rank + ep_size, ...: DeepSpeed's expert-data groups); the
    replicas split those rows between them, so every rank sends about 1/world_size of the policy.
    """
    if world_size % ep_size:
        raise ValueError(f"ep_size={ep_size} does not divide world_size={world_size}")
    experts = set(expert_keys)
    dense = [name for name in unique_names(local) if name not in experts]
    owners = assign_owners(local, dense, world_size)
    out: Bucket = {name: local[name].detach().to("cpu", copy=True).contiguous() for name in dense if owners[name] == rank}
    ep_rank, replica, replicas = rank % ep_size, rank // ep_size, world_size // ep_size
    for key in expert_keys:
        shard = local[key]  # [El, ...]: this EP rank's experts
        n_local = shard.shape[0]
        bounds = [n_local * j // replicas for j in range(replicas + 1)]
        lo, hi = bounds[replica], bounds[replica + 1]
        if lo == hi:
            continue  # fewer local experts than replicas: others send them
        rows = {key: shard.detach()[lo:hi].to("cpu", copy=True).contiguous()}
        if mxfp4_experts:
            rows = mxfp4_state_dict(rows)
        offset = ep_rank * n_local
        out.update({piece_key(name, offset + lo, offset + hi): t for name, t in rows.items()})
    return out


def bucketize(state: Mapping[str, torch.Tensor], bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> list[Bucket]:
    """Whole tensors, in order, grouped into buckets of at most bucket_bytes (a larger tensor gets a bucket alone)."""
    if bucket_bytes < 1:
        raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
    buckets = split_by_bytes(state, bucket_bytes)
    return buckets if buckets[-1] else []


class WeightTransport(ABC):
    """Moves buckets from the sender to every worker: publish on the sender, fetch on each worker."""

    @abstractmethod
    def publish(self, buckets: list[Bucket]) -> list[Any]:
        """Make the buckets available; returns one picklable handle per bucket."""

    @abstractmethod
    def fetch(self, handles: list[Any]) -> Iterator[Bucket]:
        """On a worker: the published buckets, one at a time, in order."""


class ObjectStoreTransport(WeightTransport):
    """Each bucket is put in the Ray object store once; every worker reads it from there."""

    def publish(self, buckets: list[Bucket]) -> list[ray.ObjectRef]:
        """ray.put every bucket."""
        return [ray.put(bucket) for bucket in buckets]

    def fetch(self, handles: list[ray.ObjectRef]) -> Iterator[Bucket]:
        """ray.get the buckets one by one, so only one is held at a time besides the model."""
        for ref in handles:
            yield ray.get(ref)


@dataclass(frozen=True)
class WeightUpdate:
    """One published set of weights, as workers receive it."""

    version: int  # policy version; every token sampled with these weights reports it
    transport: WeightTransport
    handles: list[Any]  # one per bucket, in order
    mxfp4_experts: bool  # routed experts travel as MXFP4 `_blocks` / `_scales`
    nbytes: int  # bytes published

    def buckets(self) -> Iterator[Bucket]:
        """The buckets, fetched through the transport (call on the receiving side)."""
        return self.transport.fetch(self.handles)


class WeightSync:
    """Publishes versioned weights for workers to load; remembers the latest for workers started later."""

    def __init__(
        self,
        transport: WeightTransport | None = None,
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
        mxfp4_experts: bool = False,
    ):
        self.transport = transport or ObjectStoreTransport()
        self.bucket_bytes = bucket_bytes
        self.mxfp4_experts = mxfp4_experts
        self.latest: WeightUpdate | None = None

    def publish(self, state: Mapping[str, torch.Tensor], version: int) -> WeightUpdate:
        """Prepare, bucket and publish a state dict held here as `version` (must exceed the last published version)."""
        self._check_newer(version)
        prepared = prepare_state(state, self.mxfp4_experts)
        buckets = bucketize(prepared, self.bucket_bytes)
        nbytes = sum(t.numel() * t.element_size() for t in prepared.values())
        # Replacing `latest` drops the previous handles, which frees their object-store copies.
        self.latest = WeightUpdate(version, self.transport, self.transport.publish(buckets), self.mxfp4_experts, nbytes)
        return self.latest

    def adopt(self, update: WeightUpdate) -> WeightUpdate:
        """Take an update published elsewhere (by the learner ranks) as the latest; its format must be ours."""
        self._check_newer(update.version)
        if update.mxfp4_experts != self.mxfp4_experts:
            raise ValueError(f"weights version {update.version} has mxfp4_experts={update.mxfp4_experts}, "
                             f"this sync publishes mxfp4_experts={self.mxfp4_experts}")
        self.latest = update
        return update

    def _check_newer(self, version: int) -> None:
        if self.latest is not None and version <= self.latest.version:
            raise ValueError(f"weight version {version} is not newer than the last published {self.latest.version}")
