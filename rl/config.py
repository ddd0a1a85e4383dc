"""The typed schema of a run: one pydantic model per component, which a YAML recipe maps onto one to one."""
from __future__ import annotations

import difflib
import math
from fnmatch import fnmatchcase
from typing import Any, Literal, Mapping, NoReturn

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

import jointrl.model.presets as presets
from jointrl.envs import registry as env_registry
from jointrl.envs.base import HELD_OUT_START
import jointrl.rewards.registry as reward_registry
from jointrl.model.config import ModelConfig
from jointrl.rewards.alarms import AlarmConfig

Tier = Literal["low", "high", "max"]
AlgorithmName = Literal["grpo", "dr_grpo", "rloo", "reinforce_pp", "ppo", "gspo"]
# Algorithms whose advantage compares samples of the same prompt, so a group needs two or more.
GROUP_ALGORITHMS = frozenset({"grpo", "dr_grpo", "rloo", "gspo"})
PRESET_KEY = "preset"
PRETRAINED_KEY = "from_pretrained"

Loc = tuple[str | int, ...]


def raise_at(model_name: str, problems: list[tuple[Loc, str, Any]]) -> None:
    """Raise collected (key path, message, value) problems as one ValidationError located at those keys."""
    if not problems:
        return
    # A ValidationError raised inside a validator keeps its locations (prefixed with the field's), which is
    # what lets a recipe error point at the exact line of the offending key rather than at its section.
    details = [
        InitErrorDetails(type=PydanticCustomError("value_error", "{message}", {"message": msg}), loc=loc, input=value)
        for loc, msg, value in problems
    ]
    raise ValidationError.from_exception_data(model_name, details)


def fail_at(model_name: str, loc: Loc, message: str, value: Any) -> NoReturn:
    """Raise one problem located at a key path."""
    raise_at(model_name, [(loc, message, value)])
    raise AssertionError("raise_at returned with a problem")


class Section(BaseModel):
    """Base of every config section: unknown keys are errors and assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class TokenizerConfig(Section):
    """The tokenizer: an existing one on disk, or a byte-level BPE trained locally (vocab size from `model`)."""

    path: str | None = Field(
        None, description="Directory holding tokenizer.json and tokenizer_config.json; null trains one locally."
    )
    seed: int = Field(0, ge=0, description="Seed of the synthetic corpus the tokenizer is trained on.")
    n_samples: int = Field(20000, gt=0, description="Number of synthetic text samples in the training corpus.")


class EnvMixEntry(Section):
    """One line of the environment mix: the env ids a glob selects, and how often they are drawn."""

    glob: str = Field(..., min_length=1, description="Glob over env ids 'domain/family-vN:difficulty', e.g. 'swe/*:hard'.")
    weight: float = Field(1.0, gt=0, allow_inf_nan=False, description="Relative sampling weight of the selected envs.")
    demos: int | None = Field(
        None, ge=0, description="Cold-start demonstrations per env id of this glob; unset = trainer.sft.demos_per_env.",
    )
    agent: str | None = Field(
        None, description="'module:function' of a black-box agent program that plays these envs through the OpenAI "
        "API (see rl/serve/blackbox.py); unset = the built-in agent loop.",
    )


class SeedRange(Section):
    """A half-open range of environment seeds [start, stop)."""

    start: int = Field(..., ge=0, description="First seed of the range.")
    stop: int = Field(..., gt=0, description="One past the last seed of the range.")

    @model_validator(mode="after")
    def _ordered(self) -> SeedRange:
        if self.stop <= self.start:
            fail_at("SeedRange", ("stop",), f"stop={self.stop} must be greater than start={self.start}", self.stop)
        return self


class LearnabilityConfig(Section):
    """Learnability-weighted mixing (envs.mix_schedule: learnability): see rl/rollout/learnability.py."""

    floor: float = Field(0.1, gt=0, le=1, description="Smallest factor an id's weight is scaled by, so none starves.")
    cap: float = Field(0.5, gt=0, le=1, description="Largest share of its domain's prompts one id may take (a domain "
                       "of n ids with n x cap <= 1 gets equal shares whatever the pass rates).")
    decay: float = Field(0.8, ge=0, lt=1, description="Per-step decay of the pass-rate counts (0 = last step only).")
    prior_episodes: float = Field(2.0, gt=0, description="Half-successes mixed into each id's pass rate (unseen = 0.5).")


class EnvsConfig(Section):
    """Which environments a run samples tasks from, and the seeds that keep training and evaluation apart."""

    mix: list[EnvMixEntry] = Field(
        default_factory=lambda: [EnvMixEntry(glob="*")],
        min_length=1,
        description="Weighted globs over registered env ids; the default draws from every registered env.",
    )
    domain_shares: dict[str, float] = Field(
        default_factory=dict,
        description="Fraction of each step's prompts per domain (summing to 1); empty = in proportion to the mix weights.",
    )
    mix_schedule: Literal["fixed", "learnability"] = Field(
        "fixed", description="fixed: ids drawn by their mix weights; learnability: weights also scaled by 4p(1-p) of "
        "each id's recent pass rate p, within its domain's share."
    )
    learnability: LearnabilityConfig = Field(
        default_factory=lambda: LearnabilityConfig(), description="How learnability mixing weighs ids."
    )
    train_seeds: SeedRange = Field(
        default_factory=lambda: SeedRange(start=0, stop=HELD_OUT_START),
        description=f"Seeds training episodes are drawn from; below {HELD_OUT_START}, where the held-out seeds start.",
    )
    eval_seeds: SeedRange = Field(
        default_factory=lambda: SeedRange(start=HELD_OUT_START, stop=HELD_OUT_START + 1000),
        description=f"Held-out seeds for evaluation: from {HELD_OUT_START} on, where envs draw their held-out tasks.",
    )

    @model_validator(mode="after")
    def _check(self) -> EnvsConfig:
        problems: list[tuple[Loc, str, Any]] = []
        # Envs split their task spaces at HELD_OUT_START, so seeds on the wrong side of it would train on
        # held-out tasks or evaluate on train ones even when the two ranges do not overlap (and with both
        # on their side, they cannot overlap).
        if self.train_seeds.stop > HELD_OUT_START:
            problems.append((("train_seeds", "stop"), f"train seeds must stay below {HELD_OUT_START} (the held-out "
                             f"seeds' start), got stop={self.train_seeds.stop}", self.train_seeds.stop))
        if self.eval_seeds.start < HELD_OUT_START:
            problems.append((("eval_seeds", "start"), f"eval seeds must start at or above {HELD_OUT_START} (below it "
                             f"are train tasks), got start={self.eval_seeds.start}", self.eval_seeds.start))
        # A glob that selects nothing would fail only when the first task is drawn, without file or line.
        for i, entry in enumerate(self.mix):
            if not env_registry.env_ids(entry.glob):
                problems.append((("mix", i, "glob"), env_registry.no_match_message(entry.glob), entry.glob))
        domain_globs = [entry.glob.split("/", 1)[0] for entry in self.mix]
        shares_ok = True
        for domain, share in self.domain_shares.items():
            if not (share > 0 and math.isfinite(share)):
                shares_ok = False
                problems.append((("domain_shares", domain), f"share must be a positive number, got {share!r}", share))
            elif not any(fnmatchcase(domain, pattern) for pattern in domain_globs):
                problems.append((("domain_shares", domain), f"no glob in envs.mix selects domain {domain!r}", share))
        total = sum(self.domain_shares.values())
        if self.domain_shares and shares_ok and abs(total - 1.0) > 1e-6:
            problems.append((("domain_shares",), f"shares must sum to 1, got {total:g}", self.domain_shares))
        raise_at("EnvsConfig", problems)
        return self


class RewardTerm(Section):
    """One weighted reward function applied to a domain's episodes."""

    name: str = Field(..., min_length=1, description="Registered reward function name (see `jointrl.rewards.names()`).")
    weight: float = Field(
        1.0, allow_inf_nan=False, description="Multiplier of this term in the scalar reward (negative = penalty)."
    )
    params: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments passed to the reward function.")

    @model_validator(mode="after")
    def _registered(self) -> RewardTerm:
        if self.name not in reward_registry.names():
            fail_at("RewardTerm", ("name",), reward_registry.unknown_message(self.name), self.name)
        problems = [
            (("params", key) if key is not None else ("params",), message, self.params.get(key, self.params))
            for key, message in reward_registry.param_problems(self.name, self.params)
        ]
        raise_at("RewardTerm", problems)
        return self


class RewardsConfig(Section):
    """How episodes are scored: weighted reward terms per domain, and how scores are normalised into one batch."""

    domains: dict[str, list[RewardTerm]] = Field(
        default_factory=dict, description="Reward terms per domain name, e.g. {swe: [{name: resolved, weight: 1.0}]}."
    )
    envs: dict[str, list[RewardTerm]] = Field(
        default_factory=dict,
        description="Reward terms per env-id glob, e.g. {'cad/*:hard': [...]}; the first glob matching an "
        "episode's env id takes precedence over its domain's terms.",
    )
    default: list[RewardTerm] = Field(
        default_factory=lambda: [RewardTerm(name="correctness")],
        min_length=1,
        description="Reward terms for episodes that neither `envs` nor `domains` covers.",
    )
    normalization: Literal["none", "group", "domain", "batch"] = Field(
        "group",
        description="none = raw scores; group = per prompt group (this is GRPO's advantage: the algorithm must not "
        "standardise again); domain = running mean/std per domain and tier; batch = over the whole batch.",
    )
    decay: float = Field(
        0.9,
        ge=0,
        le=1,
        description="domain normalisation: weight the running mean/std keep on their history each step "
        "(1 = all history alike, 0 = this step only).",
    )
    by_tier: bool = Field(True, description="domain normalisation: separate running mean/std per tier within a domain.")
    alarms: AlarmConfig = Field(default_factory=AlarmConfig, description="Reward-hacking and stagnation alarms.")

    @staticmethod
    def _list_problems(where: Loc, terms: list[RewardTerm]) -> list[tuple[Loc, str, Any]]:
        """An empty list, or a reward listed twice (its components would share one metric name), at their keys."""
        if not terms:
            return [(where, "a reward list needs at least one term", [])]
        names = [term.name for term in terms]
        return [
            ((*where, i, "name"), f"reward {name!r} is listed more than once in this list", name)
            for i, name in enumerate(names)
            if name in names[:i]
        ]

    @field_validator("domains", "envs")
    @classmethod
    def _lists(cls, value: dict[str, list[RewardTerm]]) -> dict[str, list[RewardTerm]]:
        raise_at("RewardsConfig", [p for key, terms in value.items() for p in cls._list_problems((key,), terms)])
        return value

    @field_validator("default")
    @classmethod
    def _default_list(cls, value: list[RewardTerm]) -> list[RewardTerm]:
        raise_at("RewardsConfig", cls._list_problems((), value))
        return value


class TierBudgets(Section):
    """Thinking budget in tokens of each tier; `</think>` is forced once an episode's budget is spent."""

    low: int = Field(512, gt=0, description="Thinking tokens allowed in the low tier.")
    high: int = Field(4096, gt=0, description="Thinking tokens allowed in the high tier.")
    max: int = Field(16384, gt=0, description="Thinking tokens allowed in the max tier.")

    @model_validator(mode="after")
    def _ordered(self) -> TierBudgets:
        problems: list[tuple[Loc, str, Any]] = []
        if self.high < self.low:
            problems.append((("high",), f"high={self.high} is below low={self.low}", self.high))
        if self.max < self.high:
            problems.append((("max",), f"max={self.max} is below high={self.high}", self.max))
        raise_at("TierBudgets", problems)
        return self


class TierSelection(Section):
    """How each task's thinking tier is chosen."""

    mode: Literal["fixed", "ratios", "auto"] = Field(
        "fixed",
        description="fixed = by env glob (else the env's default tier); ratios = sampled by `ratios`; "
        "auto = by a complexity rule of the task.",
    )
    fixed: dict[str, Tier] = Field(
        default_factory=dict, description="Env-id glob -> tier, used in fixed mode; the first matching glob wins."
    )
    ratios: dict[Tier, float] = Field(
        default_factory=dict, description="Tier -> probability (summing to 1), used in ratios mode."
    )

    @model_validator(mode="after")
    def _check(self) -> TierSelection:
        problems: list[tuple[Loc, str, Any]] = []
        for tier, p in self.ratios.items():
            if not (p >= 0 and math.isfinite(p)):
                problems.append((("ratios", tier), f"probability must be >= 0, got {p!r}", p))
        if self.mode == "ratios" and not problems:
            total = sum(self.ratios.values())
            if abs(total - 1.0) > 1e-6:
                message = f"ratios mode needs tier probabilities summing to 1, got {total:g}"
                problems.append((("ratios",), message, self.ratios))
        raise_at("TierSelection", problems)
        return self


class RolloutConfig(Section):
    """Episode generation: workers, group size, thinking tiers, sampling and limits."""

    workers: int = Field(1, ge=1, description="Rollout worker actors, each with a policy copy and an env pool.")
    group_size: int = Field(8, ge=1, description="Samples per prompt (G); group-based advantages need G >= 2.")
    tiers: TierBudgets = Field(default_factory=TierBudgets, description="Thinking budget per tier.")
    tier_selection: TierSelection = Field(default_factory=TierSelection, description="How each task's tier is chosen.")
    max_turns: int = Field(8, ge=1, description="Assistant turns per episode before it is cut off.")
    max_new_tokens_per_turn: int = Field(1024, gt=0, description="Generated tokens allowed in one assistant turn.")
    max_new_tokens_per_episode: int = Field(4096, gt=0, description="Generated tokens allowed over a whole episode.")
    temperature: float = Field(1.0, ge=0, allow_inf_nan=False, description="Sampling temperature (0 = greedy).")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling mass (1 = off).")
    top_k: int = Field(0, ge=0, description="Sample among the k most likely tokens (0 = off).")
    max_staleness: int = Field(
        0, ge=0, description="Policy versions rollouts may lag the learner by (0 = synchronous; k > 0 = async)."
    )
    mxfp4_experts: bool = Field(False, description="Quantise routed experts to MXFP4 in the rollout policy copies.")
    partial: bool = Field(
        False, description="Async mode only (max_staleness >= 1): a batch closes once prompts_per_step whole prompt "
        "groups have finished; groups still running carry over to a later batch and take newer weights mid-episode, "
        "each token recording its version (never older than the trained step - max_staleness: a group about to "
        "expire makes its batch wait). A group carries for at most max_staleness steps, so this pays off from 2."
    )
    partial_spare_prompts: int = Field(
        1, ge=1, description="partial: prompt groups kept in flight beyond prompts_per_step, i.e. how many slow "
        "groups a batch can close without."
    )
    episode_timeout_s: float = Field(600.0, gt=0, description="Wall-clock seconds before an episode is marked failed.")
    max_rows: int = Field(32, ge=1, description="Sequences one worker's engine decodes at once (its cache rows).")
    weight_transport: Literal["object_store", "collective"] = Field(
        "object_store", description="How the learner ranks' weights reach the workers: object_store = each bucket "
        "through Ray's object store; collective = torch.distributed broadcasts from each rank to every worker (gloo, "
        "NCCL when every member has CUDA) over groups the driver's TCP store sets up once per run."
    )

    @model_validator(mode="after")
    def _check(self) -> RolloutConfig:
        if self.max_new_tokens_per_turn > self.max_new_tokens_per_episode:
            fail_at(
                "RolloutConfig",
                ("max_new_tokens_per_turn",),
                f"max_new_tokens_per_turn={self.max_new_tokens_per_turn} exceeds "
                f"max_new_tokens_per_episode={self.max_new_tokens_per_episode}",
                self.max_new_tokens_per_turn,
            )
        if self.partial and self.max_staleness < 1:
            fail_at(
                "RolloutConfig", ("partial",),
                "partial rollouts carry episodes into later steps, which needs async mode: set max_staleness >= 1",
                self.partial,
            )
        return self


class AlgorithmConfig(Section):
    """The policy-gradient objective: advantages, clipping, KL, entropy, filters and routing replay."""

    name: AlgorithmName = Field(
        "grpo", description="grpo, dr_grpo (no std scaling), rloo, reinforce_pp (REINFORCE++), ppo (critic + GAE), gspo."
    )
    clip_eps_low: float = Field(0.2, ge=0, description="Lower clip range of the importance ratio: 1 - eps_low.")
    clip_eps_high: float = Field(
        0.2, ge=0, description="Upper clip range of the ratio: 1 + eps_high (clip-higher when > eps_low)."
    )
    dual_clip_c: float | None = Field(
        None, gt=1, description="Dual-clip bound c > 1 on the loss of negative-advantage tokens; null = off."
    )
    kl_estimator: Literal["k1", "k2", "k3"] = Field("k3", description="Estimator of KL to the frozen reference policy.")
    kl_coef: float = Field(0.0, ge=0, description="Weight of the KL term (0 = no reference policy).")
    kl_mode: Literal["loss", "reward"] = Field("loss", description="Apply KL as a loss term or subtract it from the reward.")
    entropy_coef: float = Field(0.0, ge=0, description="Weight of the entropy bonus.")
    loss_agg: Literal["token", "sequence", "token_sum_constant"] | None = Field(
        None, description="token = mean over all tokens of the batch; sequence = mean per sequence, then over "
        "sequences; token_sum_constant = sum over tokens / (sequences x loss_token_budget) (Dr. GRPO); null = the "
        "algorithm's own (token_sum_constant for dr_grpo, token otherwise)."
    )
    loss_token_budget: int | None = Field(
        None, gt=0, description="The constant of token_sum_constant: generated tokens one sequence may have; "
        "null = rollout.max_new_tokens_per_episode."
    )
    tis_cap: float | None = Field(
        2.0, ge=1, description="Cap C of truncated importance weights min(pi_old / pi_behaviour, C); null = off."
    )
    dynamic_sampling: bool = Field(False, description="Drop prompt groups whose rewards all agree (zero variance).")
    overlong_filter: bool = Field(False, description="Mask the loss of episodes cut off by a token or turn limit.")
    tis_level: Literal["token", "sequence"] = Field(
        "token", description="Truncated importance weights per token, or one per sequence (product of its token ratios)."
    )
    routing_replay: Literal["off", "r2", "r3"] = Field(
        "r3", description="Reuse rollout expert choices in the learner: r3 = rollout routing, r2 = old-policy routing."
    )
    reference_routing: Literal["replay", "own"] = Field(
        "replay", description="How the KL reference routes: replay = as the trained policy's forward (router-bias "
        "balancing is not penalised as drift); own = afresh (a fixed anchor that also counts routing drift)."
    )
    gamma: float = Field(1.0, gt=0, le=1, description="ppo: discount of GAE.")
    gae_lambda: float = Field(0.95, ge=0, le=1, description="ppo: lambda of GAE.")
    value_coef: float = Field(0.5, ge=0, description="ppo: weight of the value loss.")
    value_clip: float | None = Field(
        0.2, gt=0, description="ppo: clip range of the value prediction around the old value; null = unclipped."
    )


class LearnerConfig(Section):
    """The training ranks: parallelism, optimizer and precision."""

    ranks: int = Field(1, ge=1, description="Learner processes (one per device).")
    ep_size: int = Field(1, ge=1, description="Expert-parallel group size; must divide ranks and model.n_experts.")
    zero_stage: Literal[1, 2] = Field(1, description="DeepSpeed ZeRO stage.")
    lr: float = Field(1e-6, gt=0, description="Peak learning rate of the RL stage.")
    betas: tuple[float, float] = Field((0.9, 0.95), description="Adam beta1 and beta2.")
    weight_decay: float = Field(0.0, ge=0, description="Decoupled weight decay.")
    warmup_steps: int = Field(0, ge=0, description="Linear warm-up steps to the peak learning rate.")
    norm_lr_scale: float = Field(
        1.0, gt=0, allow_inf_nan=False,
        description="Learning-rate multiplier of the norm layers' gains (1-D, near 1, so Adam's lr-sized step moves "
        "them relatively little; the final norm's gain is the policy's sampling temperature).",
    )
    grad_clip: float | None = Field(1.0, gt=0, description="Global gradient-norm clip; null = off.")
    micro_batch_tokens: int = Field(8192, gt=0, description="Token budget of one packed micro-batch.")
    updates_per_step: int = Field(
        1, ge=1, description="Optimizer steps per RL batch (mini-batches); > 1 reuses the batch off-policy with clipping."
    )
    dtype: Literal["fp32", "bf16"] = Field("fp32", description="Precision of the learner's weights and compute.")
    backend: Literal["auto", "gloo", "nccl"] = Field(
        "auto", description="torch.distributed backend; auto = nccl with CUDA, else gloo."
    )
    activation_checkpointing: bool = Field(
        False, description="Keep only each layer's input and recompute the layer in the backward pass."
    )

    @field_validator("betas")
    @classmethod
    def _betas(cls, value: tuple[float, float]) -> tuple[float, float]:
        bad = [((i,), f"beta must be in [0, 1), got {b!r}", b) for i, b in enumerate(value) if not 0 <= b < 1]
        raise_at("LearnerConfig", bad)
        return value

    @model_validator(mode="after")
    def _check(self) -> LearnerConfig:
        if self.ranks % self.ep_size:
            message = f"ep_size={self.ep_size} does not divide ranks={self.ranks}"
            fail_at("LearnerConfig", ("ep_size",), message, self.ep_size)
        return self


class SFTConfig(Section):
    """The supervised cold start on environment demonstrations."""

    epochs: int = Field(1, ge=1, description="Passes over the demonstration set.")
    lr: float = Field(1e-4, gt=0, description="Peak learning rate of the SFT stage.")
    batch_size: int = Field(8, ge=1, description="Sequences per SFT optimizer step.")
    demos_per_env: int = Field(4, ge=0, description="Demonstrations played per env id of the mix (train seeds).")
    max_len: int = Field(1024, gt=1, description="Longest training sequence in tokens; longer demos are cut.")
    group_by_length: bool = Field(
        False, description="Batch demonstrations of similar length (within shuffled windows, rl/sft.py batch_order): "
        "up to 3x faster steps on a mix of short and long episodes, but batches of one family at a time; off by "
        "default because learning_cpu's cold start then left text-count at 0.08 instead of 0.45 (docs/learning.md).")
    drill_steps: int = Field(
        0, ge=0, description="Copy-drill steps before SFT (rl/drill.py): packed (message -> reply) pairs of the "
        "demonstrations, loss on every token; 0 = no drill."
    )
    drill_demos_per_env: int = Field(
        0, ge=0, description="Extra demonstrations per env id for the drill's pairs (train seeds after the SFT demos')."
    )
    drill_pack: int = Field(8, ge=1, description="(message -> reply) pairs packed into one drill sequence.")
    drill_turns: Literal["calls", "tool", "all"] = Field(
        "calls", description="Which assistant turns the drill pairs: calls = those that call tools; tool = also "
        "answers to tool output (copying a figure out of it); all = also answers to a user message."
    )
    jsonl: list[str] = Field(
        default_factory=list, description="Extra conversation files: JSONL, one {messages, tools?, tier?} object per line, or Parquet "
        "with those columns."
    )


class TrainerConfig(Section):
    """The outer loop: seed, length, batch of prompts, evaluation cadence, SFT stage."""

    seed: int = Field(0, ge=0, description="Run seed: task sampling, init and sampling RNGs derive from it.")
    steps: int = Field(100, ge=0, description="RL optimizer steps.")
    prompts_per_step: int = Field(16, ge=1, description="Prompts per step; each is sampled rollout.group_size times.")
    eval_every: int = Field(0, ge=0, description="Steps between held-out evaluations (0 = never).")
    eval_seeds_per_env: int = Field(8, ge=1, description="Held-out seeds per env id of the mix in the run's evaluations.")
    eval_samples: int = Field(1, ge=1, description="Samples per held-out task (pass rate is their mean; pass@k uses them).")
    eval_temperature: float = Field(
        0.0, ge=0, allow_inf_nan=False, description="Sampling temperature of the run's evaluations (0 = greedy)."
    )
    sft: SFTConfig = Field(default_factory=SFTConfig, description="Cold-start SFT settings.")


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


def _unknown_preset_message(name: str) -> str:
    """The error text for a preset name that neither the code table nor recipes/models/ knows."""
    known = presets.preset_names()
    hint = difflib.get_close_matches(name, known, n=1)
    suffix = f" (did you mean {hint[0]!r}?)" if hint else f"; known: {', '.join(known)}"
    return f"unknown model preset {name!r}{suffix}"


def preset_fields(name: str) -> dict[str, Any]:
    """The unvalidated ModelConfig fields of a code or file preset."""
    if name in presets.PRESETS:
        return presets.PRESETS[name].model_dump()
    path = presets.preset_path(name)
    if path is None:
        fail_at("ModelConfig", (PRESET_KEY,), _unknown_preset_message(name), name)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        fail_at("ModelConfig", (PRESET_KEY,), f"{path}: invalid YAML: {exc}", name)
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        fail_at("ModelConfig", (PRESET_KEY,), f"{path} holds no `model:` mapping", name)
    return dict(data["model"])


def pretrained_fields(path: Any) -> dict[str, Any]:
    """The ModelConfig fields of the checkpoint `model.from_pretrained` names (jointrl's, or transformers' imported)."""
    from jointrl.model.pretrained import pretrained_config

    if not isinstance(path, str) or not path:
        fail_at("ModelConfig", (PRETRAINED_KEY,), f"expected a checkpoint directory, got {path!r}", path)
    try:
        return pretrained_config(path).model_dump()
    except ValueError as err:
        fail_at("ModelConfig", (PRETRAINED_KEY,), str(err), path)


# Algorithms whose advantage is a baseline difference that must not be divided by a group std.
SELF_BASELINED = ("dr_grpo", "rloo")


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
        raise_at("RunConfig", problems)
        return self
