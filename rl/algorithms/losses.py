"""Per-token terms of the policy-gradient objective, and the one reduction that keeps them exact when a
step is split over micro-batches and ranks.

Every term is a pure function returning [N, T] (it never reduces by itself); `aggregate` turns a term into
this micro-batch's share of the whole-batch mean, so summing the shares over micro-batches and ranks gives
exactly the mean of the unsplit batch.

Shape legend: N = sequences of a micro-batch, T = positions, right-padded and aligned on predicted tokens
(position t holds the log-prob of target token t); mask [N, T] is 1 on trained policy tokens.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor


def _check_shapes(reference_name: str, reference: Tensor, **others: Tensor) -> None:
    """Raise ValueError naming the first tensor whose shape differs from the reference's."""
    for name, value in others.items():
        if value.shape != reference.shape:
            raise ValueError(
                f"{name} shape {tuple(value.shape)} does not match {reference_name} shape {tuple(reference.shape)}"
            )


def _check_clip(eps_low: float, eps_high: float) -> None:
    """Validate the clip range [1 - eps_low, 1 + eps_high] (eps_low >= 1 leaves ratios unclipped from below)."""
    if not eps_low >= 0:
        raise ValueError(f"eps_low must be >= 0, got {eps_low!r}")
    if not eps_high >= 0:
        raise ValueError(f"eps_high must be >= 0, got {eps_high!r}")


def ppo_clip_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    eps_low: float,
    eps_high: float,
    dual_clip_c: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO-clip (Schulman et al. 2017) with DAPO's clip-higher (Yu et al. 2025) and dual-clip (Ye et al. 2020).

    r = exp(logprobs - old_logprobs),
    loss = -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A),
    and with dual-clip, where A < 0: loss = min(loss, -c A), which bounds the loss of a negative-advantage
    token whose ratio has grown large (that branch carries no gradient).

    logprobs [N, T] (with grad), old_logprobs [N, T], advantages [N, T] (a sequence advantage is broadcast by
    the caller); old_logprobs and advantages are treated as constants. Returns (loss [N, T], info) with
    per-token float tensors: "ratio" r, "clipped" (1 where the clipped branch set the value, i.e.
    clip(r) A < r A; at r exactly on the clip edge both agree and it is 0), "dual_clipped" (1 where the
    dual-clip bound set the value).
    """
    _check_clip(eps_low, eps_high)
    if dual_clip_c is not None and not dual_clip_c > 1:
        raise ValueError(f"dual_clip_c must be > 1 or None, got {dual_clip_c!r}")
    _check_shapes("logprobs", logprobs, old_logprobs=old_logprobs, advantages=advantages)
    advantages = advantages.detach()
    ratio = torch.exp(logprobs - old_logprobs.detach())  # [N, T]
    unclipped = ratio * advantages
    clipped = ratio.clamp(1 - eps_low, 1 + eps_high) * advantages
    loss = -torch.minimum(unclipped, clipped)  # [N, T]
    dual = torch.zeros_like(loss, dtype=torch.bool)
    if dual_clip_c is not None:
        bound = -dual_clip_c * advantages
        dual = (advantages < 0) & (loss > bound)
        loss = torch.where(dual, bound, loss)
    info = {
        "ratio": ratio.detach(),
        "clipped": (clipped < unclipped).to(loss.dtype),
        "dual_clipped": dual.to(loss.dtype),
    }
    return loss, info


def gspo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    eps_low: float,
    eps_high: float,
) -> tuple[Tensor, dict[str, Tensor]]:
    """GSPO, group sequence policy optimisation (Zheng et al. 2025), in the paper's GSPO-token form.

    Sequence ratio s_i = exp((1 / |y_i|) sum_{t in y_i} (logprobs_t - old_logprobs_t)), the geometric mean of
    the token ratios over the mask tokens y_i of sequence i. Each token carries
        s_{i,t} = sg[s_i] * exp(logprobs_t - sg[logprobs_t])   (value s_i, gradient s_i * grad logprobs_t),
        loss_{i,t} = -min(s_{i,t} A_i, clip(s_{i,t}, 1 - eps_low, 1 + eps_high) A_i),
    so every token of sequence i holds the same value, the sequence loss -min(s_i A_i, clip(s_i) A_i).

    Aggregation: GSPO is defined with `aggregate(..., mode="sequence")`, the mean over each sequence's mask
    tokens and then over the S = total_sequences sequences. With it the value is
    (1/S) sum_i -min(s_i A_i, clip(s_i) A_i) and the gradient is the paper's,
    -(1/S) sum_i A_i s_i (1/|y_i|) sum_t grad logprobs_t, summed over the unclipped sequences.
    Token-level aggregation would weight sequences by length, which GSPO's length normalisation excludes.

    logprobs, old_logprobs, mask [N, T]; advantages [N], one per sequence. A sequence without mask tokens
    has s_i = 1. Returns (loss [N, T], info) with per-token "ratio" (s_i broadcast), "clipped" (1 on every
    token of a sequence whose clipped branch set the value) and "dual_clipped" (always 0: no dual-clip here).
    """
    _check_clip(eps_low, eps_high)
    _check_shapes("logprobs", logprobs, old_logprobs=old_logprobs, mask=mask)
    if advantages.shape != logprobs.shape[:1]:
        raise ValueError(
            f"gspo advantages must be one per sequence, shape ({logprobs.shape[0]},), got {tuple(advantages.shape)}"
        )
    keep = mask != 0
    n_tokens = keep.sum(-1).clamp(min=1)  # [N]
    zero = torch.zeros_like(logprobs)
    # where (not a product with the mask) so a stray value at a padding position cannot reach the sum.
    log_ratio = torch.where(keep, logprobs.detach() - old_logprobs.detach(), zero)  # [N, T]
    sequence_log_ratio = log_ratio.sum(-1) / n_tokens  # [N], sg[log s_i]
    token_log_ratio = sequence_log_ratio[:, None] + torch.where(keep, logprobs - logprobs.detach(), zero)  # [N, T]
    ratio = torch.exp(token_log_ratio)  # [N, T], value s_i on every position
    advantage = advantages.detach()[:, None]  # [N, 1]
    unclipped = ratio * advantage
    clipped = ratio.clamp(1 - eps_low, 1 + eps_high) * advantage
    loss = -torch.minimum(unclipped, clipped)  # [N, T]
    info = {
        "ratio": ratio.detach(),
        "clipped": (clipped < unclipped).to(loss.dtype),
        "dual_clipped": torch.zeros_like(loss).detach(),
    }
    return loss, info


def _k1(log_ratio: Tensor) -> Tensor:
    """k1 = log(pi / ref): unbiased, high variance, negative on some samples."""
    return log_ratio


def _k2(log_ratio: Tensor) -> Tensor:
    """k2 = (1/2) log(pi / ref)^2: biased, low variance, >= 0."""
    return 0.5 * log_ratio * log_ratio


def _k3(log_ratio: Tensor) -> Tensor:
    """k3 = ref / pi - 1 - log(ref / pi): unbiased, low variance, >= 0."""
    return torch.exp(-log_ratio) + log_ratio - 1


KL_ESTIMATORS: dict[str, Callable[[Tensor], Tensor]] = {"k1": _k1, "k2": _k2, "k3": _k3}


def kl_penalty(logprobs: Tensor, ref_logprobs: Tensor, estimator: str) -> Tensor:
    """Per-token estimate of KL(pi || ref) from tokens sampled by pi (J. Schulman, "Approximating KL
    divergence", 2020). With l = logprobs - ref_logprobs:
        k1 = l,    k2 = l^2 / 2,    k3 = exp(-l) + l - 1 = (ref/pi) - 1 - log(ref/pi).

    logprobs [N, T] (differentiable), ref_logprobs [N, T] (constant) -> [N, T].
    """
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"unknown KL estimator {estimator!r}; known: {', '.join(KL_ESTIMATORS)}")
    _check_shapes("logprobs", logprobs, ref_logprobs=ref_logprobs)
    return KL_ESTIMATORS[estimator](logprobs - ref_logprobs.detach())


def value_loss(values: Tensor, old_values: Tensor, returns: Tensor, clip: float | None) -> Tensor:
    """Clipped value loss of PPO (as in OpenAI baselines' ppo2; Schulman et al. 2017):

        loss = (1/2) max((v - R)^2, (v_old + clip(v - v_old, -c, c) - R)^2),
    and (1/2) (v - R)^2 when clip is None.

    values [N, T] (with grad), old_values [N, T], returns [N, T] (constants) -> [N, T].
    """
    if clip is not None and not clip > 0:
        raise ValueError(f"value clip must be > 0 or None, got {clip!r}")
    _check_shapes("values", values, old_values=old_values, returns=returns)
    returns = returns.detach()
    loss = (values - returns) ** 2
    if clip is not None:
        old_values = old_values.detach()
        clipped = old_values + (values - old_values).clamp(-clip, clip)
        loss = torch.maximum(loss, (clipped - returns) ** 2)
    return 0.5 * loss


def _token_log_weights(log_ratio: Tensor) -> Tensor:
    """One log-weight per token: its own log ratio."""
    return log_ratio


def _sequence_log_weights(log_ratio: Tensor) -> Tensor:
    """One log-weight per sequence, the sum of its masked log ratios (log of the product of its token ratios)."""
    return log_ratio.sum(-1, keepdim=True).expand_as(log_ratio)


TIS_LEVELS: dict[str, Callable[[Tensor], Tensor]] = {"token": _token_log_weights, "sequence": _sequence_log_weights}


def truncated_importance_weights(
    old_logprobs: Tensor, behavior_logprobs: Tensor, mask: Tensor, cap: float, level: str = "token"
) -> Tensor:
    """Truncated importance sampling for the rollout/learner mismatch (Yao et al. 2025, "Your efficient RL
    framework secretly brings you off-policy RL training").

    token level:    w_t = min(pi_old(y_t) / pi_behaviour(y_t), C) = min(exp(old_t - behavior_t), C);
    sequence level: w_i = min(exp(sum_{t in y_i} (old_t - behavior_t)), C), broadcast to the tokens of i.
    Detached (a weight, not a path for gradients). Positions with mask 0 get weight 0, so a weighted
    term is zero there even before aggregation; a sequence without mask tokens has only zero weights.

    old_logprobs, behavior_logprobs, mask [N, T] -> weights [N, T].
    """
    if not cap >= 1:
        raise ValueError(f"TIS cap must be >= 1, got {cap!r}")
    if level not in TIS_LEVELS:
        raise ValueError(f"unknown TIS level {level!r}; known: {', '.join(TIS_LEVELS)}")
    _check_shapes("old_logprobs", old_logprobs, behavior_logprobs=behavior_logprobs, mask=mask)
    with torch.no_grad():
        keep = mask != 0
        log_ratio = torch.where(keep, old_logprobs - behavior_logprobs, torch.zeros_like(old_logprobs))  # [N, T]
        # clamp after exp: an overflow to inf still lands exactly on the cap.
        weights = torch.exp(TIS_LEVELS[level](log_ratio)).clamp(max=cap)  # [N, T]
        return torch.where(keep, weights, torch.zeros_like(weights))


def _masked(loss_tok: Tensor, mask: Tensor) -> Tensor:
    """loss * mask, with masked positions exactly 0 even where loss is inf or nan."""
    return torch.where(mask != 0, loss_tok * mask, torch.zeros_like(loss_tok))


def _token_share(
    loss_tok: Tensor, mask: Tensor, total_tokens: float, total_sequences: float, token_budget: float | None
) -> Tensor:
    """sum_{n,t} loss * mask / total_tokens."""
    return _masked(loss_tok, mask).sum() / total_tokens


def _token_sum_constant_share(
    loss_tok: Tensor, mask: Tensor, total_tokens: float, total_sequences: float, token_budget: float | None
) -> Tensor:
    """sum_{n,t} loss * mask / (total_sequences * token_budget)."""
    if token_budget is None or not token_budget > 0:
        raise ValueError(f"token_sum_constant aggregation needs a token_budget > 0, got {token_budget!r}")
    return _masked(loss_tok, mask).sum() / (total_sequences * token_budget)


def _sequence_share(
    loss_tok: Tensor, mask: Tensor, total_tokens: float, total_sequences: float, token_budget: float | None
) -> Tensor:
    """sum_n (sum_t loss * mask / sum_t mask) / total_sequences; a sequence with no mask tokens adds 0."""
    n_tokens = mask.sum(-1)  # [N]
    has_tokens = n_tokens > 0
    # An empty row's sum is 0, so dividing it by 1 instead of 0 makes its share 0.
    per_sequence = _masked(loss_tok, mask).sum(-1) / torch.where(has_tokens, n_tokens, torch.ones_like(n_tokens))
    return per_sequence.sum() / total_sequences


AGGREGATIONS: dict[str, Callable[[Tensor, Tensor, float, float, float | None], Tensor]] = {
    "token": _token_share,
    "sequence": _sequence_share,
    "token_sum_constant": _token_sum_constant_share,
}


def aggregate(
    loss_tok: Tensor, mask: Tensor, mode: str, total_tokens: float, total_sequences: float,
    token_budget: float | None = None,
) -> Tensor:
    """This micro-batch's share of the whole-batch mean of a per-token term.

    token:              sum_{n,t} loss_{n,t} m_{n,t} / total_tokens                 (DAPO's token-level mean)
    sequence:           sum_n [sum_t loss_{n,t} m_{n,t} / sum_t m_{n,t}] / total_sequences  (GRPO's)
    token_sum_constant: sum_{n,t} loss_{n,t} m_{n,t} / (total_sequences * token_budget)    (Dr. GRPO's)

    Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-like training", Sec. 3.1) replaces GRPO's 1/|o_i|
    with one constant, the generation budget, so neither a sequence's length nor the batch's token count
    scales its tokens' gradient: (1/G) sum_i sum_t l_{i,t} / L_max. Here G = total_sequences and
    L_max = token_budget (the generated-token budget of one episode).

    total_tokens (sum of the mask) and total_sequences (sequences with at least one mask token) are global:
    counted over every micro-batch and learner rank of the optimizer step. The shares then add up, over
    micro-batches and ranks, to exactly the mean over the whole batch, which keeps gradient accumulation and
    data parallelism (gradients summed, not averaged) exact.

    loss_tok, mask [N, T] -> scalar.
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"unknown loss aggregation {mode!r}; known: {', '.join(AGGREGATIONS)}")
    if not total_tokens > 0:
        raise ValueError(f"total_tokens must be > 0, got {total_tokens!r}")
    if not total_sequences > 0:
        raise ValueError(f"total_sequences must be > 0, got {total_sequences!r}")
    if loss_tok.dim() != 2:
        raise ValueError(f"loss_tok must be [N, T], got shape {tuple(loss_tok.shape)}")
    _check_shapes("loss_tok", loss_tok, mask=mask)
    return AGGREGATIONS[mode](loss_tok, mask, total_tokens, total_sequences, token_budget)


def mismatch_metrics(
    old_logprobs: Tensor, behavior_logprobs: Tensor, mask: Tensor, *, total_tokens: float | None = None
) -> dict[str, float]:
    """How far the rollout engine's sampling policy is from the learner's pi_old on the sampled tokens.

    With l_t = old_t - behavior_t over the mask tokens (samples come from the behaviour policy):
        "mismatch/kl"            = mean_t (exp(l_t) - 1 - l_t), the k3 estimate of KL(behaviour || pi_old);
        "mismatch/abs_logdiff"   = mean_t |l_t|;
        "mismatch/max_ratio_max" = max_t exp(l_t) (combine over micro-batches by max; 0 with no tokens).
    Means divide by this micro-batch's mask tokens, or by total_tokens when given (then the values are this
    micro-batch's share of a global mean, as in `rl_loss`). No mask tokens gives 0.
    """
    _check_shapes("old_logprobs", old_logprobs, behavior_logprobs=behavior_logprobs, mask=mask)
    if total_tokens is not None and not total_tokens > 0:
        raise ValueError(f"total_tokens must be > 0 or None, got {total_tokens!r}")
    with torch.no_grad():
        keep = mask != 0
        zero = torch.zeros_like(old_logprobs)
        log_ratio = torch.where(keep, old_logprobs - behavior_logprobs, zero)  # [N, T]
        k3 = torch.where(keep, torch.exp(log_ratio) - 1 - log_ratio, zero)
        denominator = keep.sum().clamp(min=1).to(old_logprobs.dtype) if total_tokens is None else total_tokens
        # 0 at masked positions is below every ratio, so it never wins the max; an empty batch gives 0.
        max_ratio = torch.where(keep, torch.exp(log_ratio), zero).amax() if keep.numel() else zero.sum()
        values = torch.stack([k3.sum() / denominator, log_ratio.abs().sum() / denominator, max_ratio]).tolist()
    return dict(zip(("mismatch/kl", "mismatch/abs_logdiff", "mismatch/max_ratio_max"), values))
