"""The task sampler: each RL step's prompts (env id, seed, tier), each repeated for a group of G samples.

How the recipe's weights combine into the probability of an env id:

1. Each `envs.mix` entry spreads its weight evenly over the ids its glob selects in the registry; an id
   that several globs select adds up its parts. So `{glob: "terminal/*:easy", weight: 2}` over 10 ids
   gives each 0.2, whatever the other entries select.
2. Each domain's share of prompts is `envs.domain_shares[domain]` when shares are given (then every
   domain the mix selects needs one), else the domain's summed id weights over the whole mix's weight.
3. Within a domain, ids are drawn in proportion to their weights from step 1, so
   P(id) = share(domain) * weight(id) / weight(domain).
   With `envs.mix_schedule: learnability` each id's weight is also scaled by how much it can teach now
   (`learnability.py`), from the outcomes of the steps played so far.

Domains are not drawn at random: prompt after prompt, the domain furthest below its share
(share * prompts so far - its prompts so far, ties to the first in name order) gets the next prompt, so
every domain's count stays within one prompt of its share at every point of the run. The id within the
domain, the seed (from the train range only) and, in `ratios` mode, the tier are drawn from an RNG
seeded by (run seed, step), and each step's prompts are shuffled so that a worker taking a contiguous
slice does not get one domain. Because each step's RNG depends only on the step, the state that
resumes a run is a few integers (`state_dict`, plus the learnability counts when they weight the mix), and
a resumed sampler produces exactly the tasks the uninterrupted one would have.
"""
from __future__ import annotations

import bisect
import random
from collections.abc import Iterable, Mapping, Sequence

from jointrl.envs import registry
from jointrl.envs.base import TIERS
from jointrl.rl.rollout.agent import Task
from jointrl.rl.config.run import RunConfig
from jointrl.rl.rollout.learnability import Learnability
from jointrl.rl.rollout.tiers import TierSelector

STATE_VERSION = 1


def _resolve_mix(mix: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Each env id's weight: every entry's weight split evenly over the ids its glob selects, summed."""
    weights: dict[str, float] = {}
    for glob, weight in mix:
        if not weight > 0:
            raise ValueError(f"envs.mix glob {glob!r}: weight must be > 0, got {weight!r}")
        ids = registry.env_ids(glob)
        if not ids:
            domains = sorted({registry.spec(i).domain for i in registry.env_ids()})
            raise ValueError(
                f"envs.mix glob {glob!r} selects no registered env id (ids read 'domain/family-vN:difficulty'; "
                f"domains: {', '.join(domains)})"
            )
        for env_id in ids:
            weights[env_id] = weights.get(env_id, 0.0) + weight / len(ids)
    return weights


def _resolve_agents(agents: Sequence[tuple[str, str | None]]) -> dict[str, str]:
    """Each env id's black-box agent, from the mix entries that name one; two different agents for one id is an error."""
    out: dict[str, str] = {}
    for glob, agent in agents:
        if agent is None:
            continue
        for env_id in registry.env_ids(glob):
            if out.get(env_id, agent) != agent:
                raise ValueError(f"envs.mix gives {env_id} two agents: {out[env_id]!r} and {agent!r} (glob {glob!r})")
            out[env_id] = agent
    return out


def _domain_shares(
    by_domain: dict[str, list[str]], weights: dict[str, float], shares: Mapping[str, float], mix_globs: list[str]
) -> dict[str, float]:
    """Each domain's fraction of prompts: the given shares (normalised), else its part of the mix weight."""
    if not shares:
        total = sum(weights.values())
        return {d: sum(weights[i] for i in ids) / total for d, ids in by_domain.items()}
    for domain, share in shares.items():
        if domain not in by_domain:
            raise ValueError(
                f"envs.domain_shares names domain {domain!r}, but no envs.mix glob ({', '.join(mix_globs)}) "
                f"selects an env of it"
            )
        if not share > 0:
            raise ValueError(f"envs.domain_shares[{domain!r}] must be > 0, got {share!r}")
    missing = [d for d in by_domain if d not in shares]
    if missing:
        raise ValueError(
            f"envs.mix selects domain(s) {', '.join(missing)} that envs.domain_shares gives no share; "
            "add a share or narrow the mix's globs"
        )
    total = sum(shares.values())
    return {d: shares[d] / total for d in by_domain}


def _check_seed(seed: object, seeds: range, what: str) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed not in seeds:
        raise ValueError(f"seed {seed!r} is outside the {what} seed range [{seeds.start}, {seeds.stop})")
    return seed


class TaskSampler:
    """Produces each step's tasks from the env mix, deterministically from the run seed, and resumably."""

    def __init__(
        self,
        mix: Sequence[tuple[str, float]],
        *,
        train_seeds: range,
        eval_seeds: range,
        group_size: int,
        prompts_per_step: int,
        seed: int,
        tiers: TierSelector | None = None,
        domain_shares: Mapping[str, float] | None = None,
        learnability: Learnability | None = None,
        agents: Sequence[tuple[str, str | None]] = (),
    ):
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        if prompts_per_step < 1:
            raise ValueError(f"prompts_per_step must be >= 1, got {prompts_per_step}")
        if not train_seeds or not eval_seeds:
            raise ValueError(f"seed ranges must not be empty: train {train_seeds}, eval {eval_seeds}")
        if train_seeds.step != 1 or eval_seeds.step != 1:
            raise ValueError("seed ranges must be contiguous (step 1)")
        if train_seeds.start < eval_seeds.stop and eval_seeds.start < train_seeds.stop:
            raise ValueError(f"eval seeds {eval_seeds} overlap train seeds {train_seeds}")
        self.group_size = group_size
        self.prompts_per_step = prompts_per_step
        self.seed = seed
        self.train_seeds = train_seeds
        self.eval_seeds = eval_seeds
        self.tiers = tiers if tiers is not None else TierSelector()

        self.weights = _resolve_mix(mix)
        self.agents = _resolve_agents(agents)  # env id -> black-box agent ("module:function")
        by_domain: dict[str, list[str]] = {}
        for env_id in sorted(self.weights):
            by_domain.setdefault(registry.spec(env_id).domain, []).append(env_id)
        self.domains = sorted(by_domain)
        self.shares = _domain_shares(
            {d: by_domain[d] for d in self.domains}, self.weights, domain_shares or {}, [g for g, _ in mix]
        )
        self._ids = by_domain
        self.learnability = learnability
        self._cumulative: dict[str, list[float]] = {}
        self._reweigh()

        self.step = 0
        self.next_group_id = 0
        self.domain_counts = {d: 0 for d in self.domains}

    @classmethod
    def from_config(cls, run_config: RunConfig) -> TaskSampler:
        """The sampler a run's `envs`, `rollout` and `trainer` sections describe."""
        envs = run_config.envs
        learnability = None
        if envs.mix_schedule == "learnability":
            learnability = Learnability(**envs.learnability.model_dump())
        return cls(
            [(entry.glob, entry.weight) for entry in envs.mix],
            train_seeds=range(envs.train_seeds.start, envs.train_seeds.stop),
            eval_seeds=range(envs.eval_seeds.start, envs.eval_seeds.stop),
            group_size=run_config.rollout.group_size,
            prompts_per_step=run_config.trainer.prompts_per_step,
            seed=run_config.trainer.seed,
            tiers=TierSelector.from_config(run_config.rollout.tier_selection),
            domain_shares=envs.domain_shares,
            learnability=learnability,
            agents=[(entry.glob, entry.agent) for entry in envs.mix],
        )

    def _within_domain(self, domain: str) -> dict[str, float]:
        weights = {env_id: self.weights[env_id] for env_id in self._ids[domain]}
        return self.learnability.shares(weights) if self.learnability else weights

    def _reweigh(self) -> None:
        for domain, ids in self._ids.items():
            weights = self._within_domain(domain)
            running, cumulative = 0.0, []
            for env_id in ids:
                running += weights[env_id]
                cumulative.append(running)
            self._cumulative[domain] = cumulative

    def record(self, outcomes: Iterable[tuple[str, float]]) -> None:
        """A played step's (env id, success) outcomes: they reweigh the next draws under learnability mixing."""
        if self.learnability is not None:
            self.learnability.record(outcomes)
            self._reweigh()

    def probabilities(self) -> dict[str, float]:
        """Each env id's probability per prompt: share(domain) * its part of the domain's current weight."""
        out = {}
        for domain, ids in self._ids.items():
            weights = self._within_domain(domain)
            domain_weight = sum(weights.values())
            for env_id in ids:
                out[env_id] = self.shares[domain] * weights[env_id] / domain_weight
        return out

    def _next_domain(self) -> str:
        # The domain furthest below its share after one more prompt; max() keeps the first of equals.
        n = sum(self.domain_counts.values()) + 1
        domain = max(self.domains, key=lambda d: self.shares[d] * n - self.domain_counts[d])
        self.domain_counts[domain] += 1
        return domain

    def _draw_env(self, domain: str, rng: random.Random) -> str:
        cumulative = self._cumulative[domain]
        index = bisect.bisect_right(cumulative, rng.random() * cumulative[-1])
        return self._ids[domain][min(index, len(cumulative) - 1)]

    def next_step(self, prompts: int | None = None) -> list[Task]:
        """This step's tasks: `prompts` prompts (default prompts_per_step), each `group_size` times under one new group id.

        Partial rollouts draw fewer when groups carried over from earlier steps fill part of the batch.
        """
        # A string seed is hashed with SHA-512 by `random`, so the stream does not depend on PYTHONHASHSEED.
        rng = random.Random(f"jointrl.task_sampler:{self.seed}:{self.step}")
        drawn = []
        for _ in range(self.prompts_per_step if prompts is None else prompts):
            env_id = self._draw_env(self._next_domain(), rng)
            seed = rng.randrange(self.train_seeds.start, self.train_seeds.stop)
            drawn.append((env_id, seed, self.tiers.choose(env_id, rng)))
        rng.shuffle(drawn)
        tasks = []
        for env_id, seed, tier in drawn:
            tasks += [Task(env_id, seed, tier, self.next_group_id, self.agents.get(env_id))] * self.group_size
            self.next_group_id += 1
        self.step += 1
        return tasks

    def eval_tasks(
        self, glob: str, seeds: Iterable[int], tiers: Sequence[str] | None = None, samples: int = 1
    ) -> list[Task]:
        """Held-out tasks: every env id `glob` selects × eval seed × tier, `samples` copies each.

        `tiers=None` plays each task in the tier the run's selection gives it (in ratios mode, drawn from
        an RNG seeded by run seed, env id and seed). Group ids count from 0 within the returned list; they
        never meet training groups. The sampler's training state is untouched.
        """
        ids = registry.env_ids(glob)
        if not ids:
            raise ValueError(f"eval glob {glob!r} selects no registered env id")
        seeds = [_check_seed(s, self.eval_seeds, "eval") for s in seeds]
        if not seeds:
            raise ValueError("eval_tasks needs at least one seed")
        if tiers is not None:
            for tier in tiers:
                if tier not in TIERS:
                    raise ValueError(f"unknown tier {tier!r}; tiers are {', '.join(TIERS)}")
        if samples < 1:
            raise ValueError(f"samples must be >= 1, got {samples}")
        tasks: list[Task] = []
        group_id = 0
        for env_id in ids:
            for seed in seeds:
                if tiers is None:
                    rng = random.Random(f"jointrl.task_sampler.eval:{self.seed}:{env_id}:{seed}")
                    chosen = [self.tiers.choose(env_id, rng)]
                else:
                    chosen = list(tiers)
                for tier in chosen:
                    tasks += [Task(env_id, seed, tier, group_id, self.agents.get(env_id))] * samples
                    group_id += 1
        return tasks

    def state_dict(self) -> dict:
        """What resumes the sampler: JSON-safe integers (the step's RNG is rebuilt from the seed and step)."""
        state = {
            "version": STATE_VERSION,
            "seed": self.seed,
            "step": self.step,
            "next_group_id": self.next_group_id,
            "domain_counts": dict(self.domain_counts),
        }
        if self.learnability is not None:
            state["learnability"] = self.learnability.state_dict()
        return state

    def load_state_dict(self, state: Mapping) -> None:
        """Continue from a `state_dict()`; the run seed and the mix's domains must match the saved ones."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"task sampler state version {state.get('version')!r} is not {STATE_VERSION}")
        if state["seed"] != self.seed:
            raise ValueError(f"task sampler state was saved with run seed {state['seed']}, this run has {self.seed}")
        counts = dict(state["domain_counts"])
        if sorted(counts) != self.domains:
            raise ValueError(
                f"task sampler state covers domains {sorted(counts)}, this run's mix selects {self.domains}"
            )
        values = [state["step"], state["next_group_id"], *counts.values()]
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in values):
            raise ValueError(f"task sampler state holds a value that is not a count: {dict(state)}")
        if (self.learnability is not None) != ("learnability" in state):
            raise ValueError("task sampler state and this run disagree on envs.mix_schedule (learnability counts "
                             f"{'missing from' if self.learnability is not None else 'present in'} the saved state)")
        self.step = state["step"]
        self.next_group_id = state["next_group_id"]
        self.domain_counts = {d: counts[d] for d in self.domains}
        if self.learnability is not None:
            self.learnability.load_state_dict(state["learnability"])
            self._reweigh()
