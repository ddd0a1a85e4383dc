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
exactly once (tests/rl/test_weight_sync.py).

Two transports (`rollout.weight_transport`):

- `ObjectStoreTransport` puts each bucket in the Ray object store once and every worker gets it from there.
  Publishing and loading are decoupled: the pipeline may push a version long after it was published, or skip it.
- `CollectiveTransport` broadcasts with torch.distributed. Learner rank r and every worker form one group
  (ranks: the sender 0, worker w 1 + w), one group per rank, so no rank receives another's share. The groups
  are built standalone (a TCPStore the driver hosts, backend objects constructed directly: gloo on CPU, NCCL
  when every member has CUDA), never through init_process_group, whose default group DeepSpeed owns in the
  ranks. Publishing *stages* each bucket on its rank, flattened into one buffer per dtype, and returns only
  metadata (`BucketLayout`: source, version, names, shapes, dtypes, offsets). Pushing (`CollectiveGroup.deliver`)
  then starts every rank's broadcasts (async works, waited before the call returns, so staged buffers are never
  freed under a pending op) and every worker's load, which receives bucket by bucket into buffers of those
  shapes. Every member walks the same bucket list, so the broadcasts match. The process groups time out
  (`timeout_s`); a member that does not join or finish is named in the error, and a worker that refuses an
  update still receives the rest of it, so the others are not left waiting. A worker restarted between pushes
  catches up through the object store (`alone`: the ranks put their staged buffers there) and joins a new
  generation of the groups at the next push.
"""
from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import ray
import torch
import torch.distributed as dist
from ray.exceptions import RayActorError

from jointrl.model.checkpoint import split_by_bytes
from jointrl.model.mxfp4 import mxfp4_state_dict

DEFAULT_BUCKET_BYTES = 64 * 1024**2
# A whole sync must finish within this (the last rank's broadcasts wait while the workers receive the others').
DEFAULT_SYNC_TIMEOUT_S = 600.0
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
    """Moves buckets from the senders to every worker: handles travel with the update, fetch runs on each worker."""

    @abstractmethod
    def fetch(self, handles: list[Any]) -> Iterator[Bucket]:
        """On a worker: the published buckets, one at a time, in order."""

    def abandon(self, rest: Iterator[Bucket]) -> None:
        """On a worker that stops loading part-way: what the rest of the update needs (nothing by default)."""

    def alone(self, update: WeightUpdate) -> WeightUpdate:
        """The update as one worker outside any group can load it (a restarted worker): itself by default."""
        return update


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


class CollectiveSyncError(RuntimeError):
    """A collective sync that did not complete: a member did not join or did not finish in time."""


@dataclass(frozen=True)
class BucketLayout:
    """Where one staged bucket's tensors lie in its flat buffers: what a worker needs to receive it, without data."""

    src: int  # the sender (learner rank) whose group broadcasts it
    version: int
    tensors: tuple[tuple[str, tuple[int, ...], int, int], ...]  # (key, shape, buffer index, element offset)
    buffers: tuple[tuple[torch.dtype, int], ...]  # (dtype, numel) of each flat buffer, one per dtype

    @property
    def nbytes(self) -> int:
        return sum(n * torch.empty(0, dtype=dtype).element_size() for dtype, n in self.buffers)


def flatten_bucket(bucket: Bucket, src: int, version: int, device: torch.device) -> tuple[BucketLayout, list[torch.Tensor]]:
    """The bucket as one contiguous buffer per dtype (first-seen order) on device, and its layout."""
    dtypes = list(dict.fromkeys(t.dtype for t in bucket.values()))
    sizes = [0] * len(dtypes)
    tensors = []
    for key, t in bucket.items():
        i = dtypes.index(t.dtype)
        tensors.append((key, tuple(t.shape), i, sizes[i]))
        sizes[i] += t.numel()
    buffers = [torch.empty(n, dtype=dtype, device=device) for dtype, n in zip(dtypes, sizes)]  # [numel]
    for (key, _, i, offset), t in zip(tensors, bucket.values()):
        buffers[i][offset:offset + t.numel()].copy_(t.reshape(-1))
    return BucketLayout(src, version, tuple(tensors), tuple(zip(dtypes, sizes))), buffers


def unflatten_bucket(layout: BucketLayout, buffers: list[torch.Tensor]) -> Bucket:
    """The bucket's tensors as views into its flat buffers."""
    out = {}
    for key, shape, i, offset in layout.tensors:
        numel = 1
        for size in shape:
            numel *= size
        out[key] = buffers[i][offset:offset + numel].view(shape)
    return out


@dataclass(frozen=True)
class CollectiveSpec:
    """One generation of the weight-sync groups: members 0..senders-1 are learner ranks, the rest workers by slot."""

    address: str  # the driver's TCPStore
    port: int
    generation: int  # bumped whenever the members change (a restarted worker)
    senders: int
    workers: int
    backend: str  # "gloo" or "nccl"
    timeout_s: float

    def name(self, member: int) -> str:
        """Who a member index is, for errors."""
        if member < self.senders:
            return f"learner rank {member}"
        return f"rollout worker {member - self.senders}"

    def key(self, what: str, member: int) -> str:
        """A store key this generation's member sets when it has done `what`."""
        return f"weight_sync/{self.generation}/{what}/{member}"


class _Member:
    """This process's part in the weight-sync groups (one per process), and a sender's staged versions."""

    def __init__(self, spec: CollectiveSpec, member: int):
        self.spec, self.member = spec, member
        timeout = timedelta(seconds=spec.timeout_s)
        self.store = dist.TCPStore(spec.address, spec.port, is_master=False, timeout=timeout)
        self.store.set(spec.key("joined", member), "1")
        self.device = torch.device("cuda", torch.cuda.current_device()) if spec.backend == "nccl" else torch.device("cpu")
        # A sender is in its own group only; a worker in every sender's group (its rank there: 1 + slot).
        srcs = [member] if member < spec.senders else list(range(spec.senders))
        rank = 0 if member < spec.senders else 1 + member - spec.senders
        self.groups = {}
        for src in srcs:
            store = dist.PrefixStore(f"weight_sync/{spec.generation}/src{src}", self.store)
            self.groups[src] = _process_group(store, rank, 1 + spec.workers, spec.backend, timeout)

    def broadcast(self, src: int, buffer: torch.Tensor):
        """Start a broadcast of buffer from the sender of group src; returns the work (async)."""
        options = dist.BroadcastOptions()
        options.rootRank, options.timeout = 0, timedelta(seconds=self.spec.timeout_s)
        return self.groups[src].broadcast([buffer], options)

    def done(self, version: int) -> None:
        self.store.set(self.spec.key(f"done{version}", self.member), "1")


def _process_group(store, rank: int, size: int, backend: str, timeout: timedelta):
    """A process group backend built directly over store (no default group involved)."""
    if backend == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        return dist.ProcessGroupNCCL(store, rank, size, options)
    return dist.ProcessGroupGloo(store, rank, size, timeout)


_MEMBER: _Member | None = None
_STAGED: dict[int, list[tuple[BucketLayout, list[torch.Tensor]]]] = {}  # version -> staged buckets (senders)
_LAST_SENT = -1  # the last version this sender sent
# A learner rank stages on its training thread and sends on its weights thread.
_LOCK = threading.Lock()


def join_weight_group(spec: CollectiveSpec, member: int) -> None:
    """In a member process: leave the previous generation's groups and join this one (blocks until all join)."""
    global _MEMBER
    _MEMBER = None
    _MEMBER = _Member(spec, member)


def leave_weight_group() -> None:
    """In a member process: drop the groups and any staged buffers."""
    global _MEMBER
    _MEMBER = None
    with _LOCK:
        _STAGED.clear()


def _joined(generation: int | None = None) -> _Member:
    if _MEMBER is None or (generation is not None and _MEMBER.spec.generation != generation):
        have = "none" if _MEMBER is None else f"generation {_MEMBER.spec.generation}"
        raise CollectiveSyncError(f"this process is not in weight-sync group generation {generation} (it is in {have})")
    return _MEMBER


def stage_weights(version: int, buckets: list[Bucket]) -> list[BucketLayout]:
    """On a sender: flatten its buckets for `version` and keep them until sent; their layouts are the handles."""
    member = _joined()
    staged = [flatten_bucket(bucket, member.member, version, member.device) for bucket in buckets]
    with _LOCK:
        _STAGED[version] = staged
        # Kept: the last version sent (a restarted worker catches up from it) and the two newest (the pipeline
        # may still push the older one while the trainer has published the next).
        newest = sorted(_STAGED)[-2:]
        for old in [v for v in _STAGED if v not in newest and v != _LAST_SENT]:
            del _STAGED[old]
    return [layout for layout, _ in staged]


def _staged(version: int, who: str) -> list[tuple[BucketLayout, list[torch.Tensor]]]:
    with _LOCK:
        staged = _STAGED.get(version)
        if staged is None:
            raise CollectiveSyncError(f"weights version {version} is not staged on {who} (staged: {sorted(_STAGED)})")
        return staged


def send_weights(version: int, generation: int) -> int:
    """On a sender: broadcast every staged bucket of `version` to the workers; returns the bytes sent."""
    global _LAST_SENT
    member = _joined(generation)
    staged = _staged(version, member.spec.name(member.member))
    # Issued at once, waited together: the backend runs them in order while the workers receive bucket by bucket.
    works = [member.broadcast(member.member, buffer) for _, buffers in staged for buffer in buffers]
    for work in works:
        work.wait()
    member.done(version)
    with _LOCK:
        _LAST_SENT = version
        for old in [v for v in _STAGED if v < version]:
            del _STAGED[old]
    return sum(layout.nbytes for layout, _ in staged)


def serve_weights(version: int) -> list[ray.ObjectRef]:
    """On a sender: its staged buckets of `version` put in the object store (for a worker outside the groups)."""
    staged = _staged(version, "this learner rank")
    return ObjectStoreTransport().publish([
        {key: t.cpu() for key, t in unflatten_bucket(layout, buffers).items()} for layout, buffers in staged
    ])


@dataclass(frozen=True)
class CollectiveTransport(WeightTransport):
    """Broadcasts over the weight-sync groups; handles are BucketLayouts. Picklable: the groups live in the members."""

    spec: CollectiveSpec
    senders: tuple  # the learner rank actors, by sender index

    def fetch(self, handles: list[BucketLayout]) -> Iterator[Bucket]:
        """On a worker: receive each bucket from its sender's group into fresh buffers, one bucket at a time."""
        member = _joined(self.spec.generation)
        for layout in handles:
            buffers = [torch.empty(n, dtype=dtype, device=member.device) for dtype, n in layout.buffers]  # [numel]
            for work in [member.broadcast(layout.src, buffer) for buffer in buffers]:
                work.wait()
            yield {key: t.cpu() for key, t in unflatten_bucket(layout, buffers).items()}
        if handles:
            member.done(handles[0].version)

    def abandon(self, rest: Iterator[Bucket]) -> None:
        """Receive and drop the remaining buckets: every member must enter every broadcast, or the others wait."""
        for _ in rest:
            pass

    def alone(self, update: WeightUpdate) -> WeightUpdate:
        """The same version through the object store, put there by the senders from their staged buffers."""
        handles = [h for refs in ray.get([s.serve_weights.remote(update.version) for s in self.senders]) for h in refs]
        return replace(update, transport=ObjectStoreTransport(), handles=handles)


class CollectiveGroup:
    """Driver side of the collective transport: hosts the store, forms the groups, runs each push."""

    def __init__(self, senders: list, timeout_s: float = DEFAULT_SYNC_TIMEOUT_S):
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.senders, self.timeout_s = list(senders), timeout_s
        self.address = ray.util.get_node_ip_address()
        # Port 0: the OS picks a free one, with no window for another process to take it.
        self.store = dist.TCPStore(self.address, 0, is_master=True, wait_for_workers=False,
                                   timeout=timedelta(seconds=timeout_s))
        self.generation = -1
        self.transport: CollectiveTransport | None = None
        self.workers: list = []

    def form(self, workers: list) -> CollectiveTransport:
        """A new generation over the senders and these workers (each leaves its last); waits until all joined."""
        members = self.senders + list(workers)
        self.generation += 1
        self.transport, self.workers = None, list(workers)
        spec = CollectiveSpec(self.address, self.store.port, self.generation, len(self.senders), len(workers), "gloo",
                              self.timeout_s)
        devices = [m.weight_device.remote() for m in members]
        ready, _ = ray.wait(devices, num_returns=len(devices), timeout=self.timeout_s)
        if len(ready) < len(devices):
            self._not_formed(spec, [i for i, ref in enumerate(devices) if ref not in ready], "it did not answer")
        if all(d == "cuda" for d in ray.get(devices)):
            spec = replace(spec, backend="nccl")
        failure, _ = _wait_all([m.join_weight_group.remote(spec, i) for i, m in enumerate(members)], self.timeout_s)
        if failure is not None:
            self._not_formed(spec, [i for i in range(len(members)) if not self.store.check([spec.key("joined", i)])],
                             failure)
        self.transport = CollectiveTransport(spec, tuple(self.senders))
        return self.transport

    def _not_formed(self, spec: CollectiveSpec, missing: list[int], why: str):
        names = ", ".join(spec.name(i) for i in missing) or "every member"
        raise CollectiveSyncError(f"weight-sync group generation {spec.generation} did not form within "
                                  f"{self.timeout_s:g}s: {names} did not join ({why})")

    def deliver(self, update: WeightUpdate, workers: list) -> list[int]:
        """Every sender broadcasts `update` while every worker loads it; the slots of workers that died (else [])."""
        spec = update.transport.spec
        sends = [s.send_weights.remote(update.version, spec.generation) for s in self.senders]
        loads = [w.load_weights.remote(update) for w in workers]
        failure, errors = _wait_all(sends + loads, self.timeout_s)
        dead = [slot for slot, ref in enumerate(loads) if isinstance(errors.get(ref), RayActorError)]
        if dead or failure is None:
            return dead
        n = spec.senders + spec.workers
        missing = [spec.name(i) for i in range(n) if not self.store.check([spec.key(f"done{update.version}", i)])]
        if not missing:
            raise next(iter(errors.values()))  # every broadcast completed: a worker refused the update itself
        raise CollectiveSyncError(f"weights version {update.version}: {', '.join(missing)} did not finish the "
                                  f"collective sync within {self.timeout_s:g}s ({failure})")

    def close(self, workers: list) -> None:
        """Every member leaves the groups; the store goes with this object."""
        # Best effort, and short: the actors are killed next anyway.
        _wait_all([m.leave_weight_group.remote() for m in self.senders + list(workers)], min(self.timeout_s, 20.0))
        self.transport = None


def _wait_all(refs: list, timeout_s: float) -> tuple[str | None, dict]:
    """Wait for refs (a little past the groups' own timeout); (first failure as text or None, ref -> exception)."""
    ready, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout_s + 10)
    errors = {}
    for ref in ready:
        try:
            ray.get(ref)
        except Exception as err:  # noqa: BLE001 - collected, then reported with who did not finish
            errors[ref] = err
    if errors:
        first = next(iter(errors.values()))
        cause = getattr(first, "cause", None) or first
        return f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}", errors
    if pending:
        return f"{len(pending)} calls still running after {timeout_s + 10:g}s", errors
    return None, errors
