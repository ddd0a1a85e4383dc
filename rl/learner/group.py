"""The learner as the trainer sees it: R LearnerRank actors behind one train_step / state_dict / save / load.

The driver turns trajectories into samples, splits them into the step's mini-batches (one optimizer update
each), computes each mini-batch's loss totals over all its samples, and hands every rank its share with
those totals; ranks return additive metrics, which are summed over ranks and averaged over updates.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import ray
import torch

from jointrl.rl.actor_group import ActorGroup, Placement
from jointrl.rl.config.run import RunConfig
from jointrl.rl.learner.rank import LearnerRank
from jointrl.rl.learner.batch import samples_from_trajectories, split_for_ranks, split_minibatches, totals
from jointrl.rl.learner.forward import combine_metrics
from jointrl.rl.weight_sync import DEFAULT_BUCKET_BYTES, CollectiveTransport, ObjectStoreTransport, WeightUpdate
from jointrl.rl.trajectory import Trajectory


def default_placement() -> Placement:
    """One CPU per rank, and one GPU per rank when this machine has CUDA."""
    return Placement(num_cpus=1.0, num_gpus=1.0 if torch.cuda.is_available() else 0.0)


def with_accelerator(placement: Placement) -> Placement:
    """placement with DS_ACCELERATOR in its env_vars (DeepSpeed reads it when imported) unless already set."""
    runtime_env = dict(placement.runtime_env or {})
    env_vars = dict(runtime_env.get("env_vars", {}))
    env_vars.setdefault("DS_ACCELERATOR", "cuda" if placement.num_gpus > 0 else "cpu")
    runtime_env["env_vars"] = env_vars
    return replace(placement, runtime_env=runtime_env)


def mean_over_updates(reports: list[dict[str, float]]) -> dict[str, float]:
    """Per-update metrics in one dict: the mean over updates, the max for keys ending "_max"."""
    out = combine_metrics(reports)
    return {k: v if k.endswith("_max") else v / len(reports) for k, v in out.items()}


class LearnerGroup:
    """cfg.learner.ranks learner ranks with DeepSpeed ZeRO and expert parallelism, started from init_state."""

    def __init__(
        self,
        cfg: RunConfig,
        init_state: Mapping[str, torch.Tensor] | str | Path,
        *,
        placement: Placement | None = None,
        pad_id: int = 0,
    ):
        self.cfg = cfg
        self.n_ranks = cfg.learner.ranks
        placement = with_accelerator(placement or default_placement())
        threads = max(1, int(placement.num_cpus))
        self.group = ActorGroup(LearnerRank, self.n_ranks, cfg, threads, placement=placement)
        try:
            address, port = ray.get(self.group.actors[0].rendezvous.remote())
            # A checkpoint directory is read by each rank; only its path passes through this process.
            state = str(init_state) if isinstance(init_state, (str, Path)) else ray.put(
                {k: v.detach().cpu() for k, v in init_state.items()})
            ray.get([
                actor.setup.remote(rank, self.n_ranks, address, port, state, pad_id)
                for rank, actor in enumerate(self.group.actors)
            ])
        except Exception:
            self.group.shutdown()
            raise

    def train_step(
        self, trajectories: list[Trajectory], advantages: list[float], keep: list[bool] | None = None
    ) -> dict[str, float]:
        """One RL step (cfg.learner.updates_per_step optimizer updates) on the trajectories; the step's metrics."""
        samples = samples_from_trajectories(trajectories, advantages, keep)
        updates = self.cfg.learner.updates_per_step
        if len(samples) < updates:
            raise ValueError(
                f"{len(samples)} trainable trajectories cannot fill updates_per_step={updates} mini-batches"
            )
        minibatches = split_minibatches(samples, updates)
        shares = [split_for_ranks(mb, self.n_ranks) for mb in minibatches]
        budget = self.cfg.algorithm.loss_token_budget or self.cfg.rollout.max_new_tokens_per_episode
        mb_totals = [totals(mb, token_budget=budget) for mb in minibatches]
        work = [[(shares[m][r], mb_totals[m]) for m in range(updates)] for r in range(self.n_ranks)]

        start = time.perf_counter()
        reports = ray.get([actor.train_step.remote(work[r]) for r, actor in enumerate(self.group.actors)])
        elapsed = time.perf_counter() - start

        # reports[rank][update]; additive metrics sum over ranks, then average over updates.
        per_update = [combine_metrics([reports[r][m]["metrics"] for r in range(self.n_ranks)]) for m in range(updates)]
        metrics = mean_over_updates(per_update)
        first = reports[0]
        tokens = sum(t.positions for t in mb_totals)
        metrics.update({
            "learner/grad_norm": sum(u["grad_norm"] for u in first) / updates,
            "learner/lr": first[-1]["lr"],
            "learner/skipped": sum(float(u["skipped"]) for u in first) / updates,
            "learner/tokens": float(tokens),
            "perf/learner_s": elapsed,
            "perf/learner_tokens_per_s": tokens / elapsed if elapsed > 0 else 0.0,
        })
        return metrics

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The full policy state (EP shards gathered, plain Transformer keys, CPU): what workers load."""
        # Only the first EP group needs to gather; the others hold identical replicas.
        refs = [actor.full_state.remote() for actor in self.group.actors[: self.cfg.learner.ep_size]]
        return ray.get(refs)[0]

    def publish(
        self, version: int, bucket_bytes: int = DEFAULT_BUCKET_BYTES, mxfp4_experts: bool = False,
        transport: CollectiveTransport | None = None,
    ) -> WeightUpdate:
        """Every rank publishes its share of the policy; this process gets only handles.

        transport None: the object store (handles are object refs). A CollectiveTransport: the ranks stage their
        buckets and the handles are their layouts; the bytes move when the update is pushed (CollectiveGroup.deliver).
        """
        staged = version if transport is not None else None
        replies = ray.get(self.group.call("publish_shard", bucket_bytes, mxfp4_experts, staged))
        handles = [handle for rank_handles, _ in replies for handle in rank_handles]
        return WeightUpdate(version, transport or ObjectStoreTransport(), handles, mxfp4_experts, sum(n for _, n in replies))

    @property
    def senders(self) -> list:
        """The rank actors, which send the weights in the collective transport."""
        return self.group.actors

    def export(self, directory: str | Path, tokenizer) -> Path:
        """Rank 0 writes the policy as a checkpoint at directory (the experts gathered there, not here)."""
        refs = [actor.export.remote(str(directory), tokenizer) for actor in self.group.actors[: self.cfg.learner.ep_size]]
        return Path(ray.get(refs)[0])

    def save(self, directory: str | Path) -> None:
        """Every rank writes its own shard into directory (atomic per file)."""
        Path(directory).mkdir(parents=True, exist_ok=True)
        ray.get(self.group.call("save", str(directory)))

    def load(self, directory: str | Path) -> None:
        """Restore every rank from the shards save wrote (same ranks and ep_size)."""
        ray.get(self.group.call("load", str(directory)))

    def shutdown(self) -> None:
        """Leave the process group on every rank and release the actors."""
        if not self.group.actors:
            return
        try:
            ray.get(self.group.call("close"), timeout=60)
        finally:
            self.group.shutdown()
