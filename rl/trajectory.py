"""The token-level record of one episode: what the learner trains on, exactly as it was sampled.

Shape legend: T = tokens of the whole episode (prompt, every turn, every tool result), L = MoE layers,
k = experts per token, S = DSA layers, k_s = selected tokens per query.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from jointrl.envs.episode import Episode


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
