"""From a step's trajectories to packed, right-padded micro-batches: the learner's data path, no model involved.

Shape legend: T = tokens of one sequence (samples) or positions of a micro-batch (T = longest row - 1),
B = rows of a micro-batch, L = MoE layers, k = experts per token, S = DSA layers, k_s = selected tokens.

A sequence of n tokens gives n - 1 positions: position t feeds tokens[t] and predicts tokens[t + 1], so
inputs, routing and sparse_topk (recorded per fed token) line up with targets, loss_mask[1:] and
behavior_logprobs[1:]. Rows are right-padded; everything in the model is causal, so padding never
changes a real position, and padded positions carry valid False, mask 0, version -1 and routing -1.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor

from jointrl.rl.trajectory import Trajectory


@dataclass
class SequenceSample:
    """One trajectory as the learner trains on it."""

    tokens: Tensor  # [T] long
    loss_mask: Tensor  # [T] float: 1 on trained tokens (all 0 when the sequence is filtered out)
    behavior_logprobs: Tensor  # [T] float: rollout log-prob of each token (0 where never sampled)
    policy_version: Tensor  # [T] long: weights version each sampled token came from (-1 elsewhere)
    advantage: float  # sequence advantage (critic algorithms ignore it)
    reward: float  # scalar reward; GAE puts it on the last trained token
    routed_experts: Tensor | None  # [T - 1, L, k] long: experts of every fed token
    sparse_topk: Tensor | None  # [T - 1, S, k_s] long: DSA token indices of every fed token, -1 = none
    index: int  # position of the trajectory in the step's batch

    @property
    def n_positions(self) -> int:
        """Predicted positions of the sequence (tokens - 1)."""
        return self.tokens.shape[0] - 1


def _check_recorded(name: str, value: Tensor | None, n_fed: int, index: int) -> Tensor | None:
    """A recorded per-fed-token tensor as long, after checking it covers the n_fed fed tokens."""
    if value is None:
        return None
    if value.dim() != 3 or value.shape[0] != n_fed:
        raise ValueError(f"trajectory {index}: {name} has shape {tuple(value.shape)}, expected [{n_fed}, *, *]")
    return value.long()


def samples_from_trajectories(
    trajectories: list[Trajectory], advantages: list[float], keep: list[bool] | None = None
) -> list[SequenceSample]:
    """SequenceSamples of the trajectories (and their segments) with at least 2 tokens; keep False zeroes a
    sample's loss mask."""
    if len(advantages) != len(trajectories):
        raise ValueError(f"{len(advantages)} advantages for {len(trajectories)} trajectories")
    if keep is not None and len(keep) != len(trajectories):
        raise ValueError(f"{len(keep)} keep flags for {len(trajectories)} trajectories")
    samples = []
    for i, (whole, advantage) in enumerate(zip(trajectories, advantages)):
        # A trajectory's later segments (separate sequences of one episode) share its index and advantage.
        for traj in [whole, *whole.segments]:
            n = traj.tokens.shape[0]
            # One token predicts nothing (and failed episodes have none): there is no position to train.
            if n < 2:
                continue
            mask = traj.loss_mask.float().clone()
            if keep is not None and not keep[i]:
                mask.zero_()
            samples.append(SequenceSample(
                tokens=traj.tokens.long(),
                loss_mask=mask,
                behavior_logprobs=traj.behavior_logprobs.float(),
                policy_version=traj.policy_version.long(),
                advantage=float(advantage),
                reward=0.0 if whole.reward is None else float(whole.reward),
                routed_experts=_check_recorded("routed_experts", traj.routed_experts, n - 1, i),
                sparse_topk=_check_recorded("sparse_topk", traj.sparse_topk, n - 1, i),
                index=i,
            ))
    return samples


@dataclass(frozen=True)
class LossTotals:
    """Normalisers of the loss over the WHOLE step (all micro-batches of all ranks)."""

    tokens: float  # trained tokens: sum of loss_mask over predicted positions
    sequences: float  # sequences with at least one trained token
    positions: float  # fed positions (valid tokens); normalises the per-position aux losses
    token_budget: float | None = None  # generated tokens one sequence may have (token_sum_constant's constant)


def totals(samples: list[SequenceSample], token_budget: float | None = None) -> LossTotals:
    """The step's LossTotals; pass the step's (or the mini-batch's) samples before splitting them over ranks."""
    trained = [float(s.loss_mask[1:].sum()) for s in samples]
    return LossTotals(
        tokens=sum(trained),
        sequences=float(sum(1 for t in trained if t > 0)),
        positions=float(sum(s.n_positions for s in samples)),
        token_budget=token_budget,
    )


@dataclass
class MicroBatch:
    """B right-padded rows; position t feeds inputs[:, t] and predicts targets[:, t]."""

    inputs: Tensor  # [B, T] long: tokens[:-1], pad_id where padded
    targets: Tensor  # [B, T] long: tokens[1:], pad_id where padded
    valid: Tensor  # [B, T] bool
    mask: Tensor  # [B, T] float: loss_mask[1:], 0 on padding
    behavior_logprobs: Tensor  # [B, T] float: behavior_logprobs[1:], 0 on padding
    versions: Tensor  # [B, T] long: policy_version[1:], -1 on padding
    advantages: Tensor  # [B, T] float: the row's sequence advantage on its valid positions, 0 on padding
    rewards: Tensor  # [B] float
    routing: Tensor | None  # [B, T, L, k] long, -1 on padding
    sparse_topk: Tensor | None  # [B, T, S, k_s] long, -1 on padding
    index: Tensor  # [B] long: SequenceSample.index of each row

    @property
    def n_tokens(self) -> int:
        """Positions computed (B * T, padding included): the cost the token budget bounds."""
        return self.inputs.shape[0] * self.inputs.shape[1]

    def to(self, device: torch.device | str) -> MicroBatch:
        """A copy with every tensor on `device`."""
        moved = {f.name: getattr(self, f.name) for f in fields(self)}
        return MicroBatch(**{k: v.to(device) if isinstance(v, Tensor) else v for k, v in moved.items()})


def _recorded_kind(samples: list[SequenceSample], name: str) -> bool:
    """Whether the samples carry `name`; a mix of samples with and without it is an error."""
    present = [getattr(s, name) is not None for s in samples]
    if any(present) and not all(present):
        missing = [s.index for s, p in zip(samples, present) if not p]
        raise ValueError(f"samples {missing} have no {name} while others do; replay needs it on every sample")
    return bool(present) and present[0]


def _stack_recorded(rows: list[Tensor], width: int) -> Tensor:
    """Right-pad [n_i, A, K] recordings with -1 to [B, width, A, K]."""
    out = torch.full((len(rows), width, *rows[0].shape[1:]), -1, dtype=torch.long)  # [B, T, A, K]
    for r, value in enumerate(rows):
        if value.shape[1:] != rows[0].shape[1:]:
            raise ValueError(f"recorded shapes differ across samples: {tuple(value.shape)} vs {tuple(rows[0].shape)}")
        out[r, : value.shape[0]] = value
    return out


def collate(samples: list[SequenceSample], pad_id: int) -> MicroBatch:
    """One MicroBatch of the samples, in the given row order."""
    if not samples:
        raise ValueError("collate needs at least one sample")
    b, width = len(samples), max(s.n_positions for s in samples)
    inputs = torch.full((b, width), pad_id, dtype=torch.long)  # [B, T]
    targets = torch.full((b, width), pad_id, dtype=torch.long)
    valid = torch.zeros(b, width, dtype=torch.bool)
    mask = torch.zeros(b, width)
    behavior = torch.zeros(b, width)
    versions = torch.full((b, width), -1, dtype=torch.long)
    advantages = torch.zeros(b, width)
    for r, s in enumerate(samples):
        n = s.n_positions
        inputs[r, :n] = s.tokens[:-1]
        targets[r, :n] = s.tokens[1:]
        valid[r, :n] = True
        mask[r, :n] = s.loss_mask[1:]
        behavior[r, :n] = s.behavior_logprobs[1:]
        versions[r, :n] = s.policy_version[1:]
        advantages[r, :n] = s.advantage
    routing = topk = None
    if _recorded_kind(samples, "routed_experts"):
        routing = _stack_recorded([s.routed_experts for s in samples], width)
    if _recorded_kind(samples, "sparse_topk"):
        topk = _stack_recorded([s.sparse_topk for s in samples], width)
    return MicroBatch(
        inputs=inputs, targets=targets, valid=valid, mask=mask, behavior_logprobs=behavior, versions=versions,
        advantages=advantages, rewards=torch.tensor([s.reward for s in samples]),
        routing=routing, sparse_topk=topk, index=torch.tensor([s.index for s in samples], dtype=torch.long),
    )


def _longest_first(samples: list[SequenceSample]) -> list[SequenceSample]:
    """Samples by decreasing length, ties by increasing index (a deterministic order)."""
    return sorted(samples, key=lambda s: (-s.n_positions, s.index))


def pack(samples: list[SequenceSample], micro_batch_tokens: int, pad_id: int) -> list[MicroBatch]:
    """Micro-batches of at most micro_batch_tokens positions (B * T); a longer sequence goes alone."""
    if micro_batch_tokens < 1:
        raise ValueError(f"micro_batch_tokens={micro_batch_tokens} must be positive")
    _recorded_kind(samples, "routed_experts")
    _recorded_kind(samples, "sparse_topk")
    groups: list[list[SequenceSample]] = []
    # Longest first: a group's first row fixes its width, so a row fits while (rows + 1) * width <= budget.
    for s in _longest_first(samples):
        if groups and (len(groups[-1]) + 1) * groups[-1][0].n_positions <= micro_batch_tokens:
            groups[-1].append(s)
        else:
            groups.append([s])
    return [collate(group, pad_id) for group in groups]


def split_for_ranks(samples: list[SequenceSample], n_ranks: int) -> list[list[SequenceSample]]:
    """n_ranks shares balanced by token count (longest first onto the lightest rank); each in index order."""
    if n_ranks < 1:
        raise ValueError(f"n_ranks={n_ranks} must be positive")
    shares: list[list[SequenceSample]] = [[] for _ in range(n_ranks)]
    loads = [0] * n_ranks
    for s in _longest_first(samples):
        # min over (load, rank): ties go to the lowest rank, so the split is deterministic.
        rank = min(range(n_ranks), key=lambda r: (loads[r], r))
        shares[rank].append(s)
        loads[rank] += s.tokens.shape[0]
    return [sorted(share, key=lambda s: s.index) for share in shares]


def split_minibatches(samples: list[SequenceSample], n: int) -> list[list[SequenceSample]]:
    """n mini-batches interleaved over index order (sample i of that order goes to i % n); empty only when n > len."""
    if n < 1:
        raise ValueError(f"n={n} mini-batches must be positive")
    ordered = sorted(samples, key=lambda s: s.index)
    return [ordered[j::n] for j in range(n)]
