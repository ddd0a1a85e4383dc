"""One micro-batch through the learner: forward with routing replay, log-probs, values, and its share of the loss.

Shape legend: B = rows, T = positions, D = model dim, M = loss-mask positions of the micro-batch,
L = MoE layers, E = routed experts, k = experts per token, S = DSA layers, k_s = selected tokens.

Routing replay (`replay`):
  off  the learner routes afresh (router bias and indexer as they are now);
  r3   feed the experts and DSA selections the rollout recorded, so the learner's log-probs are those of
       the network that sampled the tokens (Ma et al. 2025, "Stabilizing MoE RL by aligning training
       and inference routers");
  r2   feed the selections of the learner's own old-policy pass (`replay_from`), so every update of a
       step sees the routing of the weights the step started from.
Replay fixes which experts / slots are used; the mixing weights and attention stay live and differentiable.

The frozen reference of the KL term routes as `algorithm.reference_routing` says (`reference_logprobs`):
  replay  (default) the same experts and DSA slots as the trained policy's forward, so the KL measures how
          far the weights moved under the routing the tokens were sampled with. Router-bias balancing moves
          the routing every step for load, not for reward; penalising that drift made the KL term fight
          the balancer (quickstart, same SFT start: KL to the reference rose to 1.9 and every group scored
          0 from step 14 with `own`, while with `replay` KL stayed under 0.6 and the last step passed 0.34).
  own     the reference chooses its own experts and slots: a fixed anchor, router drift counted too.

Loss normalisation: rl_loss divides by the step's totals, so the per-micro-batch losses (and their
gradients) add up over micro-batches and ranks to the loss of the whole step. The model's aux loss
(indexer KL, optional balance loss) is a mean over the micro-batch's fed positions; it is weighted by the
micro-batch's share of the step's fed positions, so it too sums to a mean over the whole step.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Callable

import torch
from torch import Tensor

from jointrl.kernels.logprobs import token_logprobs
from jointrl.model.openings import forward_sharing_openings, opening_limits
from jointrl.rl.algorithms.advantages import gae, masked_moments, whiten
from jointrl.rl.algorithms.table import ALGORITHMS, LossInputs, rl_loss
from jointrl.rl.config.training import AlgorithmConfig
from jointrl.rl.learner.critic import PolicyWithValue
from jointrl.rl.learner.batch import LossTotals, MicroBatch

REPLAY_MODES = ("off", "r2", "r3")
REFERENCE_ROUTING = ("replay", "own")


@dataclass
class ForwardOut:
    """What one learner forward gives the loss (and the router bias update)."""

    logprobs: Tensor  # [B, T] fp32: log-prob of targets under softmax(logits / temperature), 0 off the loss mask
    entropy: Tensor | None  # [B, T] fp32, 0 off the loss mask; None unless asked for
    values: Tensor | None  # [B, T] fp32, 0 on padding; None without a value head
    routing: Tensor | None  # [B, T, L, k] the experts this forward used (what r2 replays)
    sparse_topk: Tensor | None  # [B, T, S, k_s] the DSA slots this forward used
    expert_load: Tensor | None  # [L, E] valid tokens routed to each expert
    aux_loss: Tensor  # scalar: the model's aux losses, a mean over this micro-batch's fed positions


def detached(out: ForwardOut) -> ForwardOut:
    """A copy with every tensor cut from the graph: the "old" pass when it is the current forward itself."""
    return replace(out, **{f.name: _detach(getattr(out, f.name)) for f in fields(out)})


def _detach(value):
    return value.detach() if isinstance(value, Tensor) else value


def _replay_inputs(mb: MicroBatch, replay: str, replay_from: ForwardOut | None) -> tuple[Tensor | None, Tensor | None]:
    """(routing, sparse_topk) to feed the model for this replay mode."""
    if replay not in REPLAY_MODES:
        raise ValueError(f"replay={replay!r}; expected one of {REPLAY_MODES}")
    if replay == "r3":
        return mb.routing, mb.sparse_topk
    if replay == "r2":
        if replay_from is None:
            raise ValueError("replay='r2' needs replay_from: the old-policy pass of this micro-batch")
        return replay_from.routing, replay_from.sparse_topk
    return None, None


def forward_micro_batch(
    model: PolicyWithValue,
    mb: MicroBatch,
    *,
    temperature: float,
    replay: str,
    replay_from: ForwardOut | None = None,
    need_entropy: bool = False,
    fused: bool = True,
    share_openings: bool = False,
) -> ForwardOut:
    """Log-probs (and entropy, values) of mb's targets; mb must already be on the model's device.

    Log-probs and entropy are those of the loss mask's positions, 0 elsewhere. temperature 0 (greedy rollout)
    scores with temperature 1, as the rollout recorded it. fused=True never builds [B, T, V] logits (chunked
    kernel on the mask's positions); fused=False is the full-logits baseline. share_openings runs the opening that
    rows share (an env's system prompt and tool schemas, a group's prompt) once (`forward_sharing_openings`); it
    needs the fused path and no value head (values are read at every position).
    """
    if temperature < 0:
        raise ValueError(f"temperature={temperature} must be >= 0")
    temperature = temperature or 1.0
    routing, sparse_topk = _replay_inputs(mb, replay, replay_from)
    if replay == "r3" and mb.routing is None and model.policy.moe_layers:
        raise ValueError("replay='r3' but the micro-batch carries no rollout routing (record_routing off?)")
    if replay == "r3" and mb.sparse_topk is None and model.policy.dsa_layers:
        raise ValueError("replay='r3' but the micro-batch carries no rollout sparse_topk (record_routing off?)")

    # Every consumer (the loss, the KL term, importance weights, mismatch metrics) counts only the generated
    # tokens, and prompts and tool results are most of an episode: the vocabulary projection skips the rest.
    scored = mb.valid & (mb.mask != 0)  # [B, T]
    if share_openings:
        if not fused or model.value_head is not None:
            raise ValueError("share_openings needs the fused log-prob path and a policy without a value head")
        out = forward_sharing_openings(model.policy, mb.inputs, mb.valid, opening_limits(scored, mb.valid),
                                       routing=routing, sparse_topk=sparse_topk)
        values = None
    else:
        out, values = model(mb.inputs, mb.valid, routing=routing, sparse_topk=sparse_topk, return_logits=not fused)
    if fused:
        hidden = out.hidden[scored]  # [M, D]
        flat_logp, flat_ent = token_logprobs(
            hidden, model.policy.lm_head.weight, mb.targets[scored], temperature, return_entropy=need_entropy
        )  # [M], [M] | None
        logprobs = out.hidden.new_zeros(scored.shape, dtype=flat_logp.dtype)  # [B, T]
        logprobs = logprobs.masked_scatter(scored, flat_logp)
        entropy = None
        if need_entropy:
            entropy = torch.zeros_like(logprobs).masked_scatter(scored, flat_ent)
    else:
        logp_all = torch.log_softmax(out.logits / temperature, dim=-1)  # [B, T, V]
        picked = logp_all.gather(-1, mb.targets[..., None]).squeeze(-1)  # [B, T]
        logprobs = torch.where(scored, picked, 0.0)
        entropy = None
        if need_entropy:
            entropy = torch.where(scored, -(logp_all.exp() * logp_all).sum(-1), 0.0)
    if values is not None:
        values = torch.where(mb.valid, values, 0.0)
    return ForwardOut(
        logprobs=logprobs, entropy=entropy, values=values, routing=out.routing, sparse_topk=out.sparse_topk,
        expert_load=out.expert_load, aux_loss=out.aux_loss,
    )


def reference_logprobs(
    reference: PolicyWithValue, mb: MicroBatch, *, temperature: float, routing: str, replay: str,
    replay_from: ForwardOut | None = None, share_openings: bool = False,
) -> Tensor:
    """[B, T] log-probs of mb's targets under the frozen reference: routed like the policy's forward (`replay`,
    `replay_from`) when routing is "replay", on its own when it is "own"."""
    if routing not in REFERENCE_ROUTING:
        raise ValueError(f"reference routing {routing!r}; expected one of {REFERENCE_ROUTING}")
    if routing == "own":
        replay, replay_from = "off", None
    return forward_micro_batch(reference, mb, temperature=temperature, replay=replay, replay_from=replay_from,
                               share_openings=share_openings).logprobs


def last_trained_position(mask: Tensor) -> tuple[Tensor, Tensor]:
    """(position [B] of each row's last mask != 0 entry, has_any [B] bool)."""
    on = mask != 0  # [B, T]
    steps = torch.arange(1, mask.shape[1] + 1, device=mask.device)  # [T]
    # 1-based positions where on, 0 elsewhere: the argmax is the last trained position.
    last = (on * steps).argmax(dim=1)  # [B]
    return last, on.any(dim=1)


def token_rewards(mb: MicroBatch) -> Tensor:
    """[B, T] zeros with each row's reward on its last trained token (rows without one get none)."""
    last, has_any = last_trained_position(mb.mask)
    rewards = torch.zeros_like(mb.mask)
    rows = torch.arange(mb.mask.shape[0], device=mb.mask.device)
    rewards[rows, last] = torch.where(has_any, mb.rewards.to(rewards.dtype), 0.0)
    return rewards


@dataclass
class CriticTargets:
    """What a critic algorithm trains one micro-batch towards: GAE advantages whitened over the whole step."""

    advantages: Tensor  # [B, T] GAE advantages, whitened with the step's statistics; 0 off the mask
    returns: Tensor  # [B, T] GAE returns (the value head's regression target, not whitened); 0 off the mask


def critic_targets(
    cfg: AlgorithmConfig,
    mbs: list[MicroBatch],
    old_values: list[Tensor],
    counted: list[bool] | None = None,
    reduce: Callable[[Tensor], Tensor] | None = None,
) -> list[CriticTargets]:
    """GAE of every micro-batch of a step from its old values, whitened with the statistics of the whole step.

    The whitening mean and std run over the trained tokens of every micro-batch with counted True (a rank's
    zero-weighted filler copies are not counted) and, through `reduce` (a sum over the learner ranks), of
    every rank. Whitening each micro-batch alone would make the loss depend on the packing: a sequence
    packed alone, with a fresh critic at 0 and gamma = lambda = 1, has one constant advantage, which its
    own whitening turns into 0 whatever its reward.
    """
    counted = [True] * len(mbs) if counted is None else counted
    raw = [gae(token_rewards(mb), values, mb.mask, cfg.gamma, cfg.gae_lambda) for mb, values in zip(mbs, old_values)]
    moments = torch.zeros(3, dtype=torch.float64, device=mbs[0].mask.device if mbs else None)
    for (advantages, _), mb, count in zip(raw, mbs, counted):
        if count:
            moments = moments + masked_moments(advantages, mb.mask)
    if reduce is not None:
        moments = reduce(moments)
    return [
        CriticTargets(advantages=whiten(advantages, mb.mask, moments=moments), returns=returns)
        for (advantages, returns), mb in zip(raw, mbs)
    ]


def build_loss_inputs(
    cfg: AlgorithmConfig,
    mb: MicroBatch,
    current: ForwardOut,
    old: ForwardOut,
    ref_logprobs: Tensor | None,
    targets: CriticTargets | None = None,
) -> LossInputs:
    """LossInputs of the micro-batch; critic algorithms take their advantages and returns from `targets`
    (`critic_targets` over the whole step), never from this micro-batch's statistics alone."""
    old_logprobs = old.logprobs.detach()
    if not ALGORITHMS[cfg.name].critic:
        return LossInputs(
            logprobs=current.logprobs, old_logprobs=old_logprobs, behavior_logprobs=mb.behavior_logprobs,
            advantages=mb.advantages, mask=mb.mask, entropy=current.entropy, ref_logprobs=ref_logprobs,
        )
    if current.values is None or old.values is None:
        raise ValueError(f"algorithm {cfg.name!r} needs a critic: build the model with a value head")
    if targets is None:
        raise ValueError(f"algorithm {cfg.name!r} needs the step's critic targets (critic_targets over every micro-batch)")
    return LossInputs(
        logprobs=current.logprobs, old_logprobs=old_logprobs, behavior_logprobs=mb.behavior_logprobs,
        advantages=targets.advantages, mask=mb.mask, entropy=current.entropy, ref_logprobs=ref_logprobs,
        values=current.values, old_values=old.values.detach(), returns=targets.returns,
    )


def micro_batch_loss(
    cfg: AlgorithmConfig,
    mb: MicroBatch,
    current: ForwardOut,
    old: ForwardOut,
    ref_logprobs: Tensor | None,
    totals: LossTotals,
    targets: CriticTargets | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """This micro-batch's share of the step loss (RL loss + weighted aux loss) and its additive metrics.

    `old` is the pass of the weights the step started from; with one update per step and no critic it is
    the current forward itself, passed as `detached(current)` (no second forward). `targets` are the
    micro-batch's critic targets (critic algorithms only). "learner/aux_loss" is the aux term as added.
    """
    inputs = build_loss_inputs(cfg, mb, current, old, ref_logprobs, targets)
    loss, metrics = rl_loss(cfg, inputs, totals.tokens, totals.sequences, totals.token_budget)
    share = float(mb.valid.sum()) / max(totals.positions, 1.0)
    aux = current.aux_loss * share
    metrics = {**metrics, "learner/aux_loss": float(aux.detach())}
    return loss + aux, metrics


def combine_metrics(parts: list[dict[str, float]]) -> dict[str, float]:
    """Metrics of many micro-batches (or ranks) in one dict: summed, except keys ending "_max" (max)."""
    combined: dict[str, float] = {}
    for part in parts:
        for key, value in part.items():
            if key not in combined:
                combined[key] = float(value)
            elif key.endswith("_max"):
                combined[key] = max(combined[key], float(value))
            else:
                combined[key] += float(value)
    return combined
