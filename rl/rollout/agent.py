"""The agent loop: many multi-turn, tool-calling episodes played at once through one batched engine.

Per episode: render the env's prompt with the chat template → generate a turn (thinking budget of the
tier) → parse it → run its tool calls in the env (sandboxed there) → feed the tool results and the next
generation prompt → ... until a final answer, max turns, the token budget or the wall-clock limit.

The token sequence is built incrementally from exactly what was fed and sampled, never by rendering the
conversation again, so the learner sees the sampled tokens (no re-tokenisation drift). The chat format
only ever appends tokens turn after turn, which is what makes the fed continuation (tool results plus
the next generation prompt) a plain suffix of the full rendering.

The tool calls of the turns one engine step ended run in threads while the engine takes its next step (a
sandboxed command waits on its process, not on the interpreter), and are joined after that one step, in key
order: every continuation is queued at the same step whatever the threads' timing, so a run stays deterministic.
Ended episodes are scored in other threads (a test suite may take seconds) and collected when the run ends.
"""
from __future__ import annotations

import functools
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Hashable

from jointrl.envs import registry
from jointrl.envs.base import Env
from jointrl.envs.episode import Episode
from jointrl.model.chat import TOOL_CALL_ERROR_KINDS
from jointrl.model.generate import SamplingParams
from jointrl.model.tokenizer import JointTokenizer
from jointrl.rl.config.rollout import RolloutConfig
from jointrl.rl.rollout.engine import Engine, TurnRequest, TurnResult
from jointrl.rl.trajectory import TokenLog, Trajectory


# Threads for tool calls: a step rarely ends more turns than this, and a thread mostly waits on a sandbox.
TOOL_THREADS = 8
# Threads that score ended episodes: apart from the tool threads, so that a test suite scoring one episode never
# holds up the tool calls every live row waits on.
SCORE_THREADS = 4


@functools.cache
def _tool_pool() -> ThreadPoolExecutor:
    # One pool per process, shared by its loops: an evaluation builds a loop per call, and a pool each would
    # leave their idle threads behind.
    return ThreadPoolExecutor(max_workers=TOOL_THREADS, thread_name_prefix="agent-tools")


@functools.cache
def _score_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=SCORE_THREADS, thread_name_prefix="agent-scoring")


@dataclass(frozen=True)
class Task:
    """One episode to play."""

    env_id: str
    seed: int
    tier: str
    group_id: int = 0
    agent: str | None = None  # "module:function" of a black-box agent program; None = this loop plays it


@dataclass
class LoopLimits:
    """Per-episode limits of the agent loop."""

    think_budgets: dict[str, int]  # tier -> thinking tokens over the whole episode
    max_turns: int = 8
    max_new_tokens_per_turn: int = 1024
    max_new_tokens_per_episode: int = 4096
    episode_timeout_s: float = 600.0

    @classmethod
    def from_rollout(cls, rollout: RolloutConfig) -> "LoopLimits":
        """The limits a recipe's rollout section sets."""
        return cls(
            think_budgets=rollout.tiers.model_dump(), max_turns=rollout.max_turns,
            max_new_tokens_per_turn=rollout.max_new_tokens_per_turn,
            max_new_tokens_per_episode=rollout.max_new_tokens_per_episode, episode_timeout_s=rollout.episode_timeout_s,
        )


@dataclass
class _Live:
    task: Task
    env: Env
    episode: Episode
    messages: list[dict]  # the conversation as parsed, for the env-side record and the next rendering
    log: TokenLog = field(default_factory=TokenLog)  # every token fed and sampled: the trajectory
    generated: int = 0
    # When the first turn came back: an episode's time limit does not count the wait for an engine row, which in an
    # evaluation of many more episodes than rows is most of the run.
    started: float | None = None


class AgentLoop:
    """Plays tasks to completion with one engine and returns their trajectories."""

    def __init__(self, engine: Engine, tokenizer: JointTokenizer, limits: LoopLimits, sampling: SamplingParams):
        self.engine = engine
        self.tokenizer = tokenizer
        self.limits = limits
        stops = (tokenizer.eot_id, tokenizer.eos_id)
        self.sampling = SamplingParams(
            temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k, stop_ids=stops
        )
        # Partial mode (start / advance): episodes in flight between calls, and the ones that ended, not yet returned.
        self.carried: dict[Hashable, _Live] = {}
        self._ended: dict[Hashable, Trajectory] = {}

    def run(self, tasks: list[Task]) -> list[Trajectory]:
        """Play every task; a task whose env fails comes back marked failed, never lost."""
        live: dict[int, _Live] = {}
        done: dict[int, Trajectory] = {}
        for key, task in enumerate(tasks):
            state = self._start(key, task)
            if isinstance(state, Trajectory):
                done[key] = state
            else:
                live[key] = state
        running: dict[int, Future] = {}  # key -> the tool calls of its last turn, run beside this engine step
        scoring: dict[int, Future] = {}  # key -> the trajectory of an ended episode, scored beside the engine
        while self.engine.busy or running:
            results = self.engine.step() if self.engine.busy else []
            joined, running = running, {}
            for key in sorted(joined):
                self._continue(key, live[key], joined[key].result())
            for result in results:
                key = result.seq_id
                outcome = self._on_turn(key, live[key], result)
                if isinstance(outcome, Future):
                    running[key] = outcome
                    self.engine.pin(key)  # its continuation is queued after the next step: keep its cache
                elif outcome:
                    self.engine.release(key)
                    scoring[key] = _score_pool().submit(self._finish, live.pop(key))
        for key in list(live):  # cannot happen while the engine drains every submitted turn
            done[key] = self._end(key, live.pop(key), error="episode was left without a pending turn")
        done.update({key: future.result() for key, future in scoring.items()})
        return [done[key] for key in range(len(tasks))]

    def start(self, items: list[tuple[Hashable, Task]]) -> None:
        """Partial mode: begin episodes under caller-chosen unique keys; `advance` plays them alongside earlier ones."""
        for key, task in items:
            assert key not in self.carried and key not in self._ended, f"episode key {key!r} is in use"
            state = self._start(key, task)
            if isinstance(state, Trajectory):
                self._ended[key] = state
            else:
                self.carried[key] = state

    def advance(self, max_steps: int) -> dict[Hashable, Trajectory]:
        """Partial mode: step the engine until an episode ends or max_steps steps ran; the episodes that ended.

        Episodes still running stay in `carried`, their rows and caches in the engine, for the next call.
        """
        for _ in range(max_steps):
            if self._ended or not self.engine.busy:
                break
            for result in self.engine.step():
                key = result.seq_id
                outcome = self._on_turn(key, self.carried[key], result)
                if isinstance(outcome, Future):
                    # Episodes here carry over between calls with weights pushed in between: their tools finish now.
                    self._continue(key, self.carried[key], outcome.result())
                elif outcome:
                    self._ended[key] = self._end(key, self.carried.pop(key))
        if not self.engine.busy:
            for key in list(self.carried):  # cannot happen while the engine drains every submitted turn
                left = "episode was left without a pending turn"
                self._ended[key] = self._end(key, self.carried.pop(key), error=left)
        ended, self._ended = self._ended, {}
        return ended

    def _start(self, key: int, task: Task) -> _Live | Trajectory:
        spec = registry.spec(task.env_id)
        episode = Episode(
            env_id=task.env_id, domain=spec.domain, family=spec.family, difficulty=spec.difficulty,
            seed=task.seed, tier=task.tier, group_id=task.group_id,
            think_budget=self.limits.think_budgets.get(task.tier),
        )
        env = None
        try:
            env = registry.make(task.env_id)
            obs = env.reset(task.seed)
        except Exception as err:
            if env is not None:
                env.close()
            episode.failed, episode.error = True, f"reset failed: {type(err).__name__}: {err}"
            return TokenLog().trajectory(episode)
        episode.messages, episode.tools = list(obs.messages), obs.tools
        state = _Live(task=task, env=env, episode=episode, messages=list(obs.messages))
        prompt = self.tokenizer.render(state.messages, episode.tools, task.tier, add_generation_prompt=True)
        state.log.feed(prompt)
        self._submit(key, state, prompt)
        return state

    def _submit(self, key: int, state: _Live, feed: list[int]) -> None:
        remaining = self.limits.max_new_tokens_per_episode - state.generated
        budget = state.episode.think_budget
        self.engine.submit(TurnRequest(
            seq_id=key, feed=feed, max_new_tokens=min(self.limits.max_new_tokens_per_turn, remaining),
            sampling=self.sampling,
            think_budget=None if budget is None else max(0, budget - state.episode.think_tokens),
        ))

    def _on_turn(self, key: int, state: _Live, result: TurnResult) -> bool | Future:
        """Record a finished turn: True when the episode is done, else its tool calls running (they return the
        tokens to feed next; `_continue` queues them)."""
        episode = state.episode
        if state.started is None:
            state.started = time.monotonic()
        state.log.sampled(result)
        state.generated += len(result.tokens)
        episode.turns += 1
        episode.think_tokens += result.think_tokens
        episode.answer_tokens += len(result.tokens) - result.think_tokens

        message = self.tokenizer.parse_assistant(result.tokens)
        state.messages.append(message)
        if result.finish_reason != "stop":
            episode.truncated = True
            return True
        malformed = [e for e in message.get("parse_errors", []) if e["kind"] in TOOL_CALL_ERROR_KINDS]
        if not message.get("tool_calls") and not malformed:
            state.env.answer(message.get("content") or "")
            episode.final_answer = message.get("content") or ""
            return True
        if episode.turns >= self.limits.max_turns or state.generated >= self.limits.max_new_tokens_per_episode:
            episode.truncated = True
            return True
        if time.monotonic() - state.started > self.limits.episode_timeout_s:
            episode.failed, episode.error = True, f"episode exceeded {self.limits.episode_timeout_s:g}s"
            return True

        return _tool_pool().submit(self._tool_feed, state, message, malformed)

    def _tool_feed(self, state: _Live, message: dict, malformed: list[dict]) -> list[int]:
        """Run a turn's tool calls (in a tool thread); the tokens of their results and the next generation prompt."""
        episode = state.episode
        tool_messages = self._run_tools(state, message, malformed)
        before = self.tokenizer.render(state.messages, episode.tools, episode.tier)
        state.messages += tool_messages
        after = self.tokenizer.render(state.messages, episode.tools, episode.tier, add_generation_prompt=True)
        return after[len(before):]

    def _continue(self, key: Hashable, state: _Live, feed: list[int]) -> None:
        state.log.feed(feed)
        self._submit(key, state, feed)

    def _run_tools(self, state: _Live, message: dict, malformed: list[dict]) -> list[dict]:
        """Tool results in the order the calls were written; a malformed call gets its error in its place."""
        started = time.monotonic()
        calls = {int(c["id"].removeprefix("call_")): c for c in message.get("tool_calls", [])}
        errors = {e["call_index"]: e for e in malformed}
        results = []
        for index in sorted(set(calls) | set(errors)):
            if index in calls:
                outcome = state.env.step(calls[index])
                call_id = calls[index]["id"]
            else:
                outcome = state.env.reject_call(f"{errors[index]['kind']}: {errors[index]['detail']}")
                call_id = f"call_{index}"
            results.append({"role": "tool", "tool_call_id": call_id, "content": outcome.content})
        timings = state.episode.timings
        timings["tools"] = timings.get("tools", 0.0) + time.monotonic() - started
        return results

    def _end(self, key: Hashable, state: _Live, error: str | None = None) -> Trajectory:
        self.engine.release(key)
        return self._finish(state, error)

    def _finish(self, state: _Live, error: str | None = None) -> Trajectory:
        """Score the episode and close its env (in a scoring thread when `run` ends it: its row is free already)."""
        episode = state.episode
        episode.messages = state.messages
        if error is not None:
            episode.failed, episode.error = True, error
        try:
            started = time.monotonic()
            episode.signals = state.env.signals()
            episode.timings["verify"] = time.monotonic() - started
        except Exception as err:
            episode.failed, episode.error = True, f"signals failed: {type(err).__name__}: {err}"
        finally:
            state.env.close()
        return state.log.trajectory(episode)
