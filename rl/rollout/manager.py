"""Spreads a batch of tasks over the rollout workers and gets every trajectory back, whatever fails.

Tasks go out in chunks of `chunk_size`; each chunk has a deadline of `chunk_timeout_s` from dispatch,
enforced here with `ray.wait` (a worker cannot be trusted to time itself out: an env's reset or tool may
block its only thread forever). A chunk ends in one of four ways:

- its trajectories come back: they are recorded, the worker takes the next chunk;
- the worker died (killed, out of memory, crashed in native code): the worker is restarted (a fresh actor
  in the same bundle, the latest weights pushed) and the chunk's tasks are queued again;
- it passed its deadline: the worker is killed and restarted the same way, and the chunk's tasks are
  queued again;
- `run` raised inside the worker (a bug, or an env id the worker's registry does not know).

A chunk of several tasks that did not come back does not say which task was at fault, so its tasks are
queued again one per chunk, at the front. A single task that hangs is then marked failed with a timeout
error, one that raises is marked failed with the error, and one whose worker dies is retried until it
has been attempted `max_attempts` times. Every fault is recorded in `faults` with the tasks it touched.
A task's result is recorded at most once and `run` returns exactly one trajectory per task, in order.

Partial mode (`submit` / `advance`, used by the pipeline with `rollout.partial`) keeps episodes in flight on
the workers across calls: each `advance` is one round in which every worker with episodes starts the ones
newly given to it and plays until one of its episodes ends (or a few decode steps pass), so weights pushed
between rounds reach episodes mid-way. A worker that dies, raises or misses the deadline loses its episodes:
it is restarted and they are played again from the start, each task at most `max_attempts` times before it
comes back marked failed. Unlike chunks, a round does not isolate the task at fault: the worker's other
episodes are played again with it (and fail with it after max_attempts rounds that raise).

With the collective weight transport (`attach_collective`) a push is one round of broadcasts between the learner
ranks and every worker: a worker restarted since the last push has caught up through the object store and the
groups are formed anew first; a worker that dies during a push is restarted and the push made once more.
"""
from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import ray
import torch
from ray.exceptions import RayActorError, RayTaskError

from jointrl.envs.base import parse_env_id
from jointrl.envs.episode import Episode
from jointrl.model.config import ModelConfig
from jointrl.model.tokenizer import JointTokenizer
from jointrl.rl.actor_group import ActorGroup, Placement
from jointrl.rl.rollout.agent import Task
from jointrl.rl.config.rollout import RolloutConfig
from jointrl.rl.rollout.worker import RolloutWorker
from jointrl.rl.trajectory import Trajectory
from jointrl.rl.weight_sync import (
    DEFAULT_BUCKET_BYTES, CollectiveGroup, CollectiveSyncError, CollectiveTransport, WeightSync, WeightTransport,
    WeightUpdate,
)


@dataclass
class Fault:
    """One chunk that did not come back normally."""

    kind: str  # "died" | "timeout" | "error"
    worker: int  # slot of the worker that ran it
    tasks: list[Task]
    detail: str


@dataclass
class _Flight:
    slot: int
    chunk: list[int]  # task indices
    started: float
    deadline: float


@dataclass
class _Batch:
    tasks: list[Task]
    pending: deque[list[int]]
    attempts: list[int]
    done: dict[int, Trajectory] = field(default_factory=dict)


@dataclass
class _Carried:
    task: Task
    slot: int  # the worker playing it
    attempts: int = 0  # times it was started on a worker
    sent: bool = False  # whether the worker playing it has started it
    error: str = ""  # why its last attempt was lost


class RolloutManager:
    """Owns the rollout workers: pushes weights to them, runs batches of tasks on them, restarts them."""

    def __init__(
        self,
        model_config: ModelConfig,
        tokenizer: JointTokenizer,
        rollout: RolloutConfig,
        *,
        n_workers: int | None = None,
        chunk_size: int = 4,
        chunk_timeout_s: float | None = None,
        max_attempts: int = 3,
        placement: Placement | None = None,
        transport: WeightTransport | None = None,
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
        **worker_options,
    ):
        if chunk_size < 1 or max_attempts < 1:
            raise ValueError(f"chunk_size and max_attempts must be >= 1, got {chunk_size} and {max_attempts}")
        self.rollout = rollout
        self.chunk_size = chunk_size
        # The episodes of a chunk play concurrently, so one episode's time limit bounds the chunk.
        self.chunk_timeout_s = chunk_timeout_s if chunk_timeout_s is not None else rollout.episode_timeout_s
        self.max_attempts = max_attempts
        placement = placement or Placement()
        worker_options.setdefault("threads", max(1, int(placement.num_cpus)))
        self.group = ActorGroup(
            RolloutWorker, n_workers or rollout.workers, model_config, tokenizer, rollout,
            placement=placement, **worker_options,
        )
        self.sync = WeightSync(transport, bucket_bytes, mxfp4_experts=rollout.mxfp4_experts)
        self.collective: CollectiveGroup | None = None  # the weight-sync groups, with rollout.weight_transport collective
        self._regroup = False  # a worker was restarted: the next collective push forms a new generation first
        self.faults: list[Fault] = []
        self._dead: set[int] = set()  # slots whose actor died or was killed, restarted before their next use
        self._flights: dict[ray.ObjectRef, _Flight] = {}
        self._carried: dict[int, _Carried] = {}  # partial mode: key -> episode in flight on a worker
        self._next_key = 0

    @property
    def workers(self) -> list:
        """The worker actor handles, by slot."""
        return self.group.actors

    @property
    def restarts(self) -> int:
        """Worker restarts so far."""
        return sum(self.group.restarts)

    def in_flight(self) -> dict[int, tuple[list[int], float]]:
        """Slot -> (task indices, monotonic dispatch time) of the chunks running now."""
        return {f.slot: (list(f.chunk), f.started) for f in list(self._flights.values())}

    def push_weights(self, weights: Mapping[str, torch.Tensor] | WeightUpdate, version: int) -> WeightUpdate:
        """Have every worker load `version` (dead workers are restarted with it).

        weights is a state dict held here, which this manager publishes, or an update the learner ranks already
        published (LearnerGroup.publish), of which only the handles passed through this process.
        """
        if isinstance(weights, WeightUpdate):
            if weights.version != version:
                raise ValueError(f"update of version {weights.version} pushed as version {version}")
            update = self.sync.adopt(weights)
        else:
            update = self.sync.publish(weights, version)
        if isinstance(update.transport, CollectiveTransport):
            return self._push_collective(update)
        live = [slot for slot in range(len(self.workers)) if slot not in self._dead]
        acks = {slot: self.workers[slot].load_weights.remote(update) for slot in live}
        for slot, ack in acks.items():
            try:
                ray.get(ack)
            except RayActorError:
                self._dead.add(slot)
        for slot in sorted(self._dead):
            self._restart(slot)
        return update

    def attach_collective(self, group: CollectiveGroup) -> CollectiveTransport:
        """Use the collective transport: form the weight-sync groups with the learner ranks (group's senders)."""
        self.collective = group
        return group.form(self.workers)

    def _push_collective(self, update: WeightUpdate) -> WeightUpdate:
        """Deliver over the weight-sync groups; a worker that died is restarted and the push is made once more."""
        if self.collective is None:
            raise ValueError(f"weights version {update.version} came through the collective transport, but this "
                             "manager has no weight-sync group: call attach_collective first")
        for slot in sorted(self._dead):
            self._restart(slot)
        for _ in range(2):
            if self._regroup or self.collective.transport is None:
                self.collective.form(self.workers)
                self._regroup = False
            # The update names the generation its broadcasts run in: the current one.
            update = replace(update, transport=self.collective.transport)
            try:
                dead = self.collective.deliver(update, self.workers)
            except Exception:
                self._regroup = True  # a failed broadcast may leave the groups unusable
                raise
            if not dead:
                self.sync.latest = update
                return update
            self._dead.update(dead)
            for slot in dead:
                self._restart(slot)
        raise CollectiveSyncError(f"weights version {update.version}: rollout workers {dead} died in two collective "
                                  "pushes in a row")

    def run(self, tasks: list[Task], seed: int = 0, temperature: float | None = None) -> list[Trajectory]:
        """Play every task on the workers; exactly one trajectory per task, in task order.

        `temperature` overrides the recipe's sampling temperature for this batch (evaluation).
        """
        if self.sync.latest is None:
            raise RuntimeError("push weights to the rollout workers (push_weights) before running tasks")
        for task in tasks:
            parse_env_id(task.env_id)  # a malformed id fails here, naming it, not inside a worker
        order = list(range(len(tasks)))
        batch = _Batch(
            tasks=list(tasks),
            pending=deque(order[i : i + self.chunk_size] for i in range(0, len(order), self.chunk_size)),
            attempts=[0] * len(tasks),
        )
        idle = deque(range(len(self.workers)))
        self._flights = {}
        while batch.pending or self._flights:
            while idle and batch.pending:
                self._dispatch(idle.popleft(), batch.pending.popleft(), batch, seed, temperature)
            nearest = min(f.deadline for f in self._flights.values())
            ready, _ = ray.wait(list(self._flights), num_returns=1, timeout=max(0.0, nearest - time.monotonic()))
            for ref in ready:
                flight = self._flights.pop(ref)
                idle.append(flight.slot)
                self._collect(ref, flight, batch)
            now = time.monotonic()
            for ref, flight in list(self._flights.items()):
                if flight.deadline <= now:
                    self._flights.pop(ref)
                    idle.append(flight.slot)
                    self._on_timeout(flight, batch)
        assert sorted(batch.done) == order, "every task has exactly one trajectory"
        return [batch.done[i] for i in order]

    def submit(self, tasks: list[Task]) -> list[int]:
        """Partial mode: give tasks to the workers with the fewest episodes in flight; returns their keys.

        They start at the next `advance`, which returns each key's trajectory exactly once.
        """
        for task in tasks:
            parse_env_id(task.env_id)  # a malformed id fails here, naming it, not inside a worker
            if task.agent is not None:
                raise ValueError(f"partial rollouts cannot play black-box agent tasks ({task.env_id}, agent {task.agent})")
        load = [0] * len(self.workers)
        for carried in self._carried.values():
            load[carried.slot] += 1
        keys = []
        for task in tasks:
            slot = min(range(len(load)), key=load.__getitem__)
            load[slot] += 1
            self._carried[self._next_key] = _Carried(task, slot)
            keys.append(self._next_key)
            self._next_key += 1
        return keys

    def carried(self) -> dict[int, Task]:
        """Partial mode: key -> task of every episode submitted and not yet returned by `advance`."""
        return {key: c.task for key, c in self._carried.items()}

    def advance(self, seed: int = 0, max_steps: int = 16) -> list[tuple[int, Trajectory]]:
        """Partial mode: one round on every worker with episodes; the (key, trajectory) pairs that ended in it."""
        if self.sync.latest is None:
            raise RuntimeError("push weights to the rollout workers (push_weights) before running tasks")
        ended: list[tuple[int, Trajectory]] = []
        for key, c in list(self._carried.items()):
            if not c.sent and c.attempts >= self.max_attempts:
                del self._carried[key]
                ended.append((key, _failed(c.task, f"{c.error} (in each of {c.attempts} attempts)", self.rollout)))
        calls: dict[ray.ObjectRef, int] = {}
        for slot in sorted({c.slot for c in self._carried.values()}):
            if slot in self._dead:
                self._restart(slot)
            items = []
            for key, c in self._carried.items():
                if c.slot == slot and not c.sent:
                    c.sent, c.attempts = True, c.attempts + 1
                    items.append((key, c.task))
            calls[self.workers[slot].advance.remote(items, seed, max_steps)] = slot
        if not calls:
            return ended
        ready, late = ray.wait(list(calls), num_returns=len(calls), timeout=self.chunk_timeout_s)
        for ref in ready:
            slot = calls[ref]
            try:
                pairs = ray.get(ref)
            except (RayActorError, RayTaskError) as err:
                cause = err.cause if isinstance(err, RayTaskError) and err.cause is not None else err
                self._lose(slot, "died" if isinstance(err, RayActorError) else "error", f"{type(cause).__name__}: {cause}")
                continue
            for key, trajectory in pairs:
                assert self._carried[key].slot == slot, "a worker returns only its own episodes"
                del self._carried[key]
                ended.append((key, trajectory))
        for ref in late:
            ray.kill(self.workers[calls[ref]], no_restart=True)
            self._lose(calls[ref], "timeout", f"a round did not finish within chunk_timeout_s={self.chunk_timeout_s:g}s")
        return ended

    def _lose(self, slot: int, kind: str, detail: str) -> None:
        """Partial mode: the slot's worker lost its episodes; the next round restarts it and plays them again."""
        self._dead.add(slot)
        mine = [c for c in self._carried.values() if c.slot == slot]
        self.faults.append(Fault(kind, slot, [c.task for c in mine], detail))
        for c in mine:
            c.sent, c.error = False, f"{kind}: {detail}"

    def shutdown(self) -> None:
        """Leave the weight-sync groups, kill the workers and release their resources."""
        try:
            if self.collective is not None:
                self.collective.close(self.workers)
        finally:
            self.group.shutdown()

    def _dispatch(self, slot: int, chunk: list[int], batch: _Batch, seed: int, temperature: float | None = None) -> None:
        if slot in self._dead:
            self._restart(slot)
        for i in chunk:
            batch.attempts[i] += 1
        # A seed per (run seed, chunk, attempt): reproducible, and different for every chunk and retry.
        chunk_seed = random.Random(f"{seed}:{chunk}:{batch.attempts[chunk[0]]}").getrandbits(63)
        ref = self.workers[slot].run.remote([batch.tasks[i] for i in chunk], chunk_seed, temperature)
        now = time.monotonic()
        self._flights[ref] = _Flight(slot, chunk, now, now + self.chunk_timeout_s)

    def _collect(self, ref: ray.ObjectRef, flight: _Flight, batch: _Batch) -> None:
        try:
            trajectories = ray.get(ref)
        except RayActorError as err:
            self._dead.add(flight.slot)
            self._fault("died", flight, batch, f"{type(err).__name__}: {err}")
            self._requeue(flight.chunk, batch, "died", "its rollout worker died")
            return
        except RayTaskError as err:
            cause = err.cause if err.cause is not None else err
            detail = f"rollout worker raised {type(cause).__name__}: {cause}"
            self._fault("error", flight, batch, detail)
            self._requeue(flight.chunk, batch, "error", detail)
            return
        assert len(trajectories) == len(flight.chunk), "a worker returns one trajectory per task"
        for i, trajectory in zip(flight.chunk, trajectories):
            task, episode = batch.tasks[i], trajectory.episode
            assert (episode.env_id, episode.seed, episode.group_id) == (task.env_id, task.seed, task.group_id)
            assert i not in batch.done, "a task is in at most one chunk at a time"
            batch.done[i] = trajectory

    def _on_timeout(self, flight: _Flight, batch: _Batch) -> None:
        # The worker's thread may be blocked for good; only a new process gets the slot back.
        ray.kill(self.workers[flight.slot], no_restart=True)
        self._dead.add(flight.slot)
        detail = f"did not finish within chunk_timeout_s={self.chunk_timeout_s:g}s"
        self._fault("timeout", flight, batch, detail)
        self._requeue(flight.chunk, batch, "timeout", detail)

    def _requeue(self, chunk: list[int], batch: _Batch, kind: str, detail: str) -> None:
        if len(chunk) > 1:
            # Which task was at fault is unknown: try each alone, before the rest of the batch.
            batch.pending.extendleft([i] for i in reversed(chunk))
            return
        (i,) = chunk
        if kind == "died" and batch.attempts[i] < self.max_attempts:
            batch.pending.appendleft(chunk)
            return
        if kind == "died":
            detail = f"its rollout worker died in each of {batch.attempts[i]} attempts"
        batch.done[i] = _failed(batch.tasks[i], f"{kind}: {detail}", self.rollout)

    def _fault(self, kind: str, flight: _Flight, batch: _Batch, detail: str) -> None:
        self.faults.append(Fault(kind, flight.slot, [batch.tasks[i] for i in flight.chunk], detail))

    def _restart(self, slot: int) -> None:
        # A fresh actor holds no episodes: partial mode starts the slot's ones again at its next round.
        for c in self._carried.values():
            if c.slot == slot:
                c.sent, c.error = False, c.error or "died: its rollout worker was restarted"
        actor = self.group.restart(slot)
        if self.collective is not None:
            self._regroup = True  # the fresh actor is in no group yet
        if self.sync.latest is not None:
            # A collective update reaches a lone worker through the object store, from the ranks' staged buffers.
            ray.get(actor.load_weights.remote(self.sync.latest.transport.alone(self.sync.latest)))
        self._dead.discard(slot)


def _failed(task: Task, error: str, rollout: RolloutConfig) -> Trajectory:
    """The trajectory of a task no worker could play: no tokens, failed, with the reason."""
    parts = parse_env_id(task.env_id)
    episode = Episode(
        env_id=task.env_id, domain=parts["domain"], family=parts["family"], difficulty=parts["difficulty"],
        seed=task.seed, tier=task.tier, group_id=task.group_id,
        think_budget=getattr(rollout.tiers, task.tier, None), failed=True, error=error,
    )
    empty = {dtype: torch.zeros(0, dtype=dtype) for dtype in (torch.long, torch.float)}
    return Trajectory(episode, empty[torch.long], empty[torch.float], empty[torch.float], empty[torch.long])
