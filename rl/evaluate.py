"""Held-out evaluation: play tasks with the agent loop and summarise them per domain, tier, domain x tier and env.

Per cell of episodes:
  pass rate      fraction with the env's `success` signal at 1.0 (a failed episode has not passed);
  mean reward    the recipe's reward table unnormalised (RewardMixer with normalization "none"), over the
                 episodes some term scored (all terms abstain on a failed episode);
  think tokens   mean thinking tokens over the episodes that were played (not failed);
  within budget  fraction of played episodes with a thinking budget whose think tokens stayed within it;
  pass@k         Chen et al. 2021 ("Evaluating Large Language Models Trained on Code"): a task sampled n
                 times with c passes gives the unbiased estimate 1 - C(n-c, k) / C(n, k) of the chance
                 that k samples hold a pass; the cell's value is the mean over its tasks, for k = 1, 2, 4,
                 ... up to the fewest samples any task got (and that number itself).
A task is (env id, seed, tier, group id): `TaskSampler.eval_tasks` gives the `samples` copies of a task one
group id. Seeds come only from the recipe's held-out range (envs.eval_seeds), which the config keeps
disjoint from the training seeds. Sampling at temperature > 0 draws from one torch generator seeded with
`seed`, so the same call plays the same episodes.
"""
from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

import torch
from rich.console import Console
from rich.table import Table

from jointrl.envs.episode import Episode
from jointrl.model.generate import SamplingParams
from jointrl.model.tokenizer import JointTokenizer
from jointrl.model.transformer import Transformer
from jointrl.rewards import RewardMixer, RewardTable
from jointrl.rl.rollout.agent import AgentLoop, LoopLimits, Task
from jointrl.rl.config.run import RunConfig
from jointrl.rl.progress import Progress
from jointrl.rl.rollout.engine import Engine
from jointrl.rl.rollout.task_sampler import TaskSampler
from jointrl.rl.trajectory import TokenLog, Trajectory

ALL = "all"
# The Episode fields each evaluated episode keeps in the summary's JSON: what its statistics and comparisons need.
_EPISODE_FIELDS = ("env_id", "domain", "family", "difficulty", "seed", "tier", "group_id", "signals", "final_answer",
                   "think_tokens", "answer_tokens", "think_budget", "turns", "truncated", "failed", "error")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with n samples and c passes: 1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    # Exact integers: Python's int / int is correctly rounded however large the binomials get.
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def k_values(n: int) -> list[int]:
    """The k reported for tasks with n samples each: powers of two below n, and n."""
    ks = [1 << i for i in range(n.bit_length()) if 1 << i < n]
    return ks + [n]


def passed(episode: Episode) -> bool:
    """Whether an episode solved its task: success signal 1.0 and not failed."""
    return not episode.failed and episode.signals.get("success", 0.0) >= 1.0


def _task_key(episode: Episode) -> tuple:
    return episode.env_id, episode.seed, episode.tier, episode.group_id


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass
class CellStats:
    """The numbers of one cell (a domain, a tier, a domain x tier, an env, or everything)."""

    episodes: int
    tasks: int
    pass_rate: float
    mean_reward: float | None  # None when no episode was scored
    think_tokens: float | None  # None when every episode failed
    within_budget: float | None  # None when no played episode had a thinking budget
    pass_at_k: dict[int, float] = field(default_factory=dict)

    @classmethod
    def of(cls, episodes: list[Episode], rewards: list[float | None]) -> CellStats:
        """Statistics of parallel lists of episodes and their raw rewards (see the module docstring)."""
        played = [e for e in episodes if not e.failed]
        budgeted = [e for e in played if e.think_budget]
        tasks: dict[tuple, list[bool]] = defaultdict(list)
        for e in episodes:
            tasks[_task_key(e)].append(passed(e))
        fewest = min(len(v) for v in tasks.values())
        return cls(
            episodes=len(episodes),
            tasks=len(tasks),
            pass_rate=sum(passed(e) for e in episodes) / len(episodes),
            mean_reward=_mean([r for r in rewards if r is not None]),
            think_tokens=_mean([float(e.think_tokens) for e in played]),
            within_budget=_mean([float(e.think_tokens <= e.think_budget) for e in budgeted]),
            pass_at_k={
                k: sum(pass_at_k(len(v), sum(v), k) for v in tasks.values()) / len(tasks) for k in k_values(fewest)
            },
        )

    def to_json(self) -> dict:
        """A JSON-ready dict (pass@k keys as strings)."""
        out = asdict(self)
        out["pass_at_k"] = {str(k): v for k, v in self.pass_at_k.items()}
        return out


@dataclass
class EvalSummary:
    """Every evaluated episode and its statistics per domain, tier, domain x tier and env."""

    trajectories: list[Trajectory]
    rewards: list[float | None]  # raw reward of each trajectory, None where every term abstained
    overall: CellStats
    domains: dict[str, CellStats]
    tiers: dict[str, CellStats]
    domain_tiers: dict[str, dict[str, CellStats]]  # domain -> tier -> stats
    envs: dict[str, CellStats]
    settings: dict = field(default_factory=dict)  # env ids, seeds, tiers, samples, temperature, seed

    @property
    def pass_rate(self) -> dict[str, float]:
        """Domain -> pass rate, and "all" over every episode."""
        return {**{d: s.pass_rate for d, s in self.domains.items()}, ALL: self.overall.pass_rate}

    @property
    def think_tokens(self) -> dict[str, float | None]:
        """Tier -> mean think tokens per played episode."""
        return {t: s.think_tokens for t, s in self.tiers.items()}

    @property
    def samples(self) -> int:
        """The fewest samples any task got (the largest k of pass@k)."""
        return max(self.overall.pass_at_k)

    def metrics(self) -> dict[str, float]:
        """Flat metric names for the tracker (it prefixes eval/): pass_rate/<domain>, tier/<tier>/..., ..."""
        out: dict[str, float] = {}

        def put(name: str, value: float | None) -> None:
            if value is not None:
                out[name] = value

        for domain, s in [*self.domains.items(), (ALL, self.overall)]:
            put(f"pass_rate/{domain}", s.pass_rate)
            put(f"reward/{domain}", s.mean_reward)
            for k, v in s.pass_at_k.items():
                if k > 1:
                    put(f"pass_at_{k}/{domain}", v)
        for tier, s in self.tiers.items():
            put(f"tier/{tier}/pass_rate", s.pass_rate)
            put(f"tier/{tier}/reward", s.mean_reward)
            put(f"tier/{tier}/think_tokens", s.think_tokens)
            put(f"tier/{tier}/within_budget", s.within_budget)
        for domain, by_tier in self.domain_tiers.items():
            for tier, s in by_tier.items():
                put(f"domain_tier/{domain}/{tier}/pass_rate", s.pass_rate)
        return out

    def to_json(self) -> dict:
        """JSON-ready data: settings, overall, per domain / tier / domain x tier / env, and every episode."""
        episodes = [
            {**{name: getattr(t.episode, name) for name in _EPISODE_FIELDS}, "passed": passed(t.episode),
             "reward": reward}
            for t, reward in zip(self.trajectories, self.rewards)
        ]
        return {
            "settings": self.settings,
            "overall": self.overall.to_json(),
            "domains": {d: s.to_json() for d, s in self.domains.items()},
            "tiers": {t: s.to_json() for t, s in self.tiers.items()},
            "domain_tiers": {d: {t: s.to_json() for t, s in by.items()} for d, by in self.domain_tiers.items()},
            "envs": {e: s.to_json() for e, s in self.envs.items()},
            "episodes": episodes,
        }

    @classmethod
    def from_json(cls, data: dict) -> EvalSummary:
        """The summary `to_json` wrote, rebuilt from its episodes: statistics and paired comparisons, no tokens."""
        trajectories, rewards = [], []
        for i, row in enumerate(data["episodes"]):
            try:
                episode = Episode(**{name: row[name] for name in _EPISODE_FIELDS})
            except KeyError as err:
                raise ValueError(f"episode {i} has no {err.args[0]!r}: not written by EvalSummary.to_json") from None
            trajectories.append(TokenLog().trajectory(episode))
            rewards.append(row["reward"])
        return summarize(trajectories, rewards, data["settings"])


def raw_rewards(cfg: RunConfig, episodes: Sequence[Episode]) -> list[float | None]:
    """Each episode's reward from the recipe's reward table, unnormalised; None where every term abstained."""
    return RewardMixer(RewardTable.from_config(cfg.rewards), normalization="none").mix(episodes).raw


def summarize(trajectories: list[Trajectory], rewards: list[float | None], settings: dict | None = None) -> EvalSummary:
    """Statistics of played trajectories and their raw rewards per domain, tier, domain x tier and env."""
    if not trajectories:
        raise ValueError("nothing to summarise: no episodes were played")
    if len(rewards) != len(trajectories):
        raise ValueError(f"{len(rewards)} rewards for {len(trajectories)} trajectories")
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, t in enumerate(trajectories):
        e = t.episode
        for key in (("domain", e.domain), ("tier", e.tier), ("domain_tier", e.domain, e.tier), ("env", e.env_id)):
            groups[key].append(i)

    def cell(idx: list[int]) -> CellStats:
        return CellStats.of([trajectories[i].episode for i in idx], [rewards[i] for i in idx])

    domain_tiers: dict[str, dict[str, CellStats]] = defaultdict(dict)
    for key in sorted(k for k in groups if k[0] == "domain_tier"):
        domain_tiers[key[1]][key[2]] = cell(groups[key])
    return EvalSummary(
        trajectories=trajectories,
        rewards=list(rewards),
        overall=cell(list(range(len(trajectories)))),
        domains={k[1]: cell(groups[k]) for k in sorted(k for k in groups if k[0] == "domain")},
        tiers={k[1]: cell(groups[k]) for k in sorted(k for k in groups if k[0] == "tier")},
        domain_tiers=dict(domain_tiers),
        envs={k[1]: cell(groups[k]) for k in sorted(k for k in groups if k[0] == "env")},
        settings=dict(settings or {}),
    )


def check_eval_seeds(cfg: RunConfig, seeds: Iterable[int]) -> list[int]:
    """The seeds as a list; ValueError naming those outside the recipe's held-out range."""
    seeds = list(seeds)
    held_out, train = cfg.envs.eval_seeds, cfg.envs.train_seeds
    outside = [s for s in seeds if not held_out.start <= s < held_out.stop]
    if outside:
        shown = outside if len(outside) <= 5 else [*outside[:5], "..."]
        raise ValueError(
            f"seeds {shown} are outside the held-out range [{held_out.start}, {held_out.stop}) of envs.eval_seeds "
            f"(training uses [{train.start}, {train.stop}))"
        )
    if not seeds:
        raise ValueError("evaluation needs at least one seed")
    return seeds


def eval_tasks(
    cfg: RunConfig, globs: Sequence[str], seeds: Sequence[int], tiers: Sequence[str] | None = None, samples: int = 1
) -> list[Task]:
    """Held-out tasks of every env id the globs select (each once) x seed x tier, `samples` copies each."""
    seeds = check_eval_seeds(cfg, seeds)
    sampler = TaskSampler.from_config(cfg)
    tasks: list[Task] = []
    seen: set[str] = set()
    # Group ids count from 0 within each eval_tasks call; renumber them so different globs never share one.
    group_of: dict[tuple[int, int], int] = {}
    for call, glob in enumerate(globs):
        fresh = [t for t in sampler.eval_tasks(glob, seeds, tiers=tiers, samples=samples) if t.env_id not in seen]
        for t in fresh:
            tasks.append(Task(t.env_id, t.seed, t.tier, group_of.setdefault((call, t.group_id), len(group_of)), t.agent))
        seen.update(t.env_id for t in fresh)
    return tasks


class _CountedLoop(AgentLoop):
    """The agent loop, advancing a progress display as each episode ends."""

    def __init__(self, *args, progress: Progress):
        super().__init__(*args)
        self.progress = progress
        self._counting = threading.Lock()

    # AgentLoop.run takes no per-episode callback; _finish runs once for every episode that started, in the
    # scoring threads, which may end two at once.
    def _finish(self, state, error: str | None = None) -> Trajectory:
        trajectory = super()._finish(state, error)
        with self._counting:
            self.progress.advance(info=f"{state.episode.env_id} seed {state.episode.seed}")
        return trajectory


def play(
    model: Transformer, tokenizer: JointTokenizer, cfg: RunConfig, tasks: list[Task],
    temperature: float = 0.0, seed: int = 0, max_rows: int = 32, console: Console | None = None,
) -> list[Trajectory]:
    """Play tasks with the recipe's rollout limits; temperature > 0 samples from a generator seeded with seed.

    With a console, a progress display counts the episodes as they end.
    """
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    engine = Engine(
        model, tokenizer.think_start_id, tokenizer.think_end_id, max_rows=max_rows, generator=generator,
        pad_id=tokenizer.pad_id,
    )
    sampling = SamplingParams(temperature=temperature, top_p=cfg.rollout.top_p, top_k=cfg.rollout.top_k)
    with torch.no_grad(), Progress(console, "eval", len(tasks), unit="episode") as progress:
        trajectories = _CountedLoop(engine, tokenizer, LoopLimits.from_rollout(cfg.rollout), sampling,
                                    progress=progress).run(tasks)
        # Episodes whose env failed to reset end without _finish; count them so the display ends at the total.
        if progress.done < len(tasks):
            progress.advance(len(tasks) - progress.done)
    return trajectories


def evaluate(
    model: Transformer, tokenizer: JointTokenizer, cfg: RunConfig, env_ids: Sequence[str], seeds: Sequence[int],
    temperature: float = 0.0, max_rows: int = 32, *, tiers: Sequence[str] | None = None, samples: int = 1,
    seed: int = 0, console: Console | None = None,
) -> EvalSummary:
    """Play every env id (or glob) on every held-out seed, in the given tiers (None: the run's tier selection).

    With a console, a progress display counts the episodes as they end.
    """
    seeds = check_eval_seeds(cfg, seeds)
    tasks = eval_tasks(cfg, list(env_ids), seeds, tiers, samples)
    trajectories = play(model, tokenizer, cfg, tasks, temperature, seed, max_rows, console)
    settings = {
        "env_ids": sorted({t.env_id for t in tasks}), "seeds": seeds,
        "tiers": list(tiers) if tiers is not None else None, "tiers_played": sorted({t.tier for t in tasks}),
        "samples": samples, "temperature": temperature, "seed": seed,
    }
    return summarize(trajectories, raw_rewards(cfg, [t.episode for t in trajectories]), settings)


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def print_summary(summary: EvalSummary, console: Console, title: str) -> None:
    """A table per domain and tier (a domain's total row when it spans tiers), and the overall row."""
    k = summary.samples
    table = Table(title=title)
    for name in ("domain", "tier", "episodes", "pass rate", "reward", "think", "in budget"):
        table.add_column(name, justify="left" if name in ("domain", "tier") else "right")
    if k > 1:
        table.add_column(f"pass@{k}", justify="right")

    def row(domain: str, tier: str, s: CellStats, end_section: bool = False) -> None:
        cells = [
            domain, tier, str(s.episodes), f"{s.pass_rate:.2f}", _num(s.mean_reward), _num(s.think_tokens, "{:.0f}"),
            _num(s.within_budget),
        ]
        if k > 1:
            cells.append(_num(s.pass_at_k.get(k)))
        table.add_row(*cells, end_section=end_section)

    for domain, by_tier in summary.domain_tiers.items():
        tiers = list(by_tier.items())
        for i, (tier, s) in enumerate(tiers):
            row(domain, tier, s, end_section=len(tiers) == 1 and i == 0)
        if len(tiers) > 1:
            row(domain, ALL, summary.domains[domain], end_section=True)
    if len(summary.tiers) > 1:
        for tier, s in summary.tiers.items():
            row(ALL, tier, s)
    row(ALL, ALL, summary.overall)
    console.print(table)
