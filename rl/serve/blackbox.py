"""Black-box agent rollouts: an agent program plays an env through the OpenAI API; the server records its tokens.

An agent is a function `agent(client, model, env, observation, tier) -> final answer`: it gets an `openai.OpenAI`
client whose API key names the episode, the model id, the env (whose tools it runs with `env.step`), the reset
observation (messages and tools) and the thinking tier, and may manage its conversation however it likes.
`play` opens the episode's key, runs the agent, scores the env and returns the episode's segments as learner
trajectories (sessions.py says what a segment is). `openai_agent` is the plain loop most harnesses implement.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import openai

from jointrl.envs import registry
from jointrl.envs.base import Env, Observation
from jointrl.envs.episode import Episode
from jointrl.rl.serve.sessions import Sessions
from jointrl.rl.trajectory import TokenLog, Trajectory

Agent = Callable[[openai.OpenAI, str, Env, Observation, str], str]


def openai_agent(client: openai.OpenAI, model: str, env: Env, observation: Observation, tier: str,
                 max_turns: int = 8, max_tokens: int = 256) -> str:
    """Ask, run every tool call in the env, send the results back, repeat; the first turn without calls answers."""
    messages: list[dict[str, Any]] = list(observation.messages)
    for _ in range(max_turns):
        response = client.chat.completions.create(
            model=model, messages=messages, tools=observation.tools or None, max_tokens=max_tokens,
            extra_body={"thinking_budget": tier})
        message = response.choices[0].message
        calls = message.tool_calls or []
        turn: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
        reasoning = getattr(message, "reasoning_content", None)
        if reasoning is not None:
            turn["reasoning_content"] = reasoning
        if calls:
            turn["tool_calls"] = [{"id": c.id, "type": "function",
                                   "function": {"name": c.function.name, "arguments": c.function.arguments}}
                                  for c in calls]
        messages.append(turn)
        if not calls:
            return message.content or ""
        for call in turn["tool_calls"]:
            result = env.step(call)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result.content})
    return ""


def play(agent: Agent, base_url: str, model: str, sessions: Sessions, env_id: str, seed: int, tier: str,
         group_id: int = 0, timeout_s: float = 600.0) -> Trajectory:
    """One black-box episode as a trajectory: its first segment, the later ones in `segments` (a failure too)."""
    spec = registry.spec(env_id)
    episode = Episode(env_id=env_id, domain=spec.domain, family=spec.family, difficulty=spec.difficulty, seed=seed,
                      tier=tier, group_id=group_id)
    key = sessions.open()
    env = registry.make(env_id)
    started = time.monotonic()
    try:
        observation = env.reset(seed)
        episode.messages, episode.tools = list(observation.messages), observation.tools
        client = openai.OpenAI(base_url=base_url + "/v1", api_key=key, max_retries=0, timeout=timeout_s)
        answer = agent(client, model, env, observation, tier)
        env.answer(answer)
        episode.final_answer = answer
        episode.signals = env.signals()
    except Exception as err:  # the agent is someone else's program: its failure is the episode's, not the run's
        episode.failed, episode.error = True, f"agent failed: {type(err).__name__}: {err}"
    finally:
        env.close()
        log = sessions.close(key)
    episode.timings["agent"] = time.monotonic() - started
    episode.turns = log.requests
    # Nothing generated: the episode still comes back, marked by its signals or error.
    trajectories = [segment.trajectory(episode) for segment in log.segments if segment.tokens] or [
        TokenLog().trajectory(episode)]
    first, *rest = trajectories
    first.segments = rest
    return first
