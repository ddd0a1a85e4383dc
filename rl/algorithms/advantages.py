"""Advantages from rewards, and the batch filters that read the same group statistics.

The driver holds the whole batch, so the sequence-level estimators (GRPO, Dr. GRPO, RLOO, REINFORCE++)
and DAPO's filters run there on [N] tensors; GAE runs per token with a critic. Every function is pure:
tensors in, tensors out, no grad (advantages and returns are targets).

Shape legend: N = sequences of the batch, T = token positions of a right-padded micro-batch.
"""
from __future__ import annotations

import torch
from torch import Tensor

# Rewards within this distance of each other count as equal (a zero-variance group).
ZERO_VARIANCE_ATOL = 1e-12


def _check_batch(rewards: Tensor, group_ids: Tensor, valid: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Validate the (rewards, group_ids, valid) triple of the batch and return it as (float, long, bool)."""
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [N], got shape {tuple(rewards.shape)}")
    n = rewards.shape[0]
    for name, value in (("group_ids", group_ids), ("valid", valid)):
        if tuple(value.shape) != (n,):
            raise ValueError(f"{name} must have shape ({n},) like rewards, got {tuple(value.shape)}")
    if group_ids.is_floating_point() or group_ids.dtype == torch.bool:
        raise ValueError(f"group_ids must be an integer tensor, got dtype {group_ids.dtype}")
    if valid.dtype != torch.bool:
        raise ValueError(f"valid must be a bool tensor, got dtype {valid.dtype}")
    rewards = rewards.detach()
    if not rewards.is_floating_point():
        rewards = rewards.to(torch.get_default_dtype())
    return rewards, group_ids.long(), valid


def _group_sums(values: Tensor, group_ids: Tensor, valid: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(index, count, sum): each entry's group index, and the count and sum of valid values per group."""
    _, index = torch.unique(group_ids, return_inverse=True)  # [N] in 0..G-1
    n_groups = int(index.max()) + 1 if index.numel() else 0
    weight = valid.to(values.dtype)
    count = torch.zeros(n_groups, dtype=values.dtype, device=values.device).index_add_(0, index, weight)  # [G]
    total = torch.zeros(n_groups, dtype=values.dtype, device=values.device).index_add_(0, index, values * weight)
    return index, count, total


def _group_mean(values: Tensor, group_ids: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    """(mean, count) of each entry's group over its valid members, gathered back to [N]."""
    index, count, total = _group_sums(values, group_ids, valid)
    mean = total / count.clamp(min=1)  # [G]
    return mean[index], count[index]


def group_advantages(
    rewards: Tensor, group_ids: Tensor, valid: Tensor, scale_std: bool = True, eps: float = 1e-6
) -> Tensor:
    """GRPO group-normalised advantage (Shao et al. 2024, DeepSeekMath, eq. for outcome supervision).

    A_i = (r_i - mean_g) / (std_g + eps), where mean_g and std_g = sqrt(mean_g((r - mean_g)^2)) (population
    std) run over the valid members of i's group g. With scale_std=False this is Dr. GRPO (Liu et al. 2025,
    "Understanding R1-Zero-like training"): A_i = r_i - mean_g, which removes the difficulty bias of the std.
    Invalid entries get 0 and are left out of their group's statistics; a group with one valid member
    gets 0 (it has no baseline to compare with).

    rewards [N] float, group_ids [N] integer, valid [N] bool -> [N].
    """
    rewards, group_ids, valid = _check_batch(rewards, group_ids, valid)
    mean, count = _group_mean(rewards, group_ids, valid)  # [N], [N]
    centred = rewards - mean
    if scale_std:
        variance, _ = _group_mean(centred * centred, group_ids, valid)
        centred = centred / (variance.sqrt() + eps)
    keep = valid & (count > 1)
    return torch.where(keep, centred, torch.zeros_like(centred))


def rloo_advantages(rewards: Tensor, group_ids: Tensor, valid: Tensor) -> Tensor:
    """RLOO leave-one-out advantage (Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE").

    A_i = r_i - (1 / (n_g - 1)) * sum_{j in g, j != i} r_j over the n_g valid members of i's group g.
    Invalid entries, and an entry alone in its group, get 0.

    rewards [N] float, group_ids [N] integer, valid [N] bool -> [N].
    """
    rewards, group_ids, valid = _check_batch(rewards, group_ids, valid)
    index, count, total = _group_sums(rewards, group_ids, valid)
    count, total = count[index], total[index]  # [N]
    others = (total - rewards) / (count - 1).clamp(min=1)
    advantage = rewards - others
    keep = valid & (count > 1)
    return torch.where(keep, advantage, torch.zeros_like(advantage))


def masked_moments(x: Tensor, mask: Tensor) -> Tensor:
    """[count, sum, sum of squares] of x where mask != 0, in float64: statistics that add over pieces of a batch."""
    if mask.shape != x.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} does not match x shape {tuple(x.shape)}")
    keep = mask != 0
    values = torch.where(keep, x.detach(), torch.zeros_like(x)).to(torch.float64)
    return torch.stack([keep.sum().to(torch.float64), values.sum(), (values * values).sum()])


def whiten(x: Tensor, mask: Tensor, eps: float = 1e-8, moments: Tensor | None = None) -> Tensor:
    """Masked whitening: (x - mu) / (sigma + eps), with mu and sigma the mean and population std of x where
    mask != 0; entries where mask == 0 are set to 0. Any shape; mask has x's shape. An empty mask gives 0.

    With `moments` ([count, sum, sum of squares] from `masked_moments`, summed over every piece of a batch),
    mu and sigma are those of the whole batch, so whitening one piece gives exactly its slice of the whole
    batch's whitening, however the batch was cut. The normalisation REINFORCE++ (Hu 2025) applies to the
    advantages of the whole batch, and PPO implementations to the GAE advantages of the whole batch.
    """
    if moments is None:
        moments = masked_moments(x, mask)
    elif mask.shape != x.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} does not match x shape {tuple(x.shape)}")
    if tuple(moments.shape) != (3,):
        raise ValueError(f"moments must be [count, sum, sum of squares], got shape {tuple(moments.shape)}")
    count, total, squares = moments.to(torch.float64).unbind()
    n = count.clamp(min=1)
    mean = total / n
    # E[x^2] - mean^2 (in float64) can round a little below 0 when every value is equal.
    std = (squares / n - mean * mean).clamp(min=0).sqrt()
    zero = torch.zeros_like(x)
    centred = torch.where(mask != 0, x - mean.to(x.dtype), zero)
    return centred / (std.to(x.dtype) + eps)


def reinforce_pp_advantages(rewards: Tensor, group_ids: Tensor, valid: Tensor, eps: float = 1e-6) -> Tensor:
    """REINFORCE++ with baseline (Hu 2025, "REINFORCE++: a simple and efficient approach for aligning LLMs").

    A_i = whiten(r_i - mean_g) over the valid entries of the whole batch: first the group mean of i's valid
    group members is subtracted, then the result is normalised to mean 0 and population std 1 across the
    batch (see `whiten`). Invalid entries get 0; a lone group member's centred reward is 0 and still
    counts in the batch statistics.

    rewards [N] float, group_ids [N] integer, valid [N] bool -> [N].
    """
    rewards, group_ids, valid = _check_batch(rewards, group_ids, valid)
    mean, _ = _group_mean(rewards, group_ids, valid)
    return whiten(rewards - mean, valid, eps=eps)


def gae(
    token_rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: float
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016, "High-dimensional continuous control using GAE").

    The time steps of sequence n are its positions with mask == 1, in order: k = 0..K-1 at positions t_k.
    With V_K = 0 after the last policy token (no bootstrap past the episode),
        delta_k = r_k + gamma * V_{k+1} - V_k,    A_k = delta_k + gamma * lam * A_{k+1},    R_k = A_k + V_k.
    A tool-result span between two policy tokens is not a time step: the next policy token's value is the
    bootstrap of the previous one. Positions with mask 0 get advantage 0 and return 0; a reward placed on
    one of them would be lost, so it is an error.

    token_rewards, values, mask [N, T] -> (advantages [N, T], returns [N, T]), detached.
    """
    if not (0 < gamma <= 1):
        raise ValueError(f"gamma must be in (0, 1], got {gamma!r}")
    if not (0 <= lam <= 1):
        raise ValueError(f"lam must be in [0, 1], got {lam!r}")
    if token_rewards.dim() != 2:
        raise ValueError(f"token_rewards must be [N, T], got shape {tuple(token_rewards.shape)}")
    for name, value in (("values", values), ("mask", mask)):
        if value.shape != token_rewards.shape:
            expected = tuple(token_rewards.shape)
            raise ValueError(f"{name} shape {tuple(value.shape)} does not match token_rewards shape {expected}")
    keep = mask != 0
    if (token_rewards.detach()[~keep] != 0).any():
        raise ValueError("token_rewards has non-zero entries where mask is 0; place each reward on a policy token")

    # The recursion runs on Python floats: indexing tensors element by element would cost microseconds a token.
    advantage_rows, return_rows = [], []
    for r_row, v_row, k_row in zip(token_rewards.detach().tolist(), values.detach().tolist(), keep.tolist()):
        advantage_row, return_row = [0.0] * len(k_row), [0.0] * len(k_row)
        next_value, next_advantage = 0.0, 0.0
        for t in reversed(range(len(k_row))):
            if not k_row[t]:
                continue
            delta = r_row[t] + gamma * next_value - v_row[t]
            next_advantage = delta + gamma * lam * next_advantage
            next_value = v_row[t]
            advantage_row[t], return_row[t] = next_advantage, next_advantage + v_row[t]
        advantage_rows.append(advantage_row)
        return_rows.append(return_row)
    advantages = torch.tensor(advantage_rows, dtype=values.dtype, device=values.device).reshape(values.shape)
    returns = torch.tensor(return_rows, dtype=values.dtype, device=values.device).reshape(values.shape)
    return advantages, returns


def zero_variance_groups(rewards: Tensor, group_ids: Tensor, valid: Tensor) -> Tensor:
    """DAPO dynamic sampling (Yu et al. 2025): keep[i] is False for every member of a group whose valid
    rewards all agree (max - min <= 1e-12, so the group advantage carries no signal) and for invalid
    entries; True otherwise. A group with a single valid member agrees with itself and is dropped.

    rewards [N] float, group_ids [N] integer, valid [N] bool -> keep [N] bool.
    """
    rewards, group_ids, valid = _check_batch(rewards, group_ids, valid)
    _, index = torch.unique(group_ids, return_inverse=True)  # [N]
    n_groups = int(index.max()) + 1 if index.numel() else 0
    inf = torch.full((n_groups,), float("inf"), dtype=rewards.dtype, device=rewards.device)
    # Invalid entries are pushed to +-inf so they never set a group's max or min.
    high = (-inf).scatter_reduce(0, index, torch.where(valid, rewards, -float("inf")), reduce="amax")  # [G]
    low = inf.scatter_reduce(0, index, torch.where(valid, rewards, float("inf")), reduce="amin")  # [G]
    spread = (high - low)[index]  # [N]; -inf where a group has no valid member
    return valid & (spread > ZERO_VARIANCE_ATOL)


def overlong_keep(truncated: Tensor) -> Tensor:
    """DAPO overlong filtering (Yu et al. 2025): keep[i] = not truncated[i], so an episode cut off by a
    token or turn limit contributes no loss (its reward judges an unfinished answer).

    truncated [N] bool -> keep [N] bool.
    """
    if truncated.dtype != torch.bool:
        raise ValueError(f"truncated must be a bool tensor, got dtype {truncated.dtype}")
    return ~truncated
