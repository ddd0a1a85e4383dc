"""The algorithm, learner and trainer sections: the objective, the ranks and optimizer, the outer loop and SFT."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from jointrl.rl.config.section import Section, fail_at, raise_at


AlgorithmName = Literal["grpo", "dr_grpo", "rloo", "reinforce_pp", "ppo", "gspo"]
# Algorithms whose advantage compares samples of the same prompt, so a group needs two or more.
GROUP_ALGORITHMS = frozenset({"grpo", "dr_grpo", "rloo", "gspo"})
# Algorithms whose advantage is a baseline difference that must not be divided by a group std.
SELF_BASELINED = ("dr_grpo", "rloo")
# Algorithms that train a critic (rl/algorithms/table.py says which; a test keeps the two in step).
CRITIC_ALGORITHMS = frozenset({"ppo"})


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
    norm_lr_gains: Literal["all", "final"] = Field(
        "all",
        description="Which gains take norm_lr_scale: every norm layer's, or the final norm's only (the temperature; "
        "the inner gains, 1-D and each moved by Adam on its own noisy gradient, drift apart at that rate).",
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
    share_openings: bool = Field(
        False, description="Run the opening that a micro-batch's episodes share (an env's system prompt and tool "
        "schemas) once, each row going on from a copy of its state: the same log-probs and gradients for fewer "
        "tokens (model/openings.py). Not with expert parallelism (ranks would run different numbers of forwards "
        "through the experts' all-to-all) or a critic (values are read at every position).")

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
        if self.share_openings and self.ep_size > 1:
            message = ("share_openings runs a different number of forwards on each rank, which expert parallelism's "
                       "all-to-all cannot follow: set ep_size to 1 or share_openings to false")
            fail_at("LearnerConfig", ("share_openings",), message, self.share_openings)
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
    share_openings: bool = Field(
        False, description="Run the opening that a batch's demonstrations share (an env's system prompt and tool "
        "schemas) once per batch, each row going on from a copy of its state: the same loss and gradients for fewer "
        "tokens (model/openings.py); the balance and indexer losses then count the opening once, not once per row.")
    span_steps: int = Field(
        0, ge=0, description="Span-copy steps before the drill (rl/drill.py train_spans): the messages of the "
        "demonstrations, each followed by a random span of itself, loss on the span only; 0 = none."
    )
    drill_steps: int = Field(
        0, ge=0, description="Copy-drill steps before SFT (rl/drill.py): packed (message -> reply) pairs of the "
        "demonstrations, loss on every token; 0 = no drill."
    )
    drill_demos_per_env: int = Field(
        0, ge=0, description="Extra demonstrations per env id for the drill's pairs (train seeds after the SFT demos')."
    )
    drill_pack: int = Field(8, ge=1, description="(message -> reply) pairs packed into one drill sequence.")
    drill_max_len: int | None = Field(
        None, gt=1, description="Longest drill sequence in tokens (None = max_len): a mix with long tool output "
        "needs a long SFT max_len, while a pack cut short still trains every copy it holds, at a fraction of the cost.")
    drill_turns: Literal["calls", "tool", "all"] = Field(
        "calls", description="Which assistant turns the drill pairs: calls = those that call tools; tool = also "
        "answers to tool output (copying a figure out of it); all = also answers to a user message."
    )
    drill_redraw: float = Field(
        0.0, ge=0.0, le=1.0, description="Share of the drill's demonstrations whose slots (the values a tool call "
        "copies from the task and fewer than half the env id's tasks contain) take other slots' values of their kind, "
        "the same way in every message (rl/redraw.py): a guess from one slot's few values then no longer predicts "
        "them, only a copy does; the SFT demos and the copy checks keep the env's own; 0 = none. On one seed it made "
        "channel's length copy and cost text-count its names (docs/learning.md, session 35)."
    )
    drill_redraw_kinds: list[Literal["number", "name"]] = Field(
        ["number", "name"], min_length=1, description="Which slots drill_redraw redraws: numbers (a CAD task's "
        "dimensions), names (a file's stem, a word), or both. Names drawn from the env's own words taught text-count "
        "to finish a known word instead of copying (docs/learning.md, session 35)."
    )
    drill_in_sft: bool = Field(
        False, description="Each SFT step also trains one batch of the drill's pairs, its loss added to the step's: "
        "the copy the drill formed keeps its gradient while SFT learns the chat format's demonstrations (six epochs "
        "over 256 demos a family lost it on one seed, docs/learning.md, sessions 31-32); not yet measured."
    )
    drill_format: Literal["text", "chat"] = Field(
        "text", description="How a drill pair is written: text = the message, an arrow, then the reply's tool-call "
        "arguments or content; chat = the messages from the question to the turn as the chat template renders them "
        "(no system prompt or tool schemas), the loss on the turn, so the pair is in the tokens SFT and the policy "
        "use; on one cold start it copied less than text (docs/learning.md, session 31)."
    )
    drill_balance: Literal["pair", "env"] = Field(
        "pair", description="How the drill draws pairs: pair = uniformly over all pairs (an env id with more tool "
        "turns gets more); env = an env id uniformly, then one of its pairs (a mix of families drills each alike)."
    )
    drill_loss: Literal["all", "reply"] = Field(
        "all", description="Which tokens of a drill pair the loss counts: all, or the reply's only. A message's own "
        "random numbers are noise to predict: counted, they held a list's copy at 0.45 of its digits after 2,500 "
        "steps, against 0.99 (benchmarks/list_copy.py, docs/learning.md)."
    )
    check_demos: int = Field(
        0, ge=0, description="Unseen demonstrations per env id (train seeds after the SFT and drill demos') that the "
        "finished cold start is checked on: the fraction it reproduces token for token under teacher forcing "
        "(rl/demo_check.py), which followed each family's held-out pass rate; 0 = no check."
    )
    drill_check_every: int = Field(
        0, ge=0, description="Drill steps between copy checks on the check demos' drill pairs (and one at the "
        "drill's end): each family's reproduced fraction as the drill goes, which its one loss for the mix hides; "
        "needs check_demos; 0 = none."
    )
    demo_cache: str | None = Field(
        None, description="Directory that keeps played demonstrations, keyed by a digest of each env's code, Python "
        "and the installed packages (rl/demo_cache.py): a later cold start with the same code reads them back "
        "instead of playing them again; None = play them every run."
    )
    jsonl: list[str] = Field(
        default_factory=list, description="Extra conversation files: JSONL, one {messages, tools?, tier?} object per line, or Parquet "
        "with those columns."
    )

    @model_validator(mode="after")
    def _check(self) -> SFTConfig:
        if self.drill_check_every and not self.check_demos:
            fail_at("SFTConfig", ("drill_check_every",), "the drill's copy checks run on the check demos: set "
                    "check_demos too", self.drill_check_every)
        return self


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
