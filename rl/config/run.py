"""A whole run: the sections together, the model resolved from a preset or checkpoint, and checks across sections."""
from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import Field, PrivateAttr, field_validator, model_validator

from jointrl.model.config import ModelConfig
from jointrl.rl.config.envs import EnvsConfig
from jointrl.rl.config.model import PRESET_KEY, PRETRAINED_KEY, TokenizerConfig, preset_fields, pretrained_fields
from jointrl.rl.config.rewards import RewardsConfig
from jointrl.rl.config.rollout import RolloutConfig
from jointrl.rl.config.section import Loc, Section, fail_at, raise_at
from jointrl.rl.config.training import (
    CRITIC_ALGORITHMS, GROUP_ALGORITHMS, SELF_BASELINED, AlgorithmConfig, LearnerConfig, TrainerConfig,
)


class TrackingConfig(Section):
    """Where metrics and run files go."""

    wandb_project: str = Field("jointrl", min_length=1, description="wandb project name.")
    wandb_mode: Literal["offline", "online", "disabled"] = Field("offline", description="wandb mode.")
    run_dir: str = Field("runs", min_length=1, description="Directory for run files (metrics JSONL, logs, checkpoints).")
    console: bool = Field(True, description="Print a progress line per step.")
    run_name: str | None = Field(
        None, min_length=1, description="wandb run name of the RL stage (SFT's adds '-sft'); null = '<run_dir name>-<start time>'."
    )
    group: str | None = Field(None, min_length=1, description="wandb group; null = the run_dir's name (SFT and RL together).")
    tags: list[str] = Field(default_factory=list, description="wandb tags of the run.")
    notes: str | None = Field(None, description="wandb notes of the run.")
    save_rollouts: bool = Field(True, description="Write each RL step's episodes to run_dir/rollouts/ as Parquet.")
    samples_every: int = Field(
        10, ge=0, description="RL steps between wandb tables of sample completions (best and worst per domain); 0 = never."
    )


class CheckpointConfig(Section):
    """Periodic run checkpoints (`jointrl export --mxfp4` writes MXFP4 experts into an export)."""

    dir: str | None = Field(None, description="Checkpoint directory; null = checkpoints/ inside the run directory.")
    every: int = Field(50, ge=0, description="Steps between checkpoints (0 = never).")
    keep_last: int = Field(3, ge=1, description="Most recent complete checkpoints kept on disk.")


class RayConfig(Section):
    """The Ray session a run's rollout workers and learner ranks live in."""

    address: str | None = Field(
        None, min_length=1, description="null = start a local Ray session for the run (its logs under the run "
        "directory's ray/), or join $RAY_ADDRESS where it is set, never a cluster merely found running; 'auto' = join the cluster started on this machine with `ray start --head`; "
        "'host:port' = join the cluster whose head listens there (export RAY_AUTH_MODE=token and its token first)."
    )


class PlanConfig(Section):
    """The hardware `jointrl plan` lays the recipe out on; nothing that runs a job reads it."""

    learner_gpu_mem_gib: float = Field(80.0, gt=0, allow_inf_nan=False, description="Memory of one learner accelerator in GiB.")
    rollout_gpu_mem_gib: float = Field(80.0, gt=0, allow_inf_nan=False, description="Memory of one rollout accelerator in GiB.")
    gpus_per_worker: int = Field(1, ge=1, description="Accelerators one rollout worker spreads its policy copy and cache over.")
    max_context: int | None = Field(
        None, gt=0, description="Longest episode in tokens (prompt, turns, tool results) a worker's cache is sized for; "
        "null = model.max_seq_len."
    )


class RunConfig(Section):
    """A whole run; `model: {preset: NAME | from_pretrained: DIR, <field>: value}` resolves into a ModelConfig."""

    model: ModelConfig = Field(
        ..., description="The policy: `preset` names a model preset, or `from_pretrained` a checkpoint directory "
        "(jointrl's, or a transformers kimi_linear / deepseek_v3 / deepseek_v32 one, imported on the fly) whose "
        "weights and tokenizer the cold start starts from; other keys override its ModelConfig fields."
    )
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig, description="Tokenizer source or training options.")
    envs: EnvsConfig = Field(default_factory=EnvsConfig, description="Environment mix and seed ranges.")
    rewards: RewardsConfig = Field(default_factory=RewardsConfig, description="Reward terms and normalisation.")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="Episode generation.")
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig, description="Policy-gradient objective.")
    learner: LearnerConfig = Field(default_factory=LearnerConfig, description="Learner ranks and optimizer.")
    trainer: TrainerConfig = Field(default_factory=TrainerConfig, description="Outer training loop.")
    tracking: TrackingConfig = Field(default_factory=TrackingConfig, description="Metrics and run files.")
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig, description="Run checkpoints.")
    plan: PlanConfig = Field(default_factory=PlanConfig, description="Hardware of the layout `jointrl plan` prints.")
    ray: RayConfig = Field(default_factory=RayConfig, description="Local Ray session or an existing cluster to join.")
    # model.from_pretrained as given; the resolved fields are in `model`, the weights are read by the cold start.
    _pretrained: str | None = PrivateAttr(None)

    @property
    def pretrained(self) -> str | None:
        """The checkpoint directory `model.from_pretrained` names, or None for a fresh model."""
        return self._pretrained

    @field_validator("model", mode="before")
    @classmethod
    def _resolve_preset(cls, value: Any) -> Any:
        if not isinstance(value, Mapping) or not {PRESET_KEY, PRETRAINED_KEY} & set(value):
            return value
        fields = dict(value)
        if PRESET_KEY in fields and PRETRAINED_KEY in fields:
            fail_at("ModelConfig", (PRETRAINED_KEY,), f"{PRETRAINED_KEY} and {PRESET_KEY} both name the model; keep "
                    "one (other keys override either)", fields[PRETRAINED_KEY])
        if PRETRAINED_KEY in fields:
            return {**pretrained_fields(fields.pop(PRETRAINED_KEY)), **fields}
        name = fields.pop(PRESET_KEY)
        if not isinstance(name, str):
            fail_at("ModelConfig", (PRESET_KEY,), f"expected a preset name, got {name!r}", name)
        return {**preset_fields(name), **fields}

    @model_validator(mode="wrap")
    @classmethod
    def _remember_pretrained(cls, data: Any, handler) -> RunConfig:
        model = data.get("model") if isinstance(data, Mapping) else None
        path = model.get(PRETRAINED_KEY) if isinstance(model, Mapping) else None
        config = handler(data)
        if path is not None:
            config._pretrained = path
        return config

    @model_validator(mode="after")
    def _check(self) -> RunConfig:
        problems: list[tuple[Loc, str, Any]] = []
        if self.model.n_experts % self.learner.ep_size:
            problems.append((
                ("learner", "ep_size"),
                f"ep_size={self.learner.ep_size} does not divide model.n_experts={self.model.n_experts}",
                self.learner.ep_size,
            ))
        if self.algorithm.name in GROUP_ALGORITHMS and self.rollout.group_size < 2:
            problems.append((
                ("rollout", "group_size"),
                f"algorithm {self.algorithm.name!r} compares samples within a group and needs group_size >= 2, "
                f"got {self.rollout.group_size}",
                self.rollout.group_size,
            ))
        if self.learner.share_openings and self.algorithm.name in CRITIC_ALGORITHMS:
            problems.append((
                ("learner", "share_openings"),
                f"algorithm {self.algorithm.name!r} trains a critic, whose values are read at every position, "
                "inside shared openings too: set share_openings to false",
                self.learner.share_openings,
            ))
        if self.algorithm.name == "gspo" and self.algorithm.dual_clip_c is not None:
            problems.append((
                ("algorithm", "dual_clip_c"),
                "gspo clips a sequence-level ratio, for which dual-clip is not defined: set dual_clip_c to null",
                self.algorithm.dual_clip_c,
            ))
        if self.rewards.normalization == "group" and self.algorithm.name in SELF_BASELINED:
            problems.append((
                ("rewards", "normalization"),
                f"algorithm {self.algorithm.name!r} builds its own baseline without std scaling; group normalisation "
                "would std-scale its rewards anyway: use 'none' or 'domain'",
                self.rewards.normalization,
            ))
        if self.rollout.max_staleness > 0 and self.algorithm.tis_cap is None:
            problems.append((
                ("algorithm", "tis_cap"),
                f"rollout.max_staleness={self.rollout.max_staleness} trains on tokens sampled by older policies; "
                "without truncated importance weights nothing corrects for them: set tis_cap (e.g. 2.0)",
                self.algorithm.tis_cap,
            ))
        if self.rollout.weight_transport == "collective" and (self.ray.address or "").startswith("ray://"):
            problems.append((
                ("rollout", "weight_transport"),
                "the collective transport needs the driver on the cluster (it hosts the groups' TCP store); a Ray "
                "Client address (ray://) runs it elsewhere: use object_store or start the run on the head node",
                self.rollout.weight_transport,
            ))
        held_out = self.envs.eval_seeds
        if self.trainer.eval_seeds_per_env > held_out.stop - held_out.start:
            # The run's evaluations take eval_seeds_per_env seeds from the range's start; past its stop they would
            # play tasks the recipe never set aside.
            problems.append((
                ("trainer", "eval_seeds_per_env"),
                f"eval_seeds_per_env={self.trainer.eval_seeds_per_env} is more than the "
                f"{held_out.stop - held_out.start} held-out seeds of envs.eval_seeds ({held_out.start}.."
                f"{held_out.stop}): lower it or raise envs.eval_seeds.stop",
                self.trainer.eval_seeds_per_env,
            ))
        raise_at("RunConfig", problems)
        return self
