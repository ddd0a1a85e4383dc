"""The recipe surface of rewards: weighted terms per domain or env glob, compiled into callable reward functions.

A recipe's `rewards` section (`jointrl.rl.config.rewards.RewardsConfig`) lists terms `{name, weight, params}` per
domain, per env-id glob and as a default. `RewardTable` resolves which terms score an episode — the first
env glob that matches its id, else its domain's list, else the default — and scores it into unweighted
components; the mixer weights and normalises them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Mapping, Sequence

from jointrl.envs.episode import Episode
from jointrl.rewards import registry


@dataclass(frozen=True)
class RewardSpec:
    """One weighted term as a recipe writes it: a reward name, its weight and keyword parameters."""

    name: str
    weight: float = 1.0
    params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, term: Any) -> RewardSpec:
        """A spec from a RewardSpec, a config term with name/weight/params attributes, or a plain dict."""
        if isinstance(term, RewardSpec):
            return term
        if isinstance(term, Mapping):
            return cls(term["name"], float(term.get("weight", 1.0)), dict(term.get("params", {})))
        return cls(term.name, float(term.weight), dict(term.params))


@dataclass(frozen=True)
class RewardFunction:
    """A compiled term: a registered reward bound to checked parameters, with its weight."""

    name: str
    weight: float
    params: Mapping[str, Any]
    reward: registry.Reward

    @classmethod
    def compile(cls, spec: RewardSpec) -> RewardFunction:
        """Look the reward up and check its parameters; an unknown name or bad parameter raises ValueError."""
        reward = registry.get(spec.name)
        return cls(spec.name, spec.weight, registry.validate(spec.name, spec.params), reward)

    def __call__(self, episode: Episode) -> float | None:
        return self.reward(episode, **self.params)


def compile_terms(terms: Sequence[Any], where: str) -> tuple[RewardFunction, ...]:
    """Compile one weighted list; `where` names it in errors (a domain, a glob, 'default')."""
    if not terms:
        raise ValueError(f"rewards for {where}: a list needs at least one term")
    functions = []
    for term in terms:
        spec = RewardSpec.of(term)
        try:
            functions.append(RewardFunction.compile(spec))
        except ValueError as err:
            raise ValueError(f"rewards for {where}: {err}") from None
    seen = [f.name for f in functions]
    twice = sorted({name for name in seen if seen.count(name) > 1})
    if twice:
        # Components are keyed by reward name in metrics; two terms of one name would overwrite each other.
        raise ValueError(f"rewards for {where}: {', '.join(map(repr, twice))} listed more than once")
    return tuple(functions)


class RewardTable:
    """Which weighted reward functions score an episode: first matching env glob, else its domain, else default."""

    def __init__(
        self,
        default: Sequence[Any],
        domains: Mapping[str, Sequence[Any]] | None = None,
        envs: Mapping[str, Sequence[Any]] | None = None,
    ):
        self.default = compile_terms(default, "default")
        self.domains = {domain: compile_terms(terms, domain) for domain, terms in (domains or {}).items()}
        self.envs = {glob: compile_terms(terms, glob) for glob, terms in (envs or {}).items()}

    @classmethod
    def from_config(cls, config: Any) -> RewardTable:
        """Build from a `RewardsConfig` (or anything with `default`, `domains` and optionally `envs`)."""
        return cls(config.default, config.domains, getattr(config, "envs", None))

    def functions(self, episode: Episode) -> tuple[RewardFunction, ...]:
        """The terms that score this episode."""
        for glob, functions in self.envs.items():
            if fnmatchcase(episode.env_id, glob):
                return functions
        return self.domains.get(episode.domain, self.default)

    def score(self, episode: Episode) -> dict[str, float | None]:
        """Each term's unweighted value on the episode (None where it abstains), keyed by reward name."""
        return {f.name: f(episode) for f in self.functions(episode)}

    def weights(self, episode: Episode) -> dict[str, float]:
        """Each term's weight for this episode, keyed by reward name."""
        return {f.name: f.weight for f in self.functions(episode)}
