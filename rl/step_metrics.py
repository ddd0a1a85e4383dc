"""What one RL step reports beyond rewards, advantages and the learner: episodes, staleness, failures.

Names follow the tracker's grouping: `pass_rate/<domain>`, `reward/mean`, `episode/...`, `staleness/...`.
Advantage and filter metrics (`filter/...`, `advantage/...`) come from jointrl.rl.algorithms.step, reward
metrics (`reward/...`, `tier/...`) from the reward mixer and learner metrics (`loss/...`, `policy/...`,
`mismatch/...`, `learner/...`) from the learner.

`episode_rows` turns a step's trajectories into the rows of its rollouts shard (text level, one per episode);
`pick_samples` chooses the few of them shown as sample completions.
"""
from __future__ import annotations

import json
from collections import defaultdict

import torch

from jointrl.rewards.mixer import MixedBatch
from jointrl.rl.evaluate import passed
from jointrl.rl.trajectory import Trajectory


def reward_summary(mixed: MixedBatch) -> dict[str, float]:
    """The mean raw (unnormalised) reward over the episodes that have one."""
    raw = [r for r in mixed.raw if r is not None]
    return {"reward/mean": sum(raw) / len(raw)} if raw else {}


def episode_metrics(trajectories: list[Trajectory]) -> dict[str, float]:
    """Success per domain, turns, truncation, failures, tool errors and lengths of a batch."""
    success: dict[str, list[float]] = defaultdict(list)
    for t in trajectories:
        value = float(passed(t.episode))
        success[t.episode.domain].append(value)
        success["all"].append(value)
    n = max(len(trajectories), 1)
    metrics = {f"pass_rate/{domain}": sum(v) / len(v) for domain, v in success.items()}
    metrics |= {
        "episode/turns": sum(t.episode.turns for t in trajectories) / n,
        "episode/truncated": sum(t.episode.truncated for t in trajectories) / n,
        "episode/failed": sum(t.episode.failed for t in trajectories) / n,
        "episode/tool_errors": sum(t.episode.signals.get("tool_errors", 0.0) for t in trajectories) / n,
        "episode/tokens": sum(len(t.tokens) for t in trajectories) / n,
        "episode/sampled_tokens": sum(float(t.loss_mask.sum()) for t in trajectories) / n,
    }
    return metrics


def staleness_metrics(trajectories: list[Trajectory], learner_version: int) -> dict[str, float]:
    """How many versions behind the learner the sampled tokens of a batch were (0 in synchronous mode)."""
    lags = [learner_version - t.policy_version[t.loss_mask > 0] for t in trajectories if t.loss_mask.sum() > 0]
    if not lags:
        return {}
    lag = torch.cat(lags).float()
    return {"staleness/mean": float(lag.mean()), "staleness/max": float(lag.max())}


def failed_episodes(trajectories: list[Trajectory]) -> list[str]:
    """One line per failed episode (env id, seed, error), for the console."""
    return [f"{t.episode.env_id} seed {t.episode.seed}: {t.episode.error}" for t in trajectories if t.episode.failed]


# The chat-format keys a rollouts row keeps as columns; any other key of a message goes to its `extra` JSON.
MESSAGE_KEYS = ("role", "content", "reasoning_content", "tool_calls", "tool_call_id")


def _call_row(call: dict) -> dict:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    # The format's arguments are JSON text; a parser that kept them as an object still gets one column type.
    if arguments is not None and not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return {"id": call.get("id"), "type": call.get("type"), "function": {"name": function.get("name"), "arguments": arguments}}


def _message_row(message: dict) -> dict:
    extra = {k: v for k, v in message.items() if k not in MESSAGE_KEYS}
    return {
        "role": message.get("role"), "content": message.get("content"), "reasoning_content": message.get("reasoning_content"),
        "tool_calls": [_call_row(c) for c in message.get("tool_calls") or []] or None,
        "tool_call_id": message.get("tool_call_id"), "extra": json.dumps(extra) if extra else None,
    }


def _pairs(mapping: dict[str, float]) -> list[dict]:
    return [{"name": k, "value": float(v)} for k, v in sorted(mapping.items())]


def episode_rows(step: int, trajectories: list[Trajectory], raw_rewards: list[float | None]) -> list[dict]:
    """One row per episode of an RL step: task, messages, rewards and components, signals, tokens, versions."""
    rows = []
    for t, raw in zip(trajectories, raw_rewards, strict=True):
        e = t.episode
        sampled = t.policy_version[t.loss_mask > 0]
        rows.append({
            "step": step, "env_id": e.env_id, "domain": e.domain, "family": e.family, "difficulty": e.difficulty,
            "seed": e.seed, "tier": e.tier, "group_id": e.group_id,
            "messages": [_message_row(m) for m in e.messages], "tools": json.dumps(e.tools),
            "final_answer": e.final_answer, "reward": t.reward, "reward_raw": raw,
            "reward_components": _pairs(t.rewards), "signals": _pairs(e.signals), "passed": passed(e),
            "think_tokens": e.think_tokens, "answer_tokens": e.answer_tokens, "think_budget": e.think_budget,
            "tokens": len(t.tokens), "sampled_tokens": int(sampled.numel()),
            "policy_version_min": int(sampled.min()) if sampled.numel() else None,
            "policy_version_max": int(sampled.max()) if sampled.numel() else None,
            "turns": e.turns, "truncated": e.truncated, "failed": e.failed, "error": e.error,
        })
    return rows


def pick_samples(rows: list[dict], per_domain: int) -> list[tuple[str, dict]]:
    """("best" | "worst", row) for the per_domain highest- and lowest-reward scored episodes of each domain."""
    by_domain: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        if row["reward_raw"] is not None:
            by_domain[row["domain"]].append(row)
    picked = []
    for domain in sorted(by_domain):
        ranked = sorted(by_domain[domain], key=lambda r: r["reward_raw"], reverse=True)
        best = ranked[:per_domain]
        # The worst never repeat a best one when a domain has fewer than 2 * per_domain episodes.
        worst = ranked[max(per_domain, len(ranked) - per_domain):][::-1]
        picked += [("best", r) for r in best] + [("worst", r) for r in worst]
    return picked
