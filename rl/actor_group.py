"""A group of identical Ray actors placed together (rollout workers, learner ranks), and the job's Ray session.

The group reserves one placement-group bundle per actor (CPU and GPU share of one member) with a Ray
strategy (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD), starts actor i in bundle i, and can replace the
actor of one slot with a fresh one in the same bundle, which is how a dead or hung member is restarted
without giving up its reserved resources.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
# Ray names its unix sockets under the temp dir (`session_<date>_<pid>/sockets/plasma_store`, about 62
# characters) and a socket path may not pass 107: a run directory deeper than this keeps Ray's default.
MAX_RAY_TEMP_DIR = 44
RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


@dataclass(frozen=True)
class Placement:
    """Where and with what the members of a group run."""

    num_cpus: float = 1.0  # CPU share of one member
    num_gpus: float = 0.0  # GPU share of one member
    strategy: str = "PACK"  # how the members' bundles spread over nodes
    runtime_env: dict[str, Any] | None = field(default=None, hash=False)  # e.g. env_vars the members need
    ready_timeout_s: float = 300.0  # reserving resources or starting a member longer than this is an error

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"placement strategy {self.strategy!r} is not one of {STRATEGIES}")
        if self.num_cpus < 0 or self.num_gpus < 0 or self.num_cpus + self.num_gpus == 0:
            raise ValueError(
                f"a member needs a positive CPU or GPU share, got num_cpus={self.num_cpus}, num_gpus={self.num_gpus}"
            )

    def bundle(self) -> dict[str, float]:
        """The resources reserved for one member (Ray refuses zero-valued entries)."""
        return {k: v for k, v in (("CPU", self.num_cpus), ("GPU", self.num_gpus)) if v > 0}


class ActorGroup:
    """N actors of one class, built with the same arguments, one per reserved bundle; restartable by slot."""

    def __init__(self, cls: type, n: int, *args, placement: Placement | None = None, **kwargs):
        if n < 1:
            raise ValueError(f"an actor group needs at least one member, got n={n}")
        if not ray.is_initialized():
            raise RuntimeError(f"start Ray (ray.init) before creating a group of {cls.__name__} actors")
        self.placement = placement or Placement()
        self.name = cls.__name__
        # A class may name Ray actor options it needs (LearnerRank: a concurrency group for weight sends).
        options = getattr(cls, "RAY_OPTIONS", None)
        self._remote = ray.remote(**options)(cls) if options else ray.remote(cls)
        self._args, self._kwargs = args, kwargs
        self._pg = placement_group([self.placement.bundle()] * n, strategy=self.placement.strategy)
        ready, _ = ray.wait([self._pg.ready()], timeout=self.placement.ready_timeout_s)
        if not ready:
            remove_placement_group(self._pg)
            raise RuntimeError(
                f"could not reserve {n} x {self.placement.bundle()} ({self.placement.strategy}) for {self.name} "
                f"within {self.placement.ready_timeout_s:g}s; the cluster has {ray.cluster_resources()}"
            )
        self.actors = [self._spawn(i) for i in range(n)]
        self.restarts = [0] * n
        self.wait_ready()

    def __len__(self) -> int:
        return len(self.actors)

    def _spawn(self, slot: int):
        options = dict(
            num_cpus=self.placement.num_cpus,
            num_gpus=self.placement.num_gpus,
            # A member is restarted by the group (fresh state pushed by its owner), never silently by Ray.
            max_restarts=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(self._pg, placement_group_bundle_index=slot),
        )
        if self.placement.runtime_env is not None:
            options["runtime_env"] = self.placement.runtime_env
        return self._remote.options(**options).remote(*self._args, **self._kwargs)

    def wait_ready(self, slots: list[int] | None = None) -> None:
        """Block until the given members (default all) have finished their constructors."""
        slots = list(range(len(self.actors))) if slots is None else slots
        # __ray_ready__ is the no-op method Ray gives every actor; it runs once the constructor returned.
        refs = [self.actors[i].__ray_ready__.remote() for i in slots]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=self.placement.ready_timeout_s)
        if len(ready) < len(refs):
            raise RuntimeError(f"{self.name} members {slots} did not start within {self.placement.ready_timeout_s:g}s")
        ray.get(ready)  # re-raises a constructor's exception

    def restart(self, slot: int):
        """Kill the member of one slot (dead or alive) and start a fresh one in its bundle; returns the new handle."""
        ray.kill(self.actors[slot], no_restart=True)
        self.actors[slot] = self._spawn(slot)
        self.restarts[slot] += 1
        self.wait_ready([slot])
        return self.actors[slot]

    def call(self, method: str, *args, **kwargs) -> list:
        """Call one method on every member; returns their object refs in slot order."""
        return [getattr(actor, method).remote(*args, **kwargs) for actor in self.actors]

    def shutdown(self) -> None:
        """Kill every member and release the reserved bundles."""
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []
        remove_placement_group(self._pg)


def learner_cpus(cpus: int, free: int, workers: int, ranks: int) -> int:
    """CPUs per learner rank on a machine without GPUs: its share of the cores, but never more than leaves
    each rollout worker one of the `free` CPUs of the Ray session (a session started elsewhere may hold fewer)."""
    wanted = max(1, cpus // ranks)
    return max(1, min(wanted, (free - workers) // ranks))


def ray_temp_dir(run_dir: str | os.PathLike[str] | None) -> str | None:
    """`<run_dir>/ray`, where a local session keeps its logs, or None where that path is too long for Ray's sockets."""
    if run_dir is None:
        return None
    path = Path(run_dir).resolve() / "ray"
    return str(path) if len(str(path)) <= MAX_RAY_TEMP_DIR else None


def start_ray(
    workers: int, ranks: int, gpus: bool, address: str | None = None, run_dir: str | os.PathLike[str] | None = None
) -> Placement | None:
    """Start a local Ray session sized for the job, or join the cluster at `address` (`auto` or host:port, else
    $RAY_ADDRESS), unless one runs; the learner ranks' placement (None: default).

    Without GPUs the ranks share the machine's cores with the rollout workers. Rollout and learning alternate
    in synchronous mode, so the learner may use every core: Ray's CPU counts are logical and shares overlap.
    A local session writes its logs under `<run_dir>/ray` (session_latest/logs) when that path is short enough.
    """
    cpus = os.cpu_count() or 1
    if not ray.is_initialized():
        # Ray keeps token authentication on by default and says so in a warning on every start; the setting is
        # right, the line is noise. (RAY_AUTH_MODE would silence it too, but Ray reads it only when imported.)
        logging.getLogger(RAY_AUTH_LOGGER).setLevel(logging.ERROR)
        quiet = dict(log_to_driver=False, logging_level=logging.WARNING)
        address = address or os.environ.get("RAY_ADDRESS") or None
        if address:
            try:
                ray.init(address=address, **quiet)
            except ConnectionError as err:
                # Ray joins an explicit address with token authentication only when told to before it is imported.
                raise ValueError(f"ray.address={address!r}: {err}; is its head up (`ray start --head`)? A cluster "
                                 "with token authentication needs RAY_AUTH_MODE=token and its token here") from err
        else:
            wanted = ranks * max(1, cpus // ranks) if not gpus else ranks
            temp_dir = ray_temp_dir(run_dir)
            # "local", not None: Ray would otherwise join whatever cluster its address file names, even a head
            # stopped long ago, and refuse the CPU count.
            # Ray starts its workers at niceness 15 by default: beside any other job on the machine the rollout
            # workers and learner ranks, which do all of a run's work, would get almost none of the cores.
            ray.init(address="local", num_cpus=max(cpus, workers + wanted), include_dashboard=False,
                     _system_config={"worker_niceness": 0},
                     **({"_temp_dir": temp_dir} if temp_dir else {}), **quiet)
    if gpus:
        return None
    free = int(ray.available_resources().get("CPU", 0))
    return Placement(num_cpus=learner_cpus(cpus, free, workers, ranks))
