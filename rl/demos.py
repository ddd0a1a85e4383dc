"""Demonstrations for the supervised cold start: each env's scripted solution, played through its real tools."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from jointrl.envs import registry
from jointrl.model.tokenizer import JointTokenizer
from jointrl.rl.config.rollout import RolloutConfig
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


def collect_demos(env_ids: list[str], seeds: list[int]) -> list[Conversation]:
    """Demonstrations of every env for every seed, in that order, keeping only those that score full marks."""
    jobs = [(env_id, seed) for env_id in env_ids for seed in seeds]
    with ThreadPoolExecutor(DEMO_THREADS, thread_name_prefix="demos") as pool:
        played = list(pool.map(lambda job: play_demo(*job), jobs))
    # A demo that does not solve its task would teach the wrong thing; conformance makes this rare.
    return [conversation for conversation, signals in played if signals.get("success") == 1.0]


def demo_needs(tokenizer: JointTokenizer, conversation: Conversation) -> tuple[int, int, int]:
    """(assistant turns, the longest turn's generated tokens, all generated tokens) of a demonstration."""
    _, mask = tokenizer.render_with_mask(conversation.messages, conversation.tools, conversation.tier)
    runs, current = [], 0
    for generated in mask:
        if generated:
            current += 1
        elif current:
            runs.append(current)
            current = 0
    if current:
        runs.append(current)
    return len(runs), max(runs, default=0), sum(runs)


def demo_misfits(tokenizer: JointTokenizer, demos: list[Conversation], rollout: RolloutConfig) -> list[str]:
    """One line per env id whose demonstrations the rollout limits would cut: the policy could never finish
    what the cold start taught it, and that env's pass rate stays 0 whatever RL does."""
    needs: dict[str, list[tuple[int, int, int]]] = {}
    for demo in demos:
        if demo.source is not None:
            needs.setdefault(demo.source, []).append(demo_needs(tokenizer, demo))
    names = ("rollout.max_turns", "rollout.max_new_tokens_per_turn", "rollout.max_new_tokens_per_episode")
    limits = (rollout.max_turns, rollout.max_new_tokens_per_turn, rollout.max_new_tokens_per_episode)
    lines = []
    for env_id, found in needs.items():
        worst = [max(column) for column in zip(*found)]
        cut = [f"{name} is {limit}, a demo needs {need}" for name, limit, need in zip(names, limits, worst) if need > limit]
        if cut:
            over = sum(any(n > limit for n, limit in zip(need, limits)) for need in found)
            lines.append(f"{env_id}: {over} of {len(found)} demonstrations do not fit the rollout limits ({'; '.join(cut)})")
    return lines
