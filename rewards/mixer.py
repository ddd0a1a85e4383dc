"""The reward mixer: scores a batch of episodes from many domains into one normalised scalar reward each.

Combining. An episode's raw reward is the weighted sum of its non-abstaining components, with no
renormalisation of the weights. Renormalising would make one outcome's reward depend on which side terms
happened to apply: a solved episode with no thinking budget (so `think_budget_penalty` abstains) would earn
more correctness than a solved one under a budget. Scale differences this leaves are what the per-domain
normalisation removes. When every component abstains (a failed episode, an env lacking every signal its
terms read) the episode has no reward: `valid` is False, its reward is 0.0, it is left out of every
statistic and normaliser, and the learner should mask it out.

Normalisation modes:
  none    the raw reward.
  group   standardised within each prompt group (episodes sharing env_id, seed, tier and group_id): this
          already *is* GRPO's outcome advantage (r - mean_G) / (std_G + eps), with the population std. A
          learner given group-normalised rewards must not standardise them again: for grpo/gspo a second pass
          is nearly the identity, but dr_grpo and rloo would silently get std-scaled rewards, which is the
          very thing Dr. GRPO removes — use `none` or `domain` with those and let the algorithm do its part.
  domain  standardised by running moments per domain (and per tier), carried across steps and saved in the
          checkpoint via state_dict(); the learner's group baseline then still applies on top.
  batch   standardised over all valid episodes of the batch.

Rewards are plain Python floats: a batch is at most a few thousand episodes, the numbers are exact doubles
that tests can hand-compute, and the learner builds its tensors from them in one call.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from jointrl.envs.episode import Episode
from jointrl.rewards.metrics import batch_metrics
from jointrl.rewards.normalize import DomainNormalizer, standardize
from jointrl.rewards.spec import RewardTable


@dataclass
class MixedBatch:
    """The scored batch: per-episode rewards and components, and statistics for logging."""

    rewards: list[float]  # [B] normalised scalar reward; 0.0 where the episode has none
    raw: list[float | None]  # [B] weighted sum of non-abstaining components; None when all abstained
    components: list[dict[str, float | None]]  # [B] unweighted value of each term, None where it abstained
    metrics: dict[str, float]  # named as in jointrl.rewards.metrics

    @property
    def valid(self) -> list[bool]:
        """[B] whether the episode has a reward (the learner masks the others out)."""
        return [r is not None for r in self.raw]


class RewardMixer:
    """Scores episodes with a RewardTable, combines the components and normalises them (see module doc)."""

    def __init__(
        self,
        table: RewardTable,
        normalization: str = "group",
        decay: float = 0.9,
        by_tier: bool = True,
        eps: float = 1e-6,
    ):
        if not eps > 0:
            raise ValueError(f"eps must be positive, got {eps}")
        self.table, self.normalization = table, normalization
        self.domain = DomainNormalizer(decay=decay, by_tier=by_tier, eps=eps)
        # Each mode maps (raw values, their episodes) to normalised values.
        self._normalize: dict[str, Callable[[list[float], list[Episode]], list[float]]] = {
            "none": lambda values, episodes: list(values),
            "group": lambda values, episodes: standardize(values, [_prompt(e) for e in episodes], eps),
            "batch": lambda values, episodes: standardize(values, [None] * len(values), eps),
            "domain": self._by_domain,
        }
        if normalization not in self._normalize:
            raise ValueError(f"unknown normalization {normalization!r}; expected one of {', '.join(self._normalize)}")

    @classmethod
    def from_config(cls, config: Any) -> RewardMixer:
        """Build from a `RewardsConfig`: its terms, normalization mode and running-moment settings."""
        return cls(RewardTable.from_config(config), config.normalization, config.decay, config.by_tier)

    def mix(self, episodes: Sequence[Episode]) -> MixedBatch:
        """Score, combine and normalise one batch; returns rewards, components and metrics."""
        components = [self.table.score(e) for e in episodes]
        weights = [self.table.weights(e) for e in episodes]
        raw = [_combine(c, w) for c, w in zip(components, weights)]
        valid = [i for i, r in enumerate(raw) if r is not None]
        normalized = self._normalize[self.normalization]([raw[i] for i in valid], [episodes[i] for i in valid])
        rewards = [0.0] * len(episodes)
        for i, value in zip(valid, normalized):
            rewards[i] = value
        metrics = batch_metrics(episodes, components, weights, raw, rewards)
        if self.normalization == "domain":
            for cell, m in self.domain.cells.items():
                metrics |= {f"norm/{cell}/mean": m.mean, f"norm/{cell}/std": m.std}
        return MixedBatch(rewards, raw, components, metrics)

    def _by_domain(self, values: list[float], episodes: list[Episode]) -> list[float]:
        return self.domain(values, [self.domain.cell(e.domain, e.tier) for e in episodes])

    def state_dict(self) -> dict:
        """The running moments of `domain` normalisation (empty moments in the other modes)."""
        return {"domain": self.domain.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore what state_dict saved, to resume a run with the same normalisation."""
        self.domain.load_state_dict(state["domain"])


def _prompt(episode: Episode) -> tuple:
    # group_id alone would merge two prompts that both kept the default id; the task fields keep them apart.
    return episode.env_id, episode.seed, episode.tier, episode.group_id


def _combine(components: dict[str, float | None], weights: dict[str, float]) -> float | None:
    present = [weights[name] * value for name, value in components.items() if value is not None]
    return sum(present) if present else None
