"""Demonstrations for the supervised cold start: each env's scripted solution, played through its real tools."""
from __future__ import annotations

from jointrl.envs import registry
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
    return Conversation(messages, obs.tools, tier or env.spec.default_tier), signals


def collect_demos(env_ids: list[str], seeds: list[int]) -> list[Conversation]:
    """Demonstrations of every env for every seed, keeping only those that score full marks."""
    conversations = []
    for env_id in env_ids:
        for seed in seeds:
            conversation, signals = play_demo(env_id, seed)
            # A demo that does not solve its task would teach the wrong thing; conformance makes this rare.
            if signals.get("success") == 1.0:
                conversations.append(conversation)
    return conversations
