"""The named RL algorithms and the loss of one learner micro-batch.

`ALGORITHMS` names each combination of advantage estimator, policy loss and critic; `sequence_advantages`
is the driver's entry point (whole batch, [N] rewards), `rl_loss` the learner's (one micro-batch, [N, T]
tokens). Everything here composes the pure functions of `rl.advantages` and `rl.losses`.

Shape legend: N = sequences of a micro-batch, T = positions, right-padded and aligned on predicted tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable, Sequence

import torch
from torch import Tensor

from jointrl.rl.algorithms.advantages import group_advantages, reinforce_pp_advantages, rloo_advantages
from jointrl.rl.config.training import AlgorithmConfig
from jointrl.rl.algorithms.losses import (
    aggregate,
    gspo_loss,
    kl_penalty,
    mismatch_metrics,
    ppo_clip_loss,
    truncated_importance_weights,
    value_loss,
)

AdvantageFn = Callable[[Tensor, Tensor, Tensor], Tensor]


@dataclass(frozen=True)
class Algorithm:
    """One named algorithm: where its advantages come from, which policy loss it trains, whether it has a critic."""

    name: str
    # (rewards [N], group_ids [N], valid [N]) -> [N]; None = GAE on the learner (needs a critic)
    advantages: AdvantageFn | None
    policy_loss: str  # key of POLICY_LOSSES
    critic: bool
    loss_agg: str = "token"  # the aggregation the algorithm is defined with, unless the recipe names another


ALGORITHMS: dict[str, Algorithm] = {
    "grpo": Algorithm("grpo", group_advantages, "ppo_clip", critic=False),
    "dr_grpo": Algorithm(
        "dr_grpo", partial(group_advantages, scale_std=False), "ppo_clip", critic=False, loss_agg="token_sum_constant"
    ),
    "rloo": Algorithm("rloo", rloo_advantages, "ppo_clip", critic=False),
    "reinforce_pp": Algorithm("reinforce_pp", reinforce_pp_advantages, "ppo_clip", critic=False),
    "ppo": Algorithm("ppo", None, "ppo_clip", critic=True),
    "gspo": Algorithm("gspo", group_advantages, "gspo", critic=False),
}


def _algorithm(name: str) -> Algorithm:
    """ALGORITHMS[name], or a ValueError listing the known names."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; known: {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]


def sequence_advantages(
    name: str, rewards: Sequence[float] | Tensor, group_ids: Sequence[int] | Tensor, valid: Sequence[bool] | Tensor
) -> Tensor:
    """The advantage of each sequence of the batch under algorithm `name` (ALGORITHMS[name].advantages).

    rewards [N] float, group_ids [N] integer (samples of one prompt share an id), valid [N] bool (False for
    failed or filtered episodes: advantage 0, left out of every statistic) -> [N]. Lists are accepted.
    ppo has no sequence advantage: its advantages come from GAE with the critic on the learner.
    """
    algorithm = _algorithm(name)
    if algorithm.advantages is None:
        raise ValueError(f"algorithm {name!r} takes its advantages from GAE with a critic, not from sequence rewards")
    if not isinstance(rewards, Tensor):
        rewards = torch.tensor(list(rewards), dtype=torch.get_default_dtype())
    if not isinstance(group_ids, Tensor):
        group_ids = torch.tensor(list(group_ids), dtype=torch.long)
    if not isinstance(valid, Tensor):
        valid = torch.tensor(list(valid), dtype=torch.bool)
    return algorithm.advantages(rewards, group_ids, valid)


@dataclass
class LossInputs:
    """One micro-batch of the learner, [N, T] aligned on predicted tokens."""

    logprobs: Tensor  # [N, T] learner log-probs, with grad
    old_logprobs: Tensor  # [N, T] pi_old (the learner before this step's updates), no grad
    behavior_logprobs: Tensor  # [N, T] log-probs the rollout sampled with
    advantages: Tensor  # [N, T] token advantages (sequence advantage broadcast, or GAE)
    mask: Tensor  # [N, T] float, 1 on trained policy tokens
    entropy: Tensor | None = None  # [N, T] with grad, when entropy_coef > 0
    ref_logprobs: Tensor | None = None  # [N, T] frozen reference, when kl_coef > 0
    values: Tensor | None = None  # [N, T] critic, with grad (ppo)
    old_values: Tensor | None = None  # [N, T] critic before this step's updates (ppo)
    returns: Tensor | None = None  # [N, T] GAE returns (ppo)


PolicyLossFn = Callable[[AlgorithmConfig, Tensor, Tensor, Tensor, Tensor], tuple[Tensor, dict[str, Tensor]]]


def _ppo_clip(
    cfg: AlgorithmConfig, logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor
) -> tuple[Tensor, dict[str, Tensor]]:
    """ppo_clip_loss with the config's clip range and dual-clip bound; advantages [N, T]."""
    return ppo_clip_loss(logprobs, old_logprobs, advantages, cfg.clip_eps_low, cfg.clip_eps_high, cfg.dual_clip_c)


def _gspo(
    cfg: AlgorithmConfig, logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor
) -> tuple[Tensor, dict[str, Tensor]]:
    """gspo_loss with one advantage per sequence: the mean of the row's masked token advantages.

    For a broadcast sequence advantage that is exactly its first masked value; with kl_mode "reward" it is
    A_i - kl_coef * (mean KL estimate over the sequence), matching GSPO's length-normalised ratio.
    """
    if cfg.dual_clip_c is not None:
        raise ValueError(f"dual_clip_c={cfg.dual_clip_c!r} is not defined for gspo's sequence ratio; set it to null")
    keep = mask != 0
    first = advantages.gather(1, keep.int().argmax(-1, keepdim=True))  # [N, 1]
    # first + mean(A - first) equals mean(A) and is exact when the row is one broadcast value.
    offsets = torch.where(keep, advantages - first, torch.zeros_like(advantages))  # [N, T]
    sequence_advantage = first[:, 0] + offsets.sum(-1) / keep.sum(-1).clamp(min=1)  # [N]
    return gspo_loss(logprobs, old_logprobs, sequence_advantage, mask, cfg.clip_eps_low, cfg.clip_eps_high)


@dataclass(frozen=True)
class PolicyLoss:
    """A per-token policy loss and the aggregation its objective is defined with (None = cfg.loss_agg)."""

    fn: PolicyLossFn
    loss_agg: str | None


POLICY_LOSSES: dict[str, PolicyLoss] = {
    "ppo_clip": PolicyLoss(_ppo_clip, loss_agg=None),
    # GSPO's value and gradient are the paper's only under the per-sequence mean (see gspo_loss).
    "gspo": PolicyLoss(_gspo, loss_agg="sequence"),
}


def _check_inputs(cfg: AlgorithmConfig, x: LossInputs, algorithm: Algorithm) -> None:
    """Raise ValueError for a missing input the config needs, or a tensor whose shape is not [N, T]."""
    if x.logprobs.dim() != 2:
        raise ValueError(f"logprobs must be [N, T], got shape {tuple(x.logprobs.shape)}")
    critic_reason = f"algorithm {cfg.name!r}, which trains a critic,"
    requirements = (
        ("ref_logprobs", cfg.kl_coef > 0, f"kl_coef={cfg.kl_coef!r}"),
        ("entropy", cfg.entropy_coef > 0, f"entropy_coef={cfg.entropy_coef!r}"),
        ("values", algorithm.critic, critic_reason),
        ("old_values", algorithm.critic, critic_reason),
        ("returns", algorithm.critic, critic_reason),
    )
    for field, required, reason in requirements:
        if required and getattr(x, field) is None:
            raise ValueError(f"LossInputs.{field} is None but {reason} needs it")
    shape = x.logprobs.shape
    optional = tuple(field for field, _, _ in requirements)
    for field in ("old_logprobs", "behavior_logprobs", "advantages", "mask", *optional):
        value = getattr(x, field)
        if value is not None and value.shape != shape:
            raise ValueError(f"LossInputs.{field} has shape {tuple(value.shape)}, logprobs has {tuple(shape)}")


def rl_loss(
    cfg: AlgorithmConfig, x: LossInputs, total_tokens: float, total_sequences: float, token_budget: float | None = None
) -> tuple[Tensor, dict[str, float]]:
    """The loss of one micro-batch, as its share of the whole step's objective. In order:

    1. advantages: A_t as given; with kl_coef > 0 and kl_mode "reward", A_t <- A_t - kl_coef * sg[k_t], the
       token's own KL estimate k_t to the reference (a per-token KL reward, REINFORCE++, Hu 2025; it is not
       summed over later tokens as a return would be).
    2. policy loss per token: POLICY_LOSSES[ALGORITHMS[cfg.name].policy_loss] (PPO-clip with clip-higher and
       dual-clip, or GSPO with the row's mean masked advantage as its sequence advantage);
    3. times truncated importance weights min(pi_old / pi_behaviour, tis_cap) at tis_level, when tis_cap is set;
    4. aggregated with cfg.loss_agg, or when it is null the algorithm's own (`Algorithm.loss_agg`: Dr. GRPO's
       constant normaliser total_sequences * token_budget, the token mean otherwise); GSPO always aggregates
       per sequence, the level its objective is defined at;
    5. + kl_coef * aggregate(k_t) (same aggregation) when kl_coef > 0 and kl_mode is "loss";
    6. - entropy_coef * aggregate(entropy) (same aggregation) when entropy_coef > 0;
    7. + value_coef * aggregate(value_loss, "token") for algorithms with a critic.

    total_tokens and total_sequences are global over every micro-batch and rank of the step (see
    `aggregate`), so the returned losses summed over them are the whole-batch loss.

    Metrics are floats, each this micro-batch's share of the step's value, so summing a metric over
    micro-batches and ranks gives the batch value; a key ending in `_max` combines by max instead.
    "loss/<term>" is the term as it enters "loss/total" (coefficient and sign included); token-level
    statistics ("policy/*", "mismatch/*", "value/mean") divide by total_tokens. Emitted when relevant:
    "policy/tis_*" with TIS, "policy/kl_ref" with ref_logprobs, "loss/kl" with the KL loss term,
    "policy/entropy" with entropy, "loss/entropy" with the entropy bonus, "loss/value" and "value/mean"
    with a critic.
    """
    algorithm = _algorithm(cfg.name)
    policy = POLICY_LOSSES[algorithm.policy_loss]
    _check_inputs(cfg, x, algorithm)
    mode = policy.loss_agg or cfg.loss_agg or algorithm.loss_agg
    mask = x.mask

    def share(term: Tensor, how: str = mode) -> Tensor:
        return aggregate(term, mask, how, total_tokens, total_sequences, token_budget)

    stats: dict[str, Tensor] = {}
    kl_tok = None if x.ref_logprobs is None else kl_penalty(x.logprobs, x.ref_logprobs, cfg.kl_estimator)  # [N, T]
    kl_on = cfg.kl_coef > 0

    advantages = x.advantages.detach()  # [N, T]
    if kl_on and cfg.kl_mode == "reward":
        advantages = advantages - cfg.kl_coef * kl_tok.detach()

    loss_tok, info = policy.fn(cfg, x.logprobs, x.old_logprobs, advantages, mask)  # [N, T]
    if cfg.tis_cap is not None:
        weights = truncated_importance_weights(x.old_logprobs, x.behavior_logprobs, mask, cfg.tis_cap, cfg.tis_level)
        loss_tok = loss_tok * weights
        stats["policy/tis_weight_mean"] = share(weights, "token")
        stats["policy/tis_truncated_frac"] = share((weights >= cfg.tis_cap).to(weights.dtype), "token")

    total = share(loss_tok)
    stats["loss/policy"] = total
    stats["policy/ratio_mean"] = share(info["ratio"], "token")
    stats["policy/clip_frac"] = share(info["clipped"], "token")
    stats["policy/dual_clip_frac"] = share(info["dual_clipped"], "token")

    if kl_tok is not None:
        stats["policy/kl_ref"] = share(kl_tok, "token")
    if kl_on and cfg.kl_mode == "loss":
        term = cfg.kl_coef * share(kl_tok)
        stats["loss/kl"] = term
        total = total + term

    if x.entropy is not None:
        stats["policy/entropy"] = share(x.entropy, "token")
    if cfg.entropy_coef > 0:
        term = -cfg.entropy_coef * share(x.entropy)
        stats["loss/entropy"] = term
        total = total + term

    if algorithm.critic:
        term = cfg.value_coef * share(value_loss(x.values, x.old_values, x.returns, cfg.value_clip), "token")
        stats["loss/value"] = term
        stats["value/mean"] = share(x.values, "token")
        total = total + term

    stats["loss/total"] = total
    # One device-to-host copy for every metric.
    values = torch.stack([value.detach().to(torch.float32) for value in stats.values()]).tolist()
    metrics = dict(zip(stats, values))
    metrics.update(mismatch_metrics(x.old_logprobs, x.behavior_logprobs, mask, total_tokens=total_tokens))
    return total, metrics
