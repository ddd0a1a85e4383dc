"""The token-level record of one episode: what the learner trains on, exactly as it was sampled.

Shape legend: T = tokens of the whole episode (prompt, every turn, every tool result), L = MoE layers,
k = experts per token, S = DSA layers, k_s = selected tokens per query.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from jointrl.envs.episode import Episode

if TYPE_CHECKING:
    from jointrl.rl.rollout.engine import TurnResult


@dataclass
class Trajectory:
    """An Episode plus the tokens the policy saw and produced."""

    episode: Episode
    tokens: torch.Tensor  # [T] long: prompt, sampled turns and tool results, in order
    loss_mask: torch.Tensor  # [T] float: 1 on tokens the policy sampled, 0 on prompts, tool results, forced tokens
    behavior_logprobs: torch.Tensor  # [T] float: log-prob the sampling policy gave each token (0 where mask is 0)
    policy_version: torch.Tensor  # [T] long: weights version each sampled token came from (-1 elsewhere)
    routed_experts: torch.Tensor | None = field(default=None, repr=False)  # [T - 1, L, k] for every fed token
    sparse_topk: torch.Tensor | None = field(default=None, repr=False)  # [T - 1, S, k_s] token indices, -1 = none
    reward: float | None = None  # set by the reward mixer
    rewards: dict[str, float] = field(default_factory=dict)  # the mixer's components
    # Later sequences of the same episode: a black-box agent that edited its history started a new engine
    # sequence (rl/serve/sessions.py). Each trains as its own sequence with this trajectory's advantage.
    segments: list["Trajectory"] = field(default_factory=list, repr=False)

    def __post_init__(self):
        n = self.tokens.shape[0]
        for name in ("loss_mask", "behavior_logprobs", "policy_version"):
            assert getattr(self, name).shape == (n,), f"{name} does not cover the {n} tokens"


@dataclass
class TokenLog:
    """A trajectory being recorded: tokens fed and sampled in order, with what the learner replays."""

    tokens: list[int] = field(default_factory=list)
    mask: list[float] = field(default_factory=list)  # 1 on sampled tokens (forced ones excluded)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    routing: list[torch.Tensor] = field(default_factory=list)  # per fed token: [n, L, k]
    topk: list[torch.Tensor] = field(default_factory=list)  # per fed token: [n, S, k_s]

    def feed(self, ids: list[int]) -> None:
        """Tokens the model was given (prompt, tool results, generation prompts)."""
        self.tokens += ids
        self.mask += [0.0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.versions += [-1] * len(ids)

    def sampled(self, result: TurnResult) -> None:
        """A turn's sampled tokens and what its forward recorded."""
        self.tokens += result.tokens
        self.mask += [0.0 if forced else 1.0 for forced in result.forced]
        self.logprobs += [0.0 if forced else lp for lp, forced in zip(result.logprobs, result.forced)]
        self.versions += result.versions
        if result.routing is not None:
            self.routing.append(result.routing)
        if result.sparse_topk is not None:
            self.topk.append(result.sparse_topk)

    def trajectory(self, episode: Episode) -> Trajectory:
        """What was recorded, as a learner trajectory of `episode`."""
        return Trajectory(
            episode=episode, tokens=torch.tensor(self.tokens, dtype=torch.long), loss_mask=torch.tensor(self.mask),
            behavior_logprobs=torch.tensor(self.logprobs), policy_version=torch.tensor(self.versions, dtype=torch.long),
            routed_experts=torch.cat(self.routing) if self.routing else None,
            sparse_topk=torch.cat(self.topk) if self.topk else None,
        )
