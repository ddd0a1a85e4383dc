"""One learner rank (a Ray actor): a DeepSpeed engine over the policy with this rank's expert shard.

Per optimizer update the rank packs its samples into micro-batches, runs forward/backward on each, and lets
DeepSpeed reduce, check, clip and apply the gradients; then the router biases move from the expert loads of
every rank. How this departs from a plain DeepSpeed data-parallel loop, and why:

- DeepSpeed's MoE handling (expert / expert-data groups, MoE optimizer groups) is switched on by our tagged
  expert parameters; DeepSpeed only recognises its own MoE layer class, whose gate drops tokens.
- Gradients are summed, not averaged, over ranks (`gradient_allreduce_op: sum`): every micro-batch loss is
  already normalised by the whole step's totals, so the sum over ranks is the batch gradient. An expert's
  gradient is summed over its EP group by the all-to-all backward and over its expert-data group by DeepSpeed.
- Ranks run the same number of micro-batches (the expert all-to-all needs every EP rank in every forward):
  a rank with fewer pads with copies of its smallest one whose loss is multiplied by 0.
- A critic algorithm runs an old pass over the whole step before its first update, even with one update per
  step: GAE needs the old values, and its advantages are whitened over every micro-batch of every rank (so
  the loss does not depend on how the step was packed).
- The NaN guard is DeepSpeed's overflow check on the all-reduced gradient norm (every rank agrees); a
  non-finite loss is turned into NaN gradients so it trips the same check. A skipped step changes no
  weight, no optimizer or scheduler state and no router bias.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import ray
import torch
import torch.distributed as dist

from jointrl.model.checkpoint import load_state, save_pretrained
from jointrl.model.transformer import Transformer
from jointrl.rl.algorithms.table import ALGORITHMS
from jointrl.rl.config.run import RunConfig
from jointrl.rl.config.training import LearnerConfig
from jointrl.rl.learner.critic import PolicyWithValue
from jointrl.rl.learner.distributed import (
    all_reduce_max,
    all_reduce_sum,
    free_port,
    init_process_group,
    learner_device,
    node_address,
    resolve_backend,
)
from jointrl.rl.learner.expert_parallel import expert_group_name, expert_keys, gather_full_state, shard_experts
from jointrl.rl import weight_sync
from jointrl.rl.weight_sync import ObjectStoreTransport, bucketize, rank_share
from jointrl.rl.learner.batch import LossTotals, MicroBatch, SequenceSample, pack
from jointrl.rl.learner.forward import (
    CriticTargets, ForwardOut, combine_metrics, critic_targets, detached, forward_micro_batch, micro_batch_loss,
    reference_logprobs,
)

# (samples of this rank, totals of the whole mini-batch over all ranks), one per optimizer update.
Work = list[tuple[list[SequenceSample], LossTotals]]


def deepspeed_config(learner: LearnerConfig) -> dict:
    """The DeepSpeed config of a learner engine: ZeRO 1/2, summed gradients, caller-owned accumulation boundary."""
    bf16 = learner.dtype == "bf16"
    return {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        # A step has as many micro-batches as its packing gives; step() is the accumulation boundary.
        "managed_gradient_accumulation": False,
        "gradient_allreduce_op": "sum",
        "gradient_clipping": learner.grad_clip or 0.0,
        "zero_optimization": {
            "stage": learner.zero_stage,
            # DeepSpeed's MoE path requires both.
            "reduce_scatter": True,
            "contiguous_gradients": True,
            "overlap_comm": False,
        },
        # bf16 skips the overflow check unless asked; the NaN guard relies on it.
        "bf16": {"enabled": bf16, "check_grad_overflow": True},
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


def warmup_factor(step: int, warmup_steps: int) -> float:
    """LR multiplier of optimizer step `step` (0-based): linear from 1/warmup_steps to 1, then 1."""
    return 1.0 if warmup_steps <= 0 else min(1.0, (step + 1) / warmup_steps)


def _engine_class():
    """DeepSpeed's engine with MoE handling switched on by tagged expert parameters.

    Built on first use: deepspeed must be imported only once DS_ACCELERATOR is set (in the actor).
    """
    from deepspeed.moe.utils import is_moe_param
    from deepspeed.runtime.engine import DeepSpeedEngine

    class TaggedMoEEngine(DeepSpeedEngine):
        """Treats a model whose parameters carry DeepSpeed's expert tags as an MoE model."""

        def _configure_distributed_model(self, model):
            super()._configure_distributed_model(model)
            # Read before the ZeRO optimizer is built: it decides whether expert groups get their own
            # partitioning and reduction group.
            self.has_moe_layers = self.has_moe_layers or any(is_moe_param(p) for p in self.module.parameters())

    return TaggedMoEEngine


def scaled_norm_gains(module: torch.nn.Module, which: Literal["all", "final"]) -> set[int]:
    """ids of the parameters norm_lr_scale applies to: every norm layer's per-channel gain (a 1-D weight of a *norm
    module), or with which="final" only the final norm's, in front of the output projection."""
    if which == "final":
        return {id(getattr(module, "policy", module).norm.weight)}  # the policy itself, or inside PolicyWithValue
    return {id(p) for n, p in module.named_parameters() if p.ndim == 1 and n.endswith("norm.weight")}


def build_engine(module: torch.nn.Module, learner: LearnerConfig):
    """A DeepSpeed engine over module with AdamW split into dense and expert groups (and the norm gains, when
    learner.norm_lr_scale is not 1) and a linear warm-up."""
    from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer
    from deepspeed.runtime.config import DeepSpeedConfig

    params = [p for p in module.parameters() if p.requires_grad]
    # At scale 1 the gains stay in module order in the dense group, as learner checkpoints expect.
    scaled = scaled_norm_gains(module, learner.norm_lr_gains) if learner.norm_lr_scale != 1.0 else set()
    dense = [p for p in params if id(p) not in scaled]
    groups = split_params_into_different_moe_groups_for_optimizer({"name": "dense", "params": dense})
    gains = [p for p in params if id(p) in scaled]
    groups.append({"name": "norm_gains", "params": gains, "lr": learner.lr * learner.norm_lr_scale})
    groups = [g for g in groups if g["params"]]  # no norm_gains group at scale 1
    optimizer = torch.optim.AdamW(groups, lr=learner.lr, betas=learner.betas, weight_decay=learner.weight_decay)
    warmup = learner.warmup_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_factor(step, warmup))
    config = deepspeed_config(learner)
    # deepspeed.initialize always builds its own engine class; this is the same construction with ours.
    return _engine_class()(
        args=None, model=module, optimizer=optimizer, lr_scheduler=scheduler, config=config,
        config_class=DeepSpeedConfig(config),
    )


class LearnerRank:
    """The per-rank work of LearnerGroup: set up once, then train steps, state export, save and load."""

    # Collective weight sends run on their own thread, so a push is not queued behind a train step (async mode).
    RAY_OPTIONS = {"concurrency_groups": {"weights": 1}}

    def __init__(self, cfg: RunConfig, threads: int = 1):
        torch.set_num_threads(max(1, threads))
        self.cfg = cfg
        self.engine = None

    def rendezvous(self) -> tuple[str, int]:
        """(address, free port) for the TCP store rank 0 hosts; called on rank 0 only."""
        return node_address(), free_port()

    def setup(self, rank: int, world_size: int, address: str, port: int, init_state: dict | str, pad_id: int = 0) -> None:
        """Join the process group, build the sharded policy (and reference) from init_state, and the engine.

        init_state is a state dict or a checkpoint directory this rank reads itself (so the driver never holds it).
        """
        from deepspeed.utils import groups

        cfg, learner = self.cfg, self.cfg.learner
        if isinstance(init_state, str):
            init_state = load_state(init_state)
        self.device = learner_device()
        init_process_group(rank, world_size, address, port, resolve_backend(learner.backend, self.device))
        self.rank, self.world_size, self.pad_id = rank, world_size, pad_id
        name = expert_group_name(learner.ep_size)
        groups._create_expert_and_data_parallel(learner.ep_size)
        self.ep_group = groups._get_expert_parallel_group(name)
        self.ep_rank = dist.get_rank(self.ep_group)

        torch.manual_seed(cfg.trainer.seed)
        self.policy = self._sharded_policy(init_state)
        self.expert_keys = expert_keys(self.policy)
        module = PolicyWithValue.build(self.policy, critic=ALGORITHMS[cfg.algorithm.name].critic).to(self.device)
        self.engine = build_engine(module, learner)
        self.reference = None
        if cfg.algorithm.kl_coef > 0:
            reference = PolicyWithValue(self._sharded_policy(init_state)).to(self.device)
            if learner.dtype == "bf16":
                reference = reference.to(torch.bfloat16)
            self.reference = reference.requires_grad_(False)

    def _sharded_policy(self, state: dict) -> Transformer:
        """A Transformer with init weights `state` whose routed experts are this rank's EP slice."""
        policy = Transformer(self.cfg.model)
        policy.load_state_dict(state)
        shard_experts(policy, self.ep_rank, self.cfg.learner.ep_size, self.ep_group)
        policy.activation_checkpointing = self.cfg.learner.activation_checkpointing
        return policy

    def _filler(self) -> MicroBatch:
        """A two-token micro-batch for a rank without samples (its loss is multiplied by 0)."""
        model, replay = self.cfg.model, self.cfg.algorithm.routing_replay
        n_moe, n_dsa = len(self.policy.moe_layers), len(self.policy.dsa_layers)
        routed = torch.arange(model.n_active).expand(1, n_moe, -1) if replay == "r3" and n_moe else None
        topk = torch.full((1, n_dsa, model.index_topk), -1) if replay == "r3" and n_dsa else None
        sample = SequenceSample(
            tokens=torch.full((2,), self.pad_id), loss_mask=torch.zeros(2), behavior_logprobs=torch.zeros(2),
            policy_version=torch.full((2,), -1), advantage=0.0, reward=0.0, routed_experts=routed,
            sparse_topk=topk, index=-1,
        )
        return pack([sample], self.cfg.learner.micro_batch_tokens, self.pad_id)[0]

    def _schedule(self, samples: list[SequenceSample]) -> list[tuple[MicroBatch, bool]]:
        """(micro-batch on device, real) pairs, padded with fillers (real False) to the largest count of any rank."""
        mbs = pack(samples, self.cfg.learner.micro_batch_tokens, self.pad_id) if samples else []
        n = all_reduce_max(len(mbs), self.device)
        filler = mbs[-1] if mbs else self._filler()
        return [(mb.to(self.device), True) for mb in mbs] + [(filler.to(self.device), False)] * (n - len(mbs))

    def _replay(self, old: ForwardOut | None) -> str:
        """The replay mode of a forward: r2 needs an old pass to replay; without one the weights are the old ones."""
        mode = self.cfg.algorithm.routing_replay
        return "off" if mode == "r2" and old is None else mode

    @torch.no_grad()
    def _old_pass(self, mb: MicroBatch) -> ForwardOut:
        """The policy as the step started, on mb (routes afresh under r2: that routing is what r2 replays)."""
        mode = self.cfg.algorithm.routing_replay
        return forward_micro_batch(
            self.engine.module, mb, temperature=self.cfg.rollout.temperature, replay="off" if mode == "r2" else mode,
            share_openings=self.cfg.learner.share_openings,
        )

    @torch.no_grad()
    def _ref_logprobs(self, mb: MicroBatch, old: ForwardOut | None) -> torch.Tensor:
        """Log-probs of the frozen reference policy, routed as algorithm.reference_routing says."""
        return reference_logprobs(
            self.reference, mb, temperature=self.cfg.rollout.temperature, routing=self.cfg.algorithm.reference_routing,
            replay=self._replay(old), replay_from=old, share_openings=self.cfg.learner.share_openings,
        )

    def _update(
        self, schedule: list[tuple[MicroBatch, bool]], totals: LossTotals, olds: list | None,
        targets: list[CriticTargets] | None,
    ) -> dict:
        """Forward/backward over the schedule, one optimizer step, router-bias update; this rank's report."""
        algorithm, engine = self.cfg.algorithm, self.engine
        lr = float(engine.get_lr()[0])
        metrics, loss_sum, load = [], 0.0, None
        for i, (mb, real) in enumerate(schedule):
            old = olds[i] if olds is not None else None
            ref = self._ref_logprobs(mb, old) if self.reference is not None else None
            current = forward_micro_batch(
                engine.module, mb, temperature=self.cfg.rollout.temperature, replay=self._replay(old),
                replay_from=old, need_entropy=algorithm.entropy_coef > 0,
                share_openings=self.cfg.learner.share_openings,
            )
            loss, mb_metrics = micro_batch_loss(
                algorithm, mb, current, old if old is not None else detached(current), ref, totals,
                targets[i] if targets is not None else None,
            )
            if not real:
                loss = loss * 0.0
            elif not torch.isfinite(loss.detach()):
                # NaN * x has a NaN gradient everywhere x has one: DeepSpeed's overflow check then skips.
                loss = loss * float("nan")
            engine.backward(loss)
            if real:
                metrics.append(mb_metrics)
                loss_sum += float(loss.detach())
                if current.expert_load is not None:
                    load = current.expert_load.detach() if load is None else load + current.expert_load.detach()
        engine.step()
        applied = engine.was_step_applied()
        if self.policy.moe_layers:
            if load is None:
                load = torch.zeros(len(self.policy.moe_layers), self.cfg.model.n_experts, device=self.device)
            # Every rank adds the same all-reduced load, so the biases stay identical everywhere.
            load = all_reduce_sum(load.float())
            if applied:
                self.policy.update_router_biases(load)
        grad_norm = engine.get_global_grad_norm()
        return {
            "metrics": {**combine_metrics(metrics), "learner/loss": loss_sum},
            "grad_norm": float("inf") if grad_norm is None or not applied else float(grad_norm),
            "skipped": not applied,
            "lr": lr,
        }

    def train_step(self, work: Work) -> list[dict]:
        """One RL step of this rank: one optimizer update per (samples, totals) mini-batch; a report per update."""
        schedules = [self._schedule(samples) for samples, _ in work]
        critic = ALGORITHMS[self.cfg.algorithm.name].critic
        olds = targets = None
        if len(work) > 1 or critic:
            # Every mini-batch's old pass runs before the first update: all of them see the step's start weights,
            # and a critic's advantages are whitened over the old values of the whole step.
            olds = [[self._old_pass(mb) for mb, _ in schedule] for schedule in schedules]
        if critic:
            targets = self._critic_targets(schedules, olds)
        return [
            self._update(
                schedule, totals, olds[m] if olds is not None else None, targets[m] if targets is not None else None
            )
            for m, (schedule, (_, totals)) in enumerate(zip(schedules, work))
        ]

    def _critic_targets(self, schedules: list, olds: list) -> list[list[CriticTargets]]:
        """Per mini-batch and micro-batch, GAE targets whitened over the real micro-batches of every rank."""
        flat = [
            (mb, old.values, real) for schedule, passes in zip(schedules, olds) for (mb, real), old in zip(schedule, passes)
        ]
        made = critic_targets(
            self.cfg.algorithm, [mb for mb, _, _ in flat], [values for _, values, _ in flat],
            counted=[real for _, _, real in flat], reduce=all_reduce_sum,
        )
        out, start = [], 0
        for schedule in schedules:
            out.append(made[start:start + len(schedule)])
            start += len(schedule)
        return out

    def full_state(self) -> dict[str, torch.Tensor] | None:
        """The full policy state on CPU, expert shards gathered over the EP group; None on ranks other than 0."""
        local = self.engine.module.policy_state_dict()
        full = gather_full_state(local, self.expert_keys, self.ep_group)
        # Copies, not views: a parameter is a view into ZeRO's flat buffer, and pickling a view ships the
        # whole buffer with every tensor (gigabytes per push for a few-MB model).
        return {k: v.to("cpu", copy=True) for k, v in full.items()} if self.rank == 0 else None

    def publish_shard(self, bucket_bytes: int, mxfp4_experts: bool, version: int | None = None) -> tuple[list, int]:
        """This rank's share of the policy in buckets: (handles, bytes) for the workers.

        Without a version the buckets go to the object store (handles: object refs); with one they are staged for
        the collective transport (handles: BucketLayouts) until a push broadcasts them.
        """
        share = rank_share(
            self.engine.module.policy_state_dict(), self.expert_keys, rank=self.rank, world_size=self.world_size,
            ep_size=self.cfg.learner.ep_size, mxfp4_experts=mxfp4_experts,
        )
        nbytes = sum(t.numel() * t.element_size() for t in share.values())
        buckets = bucketize(share, bucket_bytes)
        if version is None:
            return ObjectStoreTransport().publish(buckets), nbytes
        return weight_sync.stage_weights(version, buckets), nbytes

    def weight_device(self) -> str:
        """The device type this rank's weights live on (the sync groups use NCCL only if every member has CUDA)."""
        return learner_device().type

    @ray.method(concurrency_group="weights")
    def join_weight_group(self, spec, member: int) -> None:
        """Join a generation of the collective weight-sync groups as sender `member`."""
        weight_sync.join_weight_group(spec, member)

    @ray.method(concurrency_group="weights")
    def send_weights(self, version: int, generation: int) -> int:
        """Broadcast the staged share of `version` to the workers of that generation; returns the bytes sent."""
        return weight_sync.send_weights(version, generation)

    @ray.method(concurrency_group="weights")
    def serve_weights(self, version: int) -> list:
        """The staged share of `version` put in the object store (for a worker restarted between pushes)."""
        return weight_sync.serve_weights(version)

    @ray.method(concurrency_group="weights")
    def leave_weight_group(self) -> None:
        """Leave the collective weight-sync groups and drop the staged shares."""
        weight_sync.leave_weight_group()

    def export(self, directory: str, tokenizer) -> str | None:
        """Write the policy as a checkpoint (save_pretrained) from rank 0; every rank of the first EP group must call."""
        full = self.full_state()
        if full is None:
            return None
        model = Transformer(self.cfg.model)
        model.load_state_dict(full, strict=False)  # a tied head arrives once, under the embedding's name
        return str(save_pretrained(model, directory, tokenizer=tokenizer))

    def _shard_path(self, directory: str | Path) -> Path:
        return Path(directory) / f"learner_rank{self.rank:03d}.pt"

    def save(self, directory: str | Path) -> str:
        """Write this rank's shard (weights with its expert slice, optimizer, scheduler, counters) atomically."""
        engine = self.engine
        payload = {
            "rank": self.rank,
            "world_size": self.world_size,
            "ep_size": self.cfg.learner.ep_size,
            "module": engine.module.state_dict(),
            "optimizer": engine.optimizer.state_dict(),
            "scheduler": engine.lr_scheduler.state_dict(),
            "global_steps": engine.global_steps,
            "skipped_steps": engine.skipped_steps,
            "reference": self.reference.state_dict() if self.reference is not None else None,
        }
        path = self._shard_path(directory)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        torch.save(payload, tmp)
        os.replace(tmp, path)
        return str(path)

    def load(self, directory: str | Path) -> None:
        """Restore exactly what save wrote for this rank; the layout (ranks, ep_size) must match."""
        path = self._shard_path(directory)
        if not path.is_file():
            raise ValueError(f"no learner shard for rank {self.rank} in {directory}: {path} is missing")
        # Our own file, holding DeepSpeed's optimizer objects (loss scaler), so not weights-only.
        payload = torch.load(path, map_location=self.device, weights_only=False)
        layout = (payload["world_size"], payload["ep_size"])
        if layout != (self.world_size, self.cfg.learner.ep_size):
            raise ValueError(
                f"{path} was saved by ranks={layout[0]}, ep_size={layout[1]}; this group has "
                f"ranks={self.world_size}, ep_size={self.cfg.learner.ep_size}"
            )
        engine = self.engine
        engine.module.load_state_dict(payload["module"])
        # ZeRO's loader indexes the list by data-parallel rank; this rank's own shard is all it reads.
        shards = [payload["optimizer"] if r == self.rank else None for r in range(self.world_size)]
        engine.optimizer.load_state_dict(shards, load_optimizer_states=True, load_from_fp32_weights=True)
        engine.lr_scheduler.load_state_dict(payload["scheduler"])
        engine.global_steps, engine.skipped_steps = payload["global_steps"], payload["skipped_steps"]
        if self.reference is not None and payload["reference"] is not None:
            self.reference.load_state_dict(payload["reference"])

    def close(self) -> None:
        """Leave the process groups (before the actor is killed)."""
        weight_sync.leave_weight_group()
        if dist.is_initialized():
            dist.destroy_process_group()
