"""Learnability-weighted mixing: draw more often the env ids whose recent pass rate is neither 0 nor 1.

A group of samples teaches GRPO-style learners only when its rewards differ, which an id with pass rate p
gives with a chance that peaks at p = 0.5 and vanishes at 0 and 1. So each id's mix weight is multiplied
by its learnability 4·p·(1 - p) (1 at p = 0.5), kept at or above `floor` so that an id the policy has
mastered or cannot yet solve is still revisited (its pass rate can only be re-measured by playing it), and
no id takes more than `cap` of its domain's prompts. Domain shares are untouched: this reweights ids
within a domain only.

p is a decayed count: after each step every id's (episodes, successes) is multiplied by `decay` and the
step's outcomes are added, and `prior_episodes` half-successes are mixed in, so an unseen id starts at
p = 0.5, the most learnable.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping


def cap_shares(weights: Mapping[str, float], cap: float) -> dict[str, float]:
    """Normalised weights with no share above `cap` (raised to 1/n when n ids cannot all fit under it).

    The mass cut from capped ids goes to the others in proportion to their weights, repeated until no
    share exceeds the cap (at most n rounds, since each round caps at least one more id).
    """
    cap = max(cap, 1.0 / len(weights))
    capped: set[str] = set()
    while True:
        free = {k: w for k, w in weights.items() if k not in capped}
        free_mass = 1.0 - cap * len(capped)
        total = sum(free.values())
        shares = {k: cap for k in capped} | {k: free_mass * w / total for k, w in free.items()}
        over = {k for k, s in shares.items() if k not in capped and s > cap}
        if not over:
            return shares
        capped |= over


class Learnability:
    """Decayed per-id pass rates and the within-domain weights they give."""

    def __init__(self, floor: float = 0.1, cap: float = 0.5, decay: float = 0.8, prior_episodes: float = 2.0):
        if not 0 < floor <= 1:
            raise ValueError(f"learnability floor must be in (0, 1], got {floor}")
        if not 0 < cap <= 1:
            raise ValueError(f"learnability cap must be in (0, 1], got {cap}")
        if not 0 <= decay < 1:
            raise ValueError(f"learnability decay must be in [0, 1), got {decay}")
        if not prior_episodes > 0:
            raise ValueError(f"learnability prior_episodes must be > 0, got {prior_episodes}")
        self.floor, self.cap, self.decay, self.prior_episodes = floor, cap, decay, prior_episodes
        self.episodes: dict[str, float] = {}
        self.successes: dict[str, float] = {}

    def record(self, outcomes: Iterable[tuple[str, float]]) -> None:
        """One step's (env id, success in [0, 1]) outcomes; older steps' counts decay first."""
        for env_id in self.episodes:
            self.episodes[env_id] *= self.decay
            self.successes[env_id] *= self.decay
        for env_id, success in outcomes:
            self.episodes[env_id] = self.episodes.get(env_id, 0.0) + 1.0
            self.successes[env_id] = self.successes.get(env_id, 0.0) + min(max(float(success), 0.0), 1.0)

    def pass_rate(self, env_id: str) -> float:
        """The id's recent pass rate, shrunk towards 0.5 by the prior."""
        prior = self.prior_episodes
        return (self.successes.get(env_id, 0.0) + prior / 2) / (self.episodes.get(env_id, 0.0) + prior)

    def factor(self, env_id: str) -> float:
        """4·p·(1 - p), at least the floor."""
        p = self.pass_rate(env_id)
        return max(self.floor, 4.0 * p * (1.0 - p))

    def shares(self, weights: Mapping[str, float]) -> dict[str, float]:
        """Each id's share of its domain's prompts, from its mix weight (the ids of one domain) and its factor."""
        return cap_shares({env_id: w * self.factor(env_id) for env_id, w in weights.items()}, self.cap)

    def state_dict(self) -> dict:
        """The decayed counts (JSON floats round-trip exactly, so a resumed run draws the same tasks)."""
        return {"episodes": dict(self.episodes), "successes": dict(self.successes)}

    def load_state_dict(self, state: Mapping) -> None:
        """Continue from a `state_dict()`."""
        episodes, successes = dict(state["episodes"]), dict(state["successes"])
        if sorted(episodes) != sorted(successes):
            raise ValueError("learnability state: episodes and successes cover different env ids")
        self.episodes = {k: float(v) for k, v in episodes.items()}
        self.successes = {k: float(successes[k]) for k in episodes}
