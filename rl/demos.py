"""Demonstrations for the supervised cold start: each env's scripted solution, played through its real tools."""
from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from jointrl.envs import registry
from jointrl.model.tokenizer import JointTokenizer
from jointrl.rl import demo_cache
from jointrl.rl.config.rollout import RolloutConfig
from jointrl.rl.demo_cache import Job, Played
from jointrl.rl.rollout.tiers import TierSelector
from jointrl.rl.sft import Conversation


def mix_env_ids(globs: list[str]) -> list[str]:
    """Every registered id the recipe's mix globs select, in order, each once; an empty glob is an error."""
    ids: list[str] = []
    for glob in globs:
        matched = registry.env_ids(glob)
        if not matched:
            raise ValueError(f"env mix glob {glob!r} selects no registered environment")
        ids += [i for i in matched if i not in ids]
    return ids


def play_demo(env_id: str, seed: int, tier: str | None = None) -> tuple[Conversation, dict[str, float]]:
    """One env's scripted solution for `seed` as a conversation, and the signals it earned."""
    env = registry.make(env_id)
    try:
        obs = env.reset(seed)
        messages = obs.messages + env.demo()
        signals = env.signals()
    finally:
        env.close()
    return Conversation(messages, obs.tools, tier or env.spec.default_tier, source=env_id), signals


# Demos of tool envs mostly wait on their sandboxed commands: 4 threads collect 2.2x faster on 2 cores.
DEMO_THREADS = 4


def collect_demos(env_ids: list[str], seeds: list[int], tiers: TierSelector | None = None,
                  cache: Path | None = None) -> list[Conversation]:
    """Demonstrations of every env for every seed, in that order, keeping only those that score full marks.

    `tiers` renders each demo in the tier the rollout plays its task in (None: the env's default tier): the tier is
    a control token of the prompt, and a policy trained under one tier and asked under another writes noise.
    `cache` keeps played demos on disk (rl/demo_cache.py): a later call with the same code plays only new ones.
    """
    # ratios mode draws a demo's tier from its seed, so the cold start is as deterministic as its seeds.
    jobs = [(env_id, seed, tiers.choose(env_id, random.Random(seed)) if tiers else None)
            for env_id in env_ids for seed in seeds]
    done: dict[Job, Played] = {}
    if cache is not None:
        for env_id in env_ids:
            done |= demo_cache.load(cache, env_id)
    missing = [job for job in jobs if job not in done]
    with ThreadPoolExecutor(DEMO_THREADS, thread_name_prefix="demos") as pool:
        # A demo that does not solve its task would teach the wrong thing; conformance makes this rare.
        fresh = {job: (conversation, signals.get("success") == 1.0)
                 for job, (conversation, signals) in zip(missing, pool.map(lambda job: play_demo(*job), missing))}
    if cache is not None:
        for env_id in env_ids:
            mine = {job: played for job, played in fresh.items() if job[0] == env_id}
            if mine:
                demo_cache.store(cache, env_id, mine)
    done |= fresh
    return [done[job][0] for job in jobs if done[job][1]]


class DemoNeeds(NamedTuple):
    """What playing a demonstration back asks of the rollout limits and the model."""

    turns: int  # assistant turns
    longest_turn: int  # generated tokens of the longest turn
    generated: int  # generated tokens in all
    thinking: int  # generated tokens inside <think>...</think>, all turns together (the tier's budget caps them)
    context: int  # the whole rendered sequence (the model's max_seq_len caps it)


def demo_needs(tokenizer: JointTokenizer, conversation: Conversation) -> DemoNeeds:
    """The turns, generated, thinking and context tokens a demonstration needs to be played back whole."""
    ids, mask = tokenizer.render_with_mask(conversation.messages, conversation.tools, conversation.tier)
    runs, current, thinking, inside = [], 0, 0, False
    for token, generated in zip(ids, mask):
        if generated:
            current += 1
            # The engine counts the tokens between the markers, not the markers themselves.
            if token in (tokenizer.think_start_id, tokenizer.think_end_id):
                inside = token == tokenizer.think_start_id
            elif inside:
                thinking += 1
        elif current:
            runs.append(current)
            current = 0
    if current:
        runs.append(current)
    return DemoNeeds(len(runs), max(runs, default=0), sum(runs), thinking, len(ids))


def demo_misfits(tokenizer: JointTokenizer, demos: list[Conversation], rollout: RolloutConfig,
                 max_seq_len: int) -> list[str]:
    """One line per env id whose demonstrations the rollout limits, the thinking budget of the tier the rollout
    plays it in, or the model's context would cut: the policy could never finish what the cold start taught it,
    and that env's pass rate stays 0 whatever RL does."""
    needs: dict[str, list[DemoNeeds]] = {}
    for demo in demos:
        if demo.source is not None:
            needs.setdefault(demo.source, []).append(demo_needs(tokenizer, demo))
    selector = TierSelector.from_config(rollout.tier_selection)
    budgets = rollout.tiers.model_dump()  # tier -> thinking tokens, as the agent loop takes them
    lines = []
    for env_id, found in needs.items():
        # In ratios mode a task may draw the lowest of its tiers, so that budget is the one every demo must fit.
        tier = min(selector.possible(env_id), key=budgets.__getitem__)
        limits = {
            "rollout.max_turns": (rollout.max_turns, "turns"),
            "rollout.max_new_tokens_per_turn": (rollout.max_new_tokens_per_turn, "longest_turn"),
            "rollout.max_new_tokens_per_episode": (rollout.max_new_tokens_per_episode, "generated"),
            f"rollout.tiers.{tier} (its thinking budget)": (budgets[tier], "thinking"),
            "model.max_seq_len": (max_seq_len, "context"),
        }
        cut, over = [], set()
        for name, (limit, field) in limits.items():
            values = [getattr(need, field) for need in found]
            if max(values) > limit:
                cut.append(f"{name} is {limit}, a demo needs {max(values)}")
                over |= {i for i, value in enumerate(values) if value > limit}
        if cut:
            lines.append(f"{env_id}: {len(over)} of {len(found)} demonstrations do not fit the rollout limits "
                         f"({'; '.join(cut)})")
    return lines
