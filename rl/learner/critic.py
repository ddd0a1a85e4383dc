"""The critic of PPO: a value head on the policy's final hidden states, and the module that trains both together.

Shape legend: B = batch rows, T = positions, D = model dim.

The value head shares the policy's trunk (no second network): one optimizer, or one DeepSpeed engine,
owns `PolicyWithValue`, and rollout workers load only `policy_state_dict()`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from jointrl.model.transformer import ModelOutput, Transformer


class ValueHead(nn.Module):
    """Linear(dim, 1) on hidden states; zero-initialised, so every value starts at 0."""

    def __init__(self, dim: int):
        super().__init__()
        if dim < 1:
            raise ValueError(f"dim={dim} must be positive")
        self.proj = nn.Linear(dim, 1)
        # Zero weight and bias: a fresh critic predicts 0 rather than noise, and the weight still gets a
        # gradient (hidden * dL/dvalue) on the first step.
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Values [B, T] fp32 of hidden states [B, T, D]."""
        return F.linear(hidden.float(), self.proj.weight.float(), self.proj.bias.float()).squeeze(-1)  # [B, T]


class PolicyWithValue(nn.Module):
    """The trained module: the policy, plus a value head when the algorithm needs a critic."""

    def __init__(self, policy: Transformer, value_head: ValueHead | None = None):
        super().__init__()
        self.policy = policy
        self.value_head = value_head

    @classmethod
    def build(cls, policy: Transformer, critic: bool) -> PolicyWithValue:
        """Wrap `policy`, adding a fresh value head of the policy's width when `critic` is True."""
        return cls(policy, ValueHead(policy.cfg.dim) if critic else None)

    def forward(
        self,
        tokens: torch.Tensor,
        valid: torch.Tensor,
        routing: torch.Tensor | None = None,
        sparse_topk: torch.Tensor | None = None,
        return_logits: bool = False,
    ) -> tuple[ModelOutput, torch.Tensor | None]:
        """The policy's ModelOutput on tokens [B, T], and values [B, T] (None without a value head)."""
        out = self.policy(tokens, valid=valid, routing=routing, sparse_topk=sparse_topk, return_logits=return_logits)
        values = self.value_head(out.hidden) if self.value_head is not None else None
        return out, values

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        """The policy's weights under plain Transformer key names (what rollout workers load)."""
        return self.policy.state_dict()
