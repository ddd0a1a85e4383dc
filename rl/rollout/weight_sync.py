"""Versioned, bucketed pushes of new policy weights to every rollout worker.

A push prepares the state dict once on the sending side (detached CPU copies, aliases such as a tied
head sent once, routed experts optionally quantised to MXFP4: 4.25 bits a weight instead of 16 or 32), cuts it
into buckets of bounded size, and publishes the buckets through a transport. Workers receive a
`WeightUpdate` (version + transport + handles) and pull the buckets one at a time, so no worker holds
a second full copy of the weights while loading.

The transport is the part that differs between machines: `ObjectStoreTransport` puts each bucket in
the Ray object store once and every worker gets it from there (CPU, or GPUs without a shared NCCL
group). An NCCL transport fits the same two methods: `publish` starts the sender's broadcasts without
waiting (async ops) and returns the buckets' names, shapes and dtypes as handles; `fetch` receives each
broadcast into buffers of those shapes.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import ray
import torch

from jointrl.model.mxfp4 import mxfp4_state_dict

DEFAULT_BUCKET_BYTES = 64 * 1024**2
Bucket = dict[str, torch.Tensor]


def prepare_state(state: Mapping[str, torch.Tensor], mxfp4_experts: bool = False) -> Bucket:
    """Detached CPU copies in order, a tensor aliasing an earlier one left out, routed experts optionally MXFP4."""
    out: Bucket = {}
    seen: set[tuple[int, tuple[int, ...]]] = set()
    for name, tensor in state.items():
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if key in seen:
            continue  # a tied weight: the receiver's module already shares it
        seen.add(key)
        out[name] = tensor.detach().to("cpu", copy=True).contiguous()
    return mxfp4_state_dict(out) if mxfp4_experts else out


def bucketize(state: Mapping[str, torch.Tensor], bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> list[Bucket]:
    """Whole tensors, in order, grouped into buckets of at most bucket_bytes (a larger tensor gets a bucket alone)."""
    if bucket_bytes < 1:
        raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
    buckets: list[Bucket] = [{}]
    size = 0
    for name, tensor in state.items():
        nbytes = tensor.numel() * tensor.element_size()
        if buckets[-1] and size + nbytes > bucket_bytes:
            buckets.append({})
            size = 0
        buckets[-1][name] = tensor
        size += nbytes
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
        """Prepare, bucket and publish a state dict as `version` (must exceed the last published version)."""
        if self.latest is not None and version <= self.latest.version:
            raise ValueError(f"weight version {version} is not newer than the last published {self.latest.version}")
        prepared = prepare_state(state, self.mxfp4_experts)
        buckets = bucketize(prepared, self.bucket_bytes)
        nbytes = sum(t.numel() * t.element_size() for t in prepared.values())
        # Replacing `latest` drops the previous handles, which frees their object-store copies.
        self.latest = WeightUpdate(version, self.transport, self.transport.publish(buckets), self.mxfp4_experts, nbytes)
        return self.latest
