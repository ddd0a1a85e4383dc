"""The rollout worker: one Ray actor holding a policy copy, the tokenizer, an engine and the agent loop.

A worker starts without weights; the first `load_weights` (a WeightUpdate from jointrl.rl.weight_sync)
fills them and sets the version every sampled token reports. With `rollout.mxfp4_experts` the copy holds
its routed experts as MXFP4Experts; an update may carry experts either way and is converted on arrival.
Envs are resolved here, inside the worker process: the registry loads the built-in domains and plugins
by itself, and `env_setup` names extra "module:function" registrations to call first (as a plugin would).
`run` plays a list of Tasks and returns their Trajectories in order; an env that fails comes back as a
trajectory marked failed with its error (the agent loop's contract).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from jointrl.envs import registry
from jointrl.envs.base import TIERS
from jointrl.envs.sandbox import sweep_orphans
from jointrl.model.checkpoint import use_mxfp4_experts_
from jointrl.model.config import ModelConfig
from jointrl.model.generate import SamplingParams
from jointrl.model.mxfp4 import MXFP4Experts, dequantize_state_dict, mxfp4_state_dict
from jointrl.model.tokenizer import JointTokenizer
from jointrl.model.transformer import Transformer
from jointrl.rl.config.rollout import RolloutConfig
from jointrl.rl.rollout.agent import AgentLoop, LoopLimits, Task
from jointrl.rl.rollout.engine import Engine
from jointrl.rl import weight_sync
from jointrl.rl.weight_sync import WeightUpdate, piece_key, split_key, unique_names
from jointrl.rl.trajectory import Trajectory


# The model id black-box agents are served the policy under.
POLICY_NAME = "policy"


def sampling_params(rollout: RolloutConfig) -> SamplingParams:
    """How the workers draw tokens, from the recipe's rollout section."""
    return SamplingParams(temperature=rollout.temperature, top_p=rollout.top_p, top_k=rollout.top_k)


@dataclass
class WorkerInfo:
    """What a worker reports about itself."""

    pid: int
    version: int  # weights version loaded, -1 before the first push
    mxfp4_experts: bool  # every MoE layer holds its routed experts as MXFP4
    env_ids: int  # env ids its registry resolves


class RolloutWorker:
    """Plays tasks with its own policy copy; meant to run as a Ray actor (see jointrl.rl.actor_group)."""

    def __init__(
        self,
        model_config: ModelConfig,
        tokenizer: JointTokenizer,
        rollout: RolloutConfig,
        *,
        max_rows: int = 32,
        record_routing: bool = True,
        env_setup: Sequence[str] = (),
        threads: int | None = None,
    ):
        # A worker restarted after a SIGKILL finds its predecessor's sandbox folders: remove them first.
        sweep_orphans()
        if threads is not None:
            # One process per share of the machine: more intra-op threads than the share only contend.
            torch.set_num_threads(threads)
        for entry in env_setup:
            registry.resolve(entry)()
        # Load the registry now, not inside the first task's time limit.
        self._n_env_ids = len(registry.env_ids())
        model = Transformer(model_config)
        self.mxfp4_experts = rollout.mxfp4_experts
        if self.mxfp4_experts:
            use_mxfp4_experts_(model)
        self.model = model.eval().requires_grad_(False)
        self.engine = Engine(
            self.model, tokenizer.think_start_id, tokenizer.think_end_id, max_rows=max_rows,
            record_routing=record_routing, generator=torch.Generator(), pad_id=tokenizer.pad_id,
        )
        self.engine.version = -1
        self.loop = AgentLoop(self.engine, tokenizer, LoopLimits.from_rollout(rollout), sampling_params(rollout))
        # A tied head shares its storage with the embedding and needs no push.
        self._expected = set(unique_names(self.model.state_dict()))
        self._loaded = False

    def load_weights(self, update: WeightUpdate) -> int:
        """Load a published update bucket by bucket and take on its version; returns the version.

        Whole tensors are loaded as they are; a piece `name[start:stop]` (from one learner rank's share) is copied
        into those rows. Every tensor of the model must arrive, a piece-wise one with rows tiling dim 0 exactly.
        A refused collective update is still received to its end (the transport's abandon), so no sender waits on us.
        """
        buckets = update.buckets()
        try:
            if update.version < self.engine.version:
                raise ValueError(f"weights version {update.version} is older than the loaded version {self.engine.version}")
            # A Ray actor runs one call at a time, so this is never inside a decode step. Only partial mode leaves
            # episodes in flight between calls: their rows keep the KV cache computed under the old weights (not
            # recomputed) and their next tokens are sampled by the new ones, and record the new version.
            assert not self.engine.busy or self.loop.carried, "weights change only between runs"
            # Until every bucket is in, the copy is a mix of two versions and must not sample.
            self._loaded = False
            targets, received, spans = self._load_buckets(update.version, buckets)
        except Exception:
            # A collective update must still be received to its end, or the other members wait for this one.
            update.transport.abandon(buckets)
            raise
        received |= {name for name, got in spans.items() if _tiles(got, targets[name].shape[0])}
        missing = self._expected - received
        if missing:
            example = sorted(missing)[:5]
            raise ValueError(f"weights version {update.version} lacks {len(missing)} tensors, e.g. {example}")
        self.engine.version = update.version
        self._loaded = True
        return update.version

    def _load_buckets(self, version: int, buckets) -> tuple[dict, set[str], dict[str, list[tuple[int, int]]]]:
        """Copy each bucket into the model: (the model's tensors, names loaded whole, row spans per piece-wise name)."""
        targets = self.model.state_dict()  # tensors sharing storage with the model's
        received: set[str] = set()
        spans: dict[str, list[tuple[int, int]]] = {}
        for bucket in buckets:
            whole: dict[str, torch.Tensor] = {}
            pieces: dict[tuple[int, int], dict[str, torch.Tensor]] = {}
            for key, tensor in bucket.items():
                name, span = split_key(key)
                if span is None:
                    whole[key] = tensor
                else:
                    pieces.setdefault(span, {})[name] = tensor
            converted = self._convert(whole)
            _, unexpected = self.model.load_state_dict(converted, strict=False)
            if unexpected:
                raise ValueError(f"weights version {version} has tensors this model lacks: {sorted(unexpected)[:5]}")
            received |= converted.keys()
            for (start, stop), named in pieces.items():
                for name, rows in self._convert(named).items():
                    target = targets.get(name)
                    if target is None or tuple(target[start:stop].shape) != tuple(rows.shape):
                        have = "missing" if target is None else tuple(target.shape)
                        raise ValueError(f"weights version {version}: piece {piece_key(name, start, stop)} of "
                                         f"shape {tuple(rows.shape)} does not fit this model's tensor ({have})")
                    target[start:stop].copy_(rows)
                    spans.setdefault(name, []).append((start, stop))
        return targets, received, spans

    def _convert(self, bucket: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        # The update's expert format need not match this copy's: quantize or decode on arrival.
        if self.mxfp4_experts:
            return mxfp4_state_dict(bucket)
        return dequantize_state_dict(bucket, dtype=self.model.embed.weight.dtype)

    def run(self, tasks: list[Task], seed: int | None = None, temperature: float | None = None) -> list[Trajectory]:
        """Play every task to the end; trajectories in task order (failed envs marked failed, never dropped).

        `temperature` overrides the recipe's for this call only (evaluation samples greedily or cooler).
        """
        if not self._loaded:
            raise RuntimeError("this rollout worker has no weights yet: push a WeightUpdate before running tasks")
        if self.loop.carried:
            # Their turns share the engine: a whole-batch run would step them without anyone to hand them to.
            raise RuntimeError(f"{len(self.loop.carried)} partial-mode episodes are in flight: advance them, not run")
        if seed is not None:
            self.engine.generator.manual_seed(seed)
        default = self.loop.sampling
        if temperature is not None:
            self.loop.sampling = replace(default, temperature=temperature)
        try:
            # Two phases on one engine: the built-in loop's tasks, then the black-box agents' through a server.
            played: dict[int, Trajectory] = {}
            own = [i for i, t in enumerate(tasks) if t.agent is None]
            played.update(zip(own, self.loop.run([tasks[i] for i in own])))
            others = [i for i, t in enumerate(tasks) if t.agent is not None]
            if others:
                played.update(zip(others, self._play_agents([tasks[i] for i in others])))
            return [played[i] for i in range(len(tasks))]
        finally:
            self.loop.sampling = default

    def advance(self, items: list[tuple[int, Task]], seed: int, max_steps: int) -> list[tuple[int, Trajectory]]:
        """Partial mode: start these (key, task) episodes, then play all in flight until one ends or max_steps steps.

        Returns the (key, trajectory) pairs of the episodes that ended; the others stay in flight here, in the
        engine's rows, and go on at the next call, under whatever weights were loaded in between.
        """
        if not self._loaded:
            raise RuntimeError("this rollout worker has no weights yet: push a WeightUpdate before running tasks")
        if any(task.agent is not None for _, task in items):
            raise ValueError("partial rollouts play the built-in agent loop only, not black-box agent tasks")
        if not self.loop.carried:
            # Seeded only when nothing is in flight: a carried episode's stream is not restarted mid-way.
            self.engine.generator.manual_seed(seed)
        self.loop.start(items)
        return list(self.loop.advance(max_steps).items())

    def _play_agents(self, tasks: list[Task]) -> list[Trajectory]:
        """Black-box tasks: each task's agent program plays its env through a server on this worker's engine."""
        from concurrent.futures import ThreadPoolExecutor

        from jointrl.rl.serve import blackbox
        from jointrl.rl.serve.app import ServedModel, build_app
        from jointrl.rl.serve.background import BackgroundServer
        from jointrl.rl.serve.scheduler import Scheduler
        from jointrl.rl.serve.sessions import Sessions

        limits, sessions = self.loop.limits, Sessions()
        scheduler = Scheduler(self.model, self.loop.tokenizer, sessions=sessions, engine=self.engine,
                              episode_sampling=self.loop.sampling, episode_max_tokens=limits.max_new_tokens_per_turn)
        served = ServedModel(POLICY_NAME, dict(limits.think_budgets), default_tier=TIERS[0],
                             default_max_tokens=limits.max_new_tokens_per_turn)
        scheduler.start()
        try:
            with BackgroundServer(build_app(scheduler, served)) as web, \
                    ThreadPoolExecutor(max_workers=self.engine.max_rows) as pool:
                futures = [pool.submit(blackbox.play, registry.resolve(t.agent), web.url, POLICY_NAME, sessions,
                                       t.env_id, t.seed, t.tier, t.group_id, limits.episode_timeout_s) for t in tasks]
                return [f.result() for f in futures]
        finally:
            scheduler.stop()

    def weight_device(self) -> str:
        """The device type of this copy's weights (the sync groups use NCCL only if every member has CUDA)."""
        return self.model.embed.weight.device.type

    def join_weight_group(self, spec: weight_sync.CollectiveSpec, member: int) -> None:
        """Join a generation of the collective weight-sync groups as member `member` (after the learner ranks)."""
        weight_sync.join_weight_group(spec, member)

    def leave_weight_group(self) -> None:
        """Leave the collective weight-sync groups."""
        weight_sync.leave_weight_group()

    @torch.no_grad()
    def state(self) -> dict[str, torch.Tensor]:
        """The policy copy's weights (to check what a push delivered)."""
        return {k: v.clone() for k, v in self.model.state_dict().items()}

    @torch.no_grad()
    def logits(self, tokens: list[int]) -> torch.Tensor:
        """The policy copy's logits [T, V] over one token sequence (to check what a push delivered)."""
        return self.model(torch.tensor([tokens])).logits[0]

    def info(self) -> WorkerInfo:
        """Process id, loaded version, expert format and registry size."""
        experts = [self.model.layers[i].ffn.experts for i in self.model.moe_layers]
        return WorkerInfo(
            pid=os.getpid(),
            version=self.engine.version,
            mxfp4_experts=bool(experts) and all(isinstance(e, MXFP4Experts) for e in experts),
            env_ids=self._n_env_ids,
        )


def _tiles(spans: list[tuple[int, int]], n: int) -> bool:
    """Whether the row spans cover 0..n exactly once."""
    end = 0
    for start, stop in sorted(spans):
        if start != end:
            return False
        end = stop
    return end == n
