"""One engine shared by every request: a thread that owns it, admits choices, streams their tokens, reuses caches.

Requests arrive on the web server's event loop; the engine lives on its own thread, which is the only one that
touches it (the engine is not thread-safe). The loop sends commands (submit a choice, cancel one) through a
queue; the engine thread answers each choice with events on that choice's asyncio queue: a `Delta` per token
and a final `Finished`.

Prefix reuse: a choice that ended with its end-of-turn token stays parked in its engine row with the
conversation it completed (the request's messages plus the assistant message it returned). A later request
whose messages start with that conversation (tool-call ids aside) and add more continues in the same row: only
the new messages and the generation prompt are fed, the rest is already in the cache. The format only ever
appends tokens, so the new part is the full rendering minus the rendering of the shared messages. A parked
row the engine evicts for a new sequence is forgotten.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import queue
import threading
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from jointrl.model.generate import SamplingParams
from jointrl.model.tokenizer import JointTokenizer
from jointrl.model.transformer import Transformer
from jointrl.rl.rollout.engine import Engine, TurnRequest, TurnResult
from jointrl.rl.serve.deltas import Delta, TurnText
from jointrl.rl.serve.sessions import Sessions
from jointrl.rl.trajectory import TokenLog


@dataclass
class Choice:
    """One sequence to generate for a request (a request with n > 1 has n of them)."""

    messages: list[dict]
    tools: list[dict] | None
    tier: str
    prompt: list[int]  # the full rendering with the generation prompt
    max_new_tokens: int
    think_budget: int
    sampling: SamplingParams
    stops: list[str]
    tool_choice: str  # "auto" | "none" | "required" | "function:<name>" (protocol.tool_choice)
    seed: int | None = None
    reuse: bool = True  # may continue a parked conversation
    episode: str | None = None  # the black-box episode (API key) whose tokens are recorded


@dataclass
class Finished:
    """The end of one choice: its parsed message and counts."""

    message: dict  # role, content, reasoning_content?, tool_calls? (ids unique across turns)
    finish_reason: str  # "stop" | "tool_calls" | "length"
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    logprobs: list[tuple[int, float]]  # (token, log-prob) of every generated token


@dataclass
class _Job:
    handle: int  # what the web side knows the choice by
    key: int  # the engine sequence it runs in (a parked one's when it continues a conversation)
    choice: Choice
    events: asyncio.Queue
    loop: asyncio.AbstractEventLoop
    text: TurnText
    prompt_tokens: int = 0
    cached_tokens: int = 0
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    done: bool = False
    segment: TokenLog | None = None  # where a recorded episode's tokens go


@dataclass
class _Parked:
    tools: list[dict] | None
    tier: str
    messages: list[dict]  # the conversation its cache holds, the returned assistant message last
    length: int  # tokens of that conversation the row has seen or holds unfed
    missing: int  # rendered tokens at the end the row never saw: the <|eot|> of a turn cut at max_tokens
    episode: str | None = None
    segment: TokenLog | None = None


def _same_message(a: dict, b: dict) -> bool:
    """Equal as the model saw them: tool-call ids are not rendered, so they do not count."""
    def seen(m: dict) -> tuple:
        calls = tuple((c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or [])
        return m["role"], m.get("content") or "", m.get("reasoning_content"), calls
    return seen(a) == seen(b)


class Scheduler:
    """The engine thread and the bookkeeping of every live and parked choice."""

    def __init__(self, model: Transformer, tokenizer: JointTokenizer, max_rows: int = 16, prefix_reuse: bool = True,
                 sessions: Sessions | None = None, engine: Engine | None = None,
                 episode_sampling: SamplingParams | None = None, episode_max_tokens: int | None = None):
        self.tokenizer = tokenizer
        self.prefix_reuse = prefix_reuse  # off: every request prefills its whole prompt (a baseline to measure against)
        self.sessions = sessions  # black-box episodes; their rows record routing for the learner's replay
        # A run's rollouts sample as the recipe says, whatever temperature the agent program asks for.
        self.episode_sampling = episode_sampling
        self.episode_max_tokens = episode_max_tokens  # and generate no more per turn than the recipe allows
        self.max_seq_len = model.cfg.max_seq_len
        if engine is None:
            engine = Engine(model, tokenizer.think_start_id, tokenizer.think_end_id, max_rows=max_rows,
                            pad_id=tokenizer.pad_id, record_routing=sessions is not None)
        # A rollout worker lends its engine (weights, version, routing records) for a black-box phase.
        self.engine = engine
        self.engine.on_token = self._on_token
        self._commands: queue.Queue = queue.Queue()
        self._jobs: dict[int, _Job] = {}
        self._parked: dict[int, _Parked] = {}
        self._stopped: list[int] = []
        self._texts: list[str | None] | None = None  # each id's text, for named tool_choice
        self._keys = itertools.count()
        self._thread = threading.Thread(target=self._serve, name="engine", daemon=True)
        self._running = False
        self.stats = {"requests": 0, "choices": 0, "cancelled": 0, "reused": 0}

    # The web server's side.

    def start(self) -> None:
        """Start the engine thread."""
        self._running = True
        self._thread.start()

    def stop(self) -> None:
        """Stop the engine thread after its current step and give the engine back (parked rows released)."""
        self._running = False
        self._commands.put(("wake", None))
        self._thread.join(timeout=30)
        for key in list(self._parked) + list(self._jobs):
            self.engine.release(key)
        self._parked.clear()
        self._jobs.clear()
        self.engine.on_token = None

    def submit(self, choices: list[Choice]) -> list[tuple[int, asyncio.Queue]]:
        """Queue choices from the event loop; each gets a handle (to cancel it) and the queue its events arrive on."""
        loop = asyncio.get_running_loop()
        handles = []
        for choice in choices:
            events: asyncio.Queue = asyncio.Queue()
            handle = next(self._keys)
            job = _Job(handle, handle, choice, events, loop, TurnText(self.tokenizer, choice.stops))
            self._commands.put(("submit", job))
            handles.append((handle, events))
        self.stats["requests"] += 1
        return handles

    def cancel(self, handle: int) -> None:
        """Stop a choice (its client went away) and free its row; a finished choice is left alone."""
        self._commands.put(("cancel", handle))

    def snapshot(self) -> dict[str, Any]:
        """Counts for /health: rows in use, live and parked choices."""
        rows = sum(r is not None for r in self.engine.rows)
        return {"rows": self.engine.max_rows, "rows_in_use": rows, "live": len(self._jobs),
                "parked": len(self._parked), **self.stats}

    # The engine thread.

    def _serve(self) -> None:
        while self._running:
            block = not self.engine.busy
            try:
                command = self._commands.get(block=block, timeout=0.5 if block else None)
            except queue.Empty:
                command = None
            while command is not None:
                try:
                    self._apply(*command)
                except Exception as err:  # one bad choice fails alone; the engine thread must live on
                    self._reject(command, f"could not start: {type(err).__name__}: {err}")
                try:
                    command = self._commands.get_nowait()
                except queue.Empty:
                    command = None
            if self.engine.busy:
                try:
                    results = self.engine.step()
                except Exception as err:  # a failed forward fails its choices, never the server
                    self._fail_all(f"generation failed: {type(err).__name__}: {err}")
                    continue
                for result in results:
                    self._finish(self._jobs[result.seq_id], result)
                for key in self._stopped:
                    if key in self._jobs:
                        self._finish(self._jobs[key], None)
                self._stopped.clear()
            self._forget_evicted()

    def _apply(self, kind: str, payload: Any) -> None:
        if kind == "submit":
            self._admit(payload)
        elif kind == "cancel":
            job = next((j for j in self._jobs.values() if j.handle == payload), None)
            if job is not None:
                del self._jobs[job.key]
                job.done = True
                self.engine.release(job.key)
                self.stats["cancelled"] += 1

    def _admit(self, job: _Job) -> None:
        choice = job.choice
        feed, key = choice.prompt, job.key
        parked_key = self._reusable(choice) if choice.reuse else None
        if parked_key is not None:
            parked = self._parked.pop(parked_key)
            shared = self.tokenizer.render(choice.messages[:len(parked.messages)], choice.tools, choice.tier)
            feed = choice.prompt[len(shared) - parked.missing:]
            job.segment = parked.segment
            key = job.key = parked_key
            job.prompt_tokens = parked.length + len(feed)
            # The row's last sampled token is fed again with the new tokens; the rest is cached.
            job.cached_tokens = parked.length - 1
            self.stats["reused"] += 1
            if job.prompt_tokens + choice.max_new_tokens > self.max_seq_len:
                choice.max_new_tokens = max(1, self.max_seq_len - job.prompt_tokens)
        else:
            job.prompt_tokens = len(feed)
            if choice.episode is not None:
                # A request that does not extend what a row of its episode holds starts a new segment.
                job.segment = TokenLog()
                self.sessions.log(choice.episode).segments.append(job.segment)
        if job.segment is not None:
            job.segment.feed(feed)
            self.sessions.log(choice.episode).requests += 1
        self._jobs[key] = job
        self.stats["choices"] += 1
        generator = None if choice.seed is None else torch.Generator().manual_seed(choice.seed)
        if choice.episode is not None and self.episode_sampling is not None:
            choice.sampling = replace(self.episode_sampling, stop_ids=choice.sampling.stop_ids)
        if choice.episode is not None and self.episode_max_tokens is not None:
            choice.max_new_tokens = min(choice.max_new_tokens, self.episode_max_tokens)
        self.engine.submit(TurnRequest(
            seq_id=key, feed=feed, max_new_tokens=choice.max_new_tokens, sampling=choice.sampling,
            think_budget=choice.think_budget, generator=generator, banned=self._banned(choice.tool_choice),
        ))

    def _reusable(self, choice: Choice) -> int | None:
        """The parked conversation, still in its row, that this request's messages extend (the longest)."""
        best, best_len = None, 0
        for key, parked in self._parked.items():
            n = len(parked.messages)
            if (parked.tools == choice.tools and parked.tier == choice.tier and parked.episode == choice.episode
                    and len(choice.messages) > n > best_len
                    and all(_same_message(a, b) for a, b in zip(parked.messages, choice.messages))
                    and self.engine.resident(key)):
                best, best_len = key, n
        return best

    def _banned(self, mode: str):
        call, eot, eos = self.tokenizer.tool_call_start_id, self.tokenizer.eot_id, self.tokenizer.eos_id
        close = self.tokenizer.tool_call_end_id
        if mode == "none":
            return lambda tokens: [call]
        if mode == "required":
            # The turn may not end before one call has closed.
            return lambda tokens: [] if close in tokens else [eot, eos]
        if mode.startswith("function:"):
            return self._named_call(mode.removeprefix("function:"))
        return None

    def _named_call(self, name: str):
        """Bans that make the turn's first call this function: the call's text must begin with its name."""
        call, close = self.tokenizer.tool_call_start_id, self.tokenizer.tool_call_end_id
        stops = [self.tokenizer.eot_id, self.tokenizer.eos_id]
        head = '{"name": ' + json.dumps(name) + ', "arguments": '
        if self._texts is None:
            self._texts = [self.tokenizer.decode([i]) if not self.tokenizer.is_special(i) else None
                           for i in range(self.tokenizer.vocab_size)]
        texts = self._texts

        def banned(tokens: list[int]) -> list[int]:
            if call not in tokens:
                return stops  # the turn may not end before the call
            opened = tokens.index(call)
            if close in tokens[opened:]:
                return []
            body = self.tokenizer.decode(tokens[opened + 1:])
            if len(body) >= len(head):
                return stops  # the name is written; the arguments are the model's
            # Only text that keeps the body on the way to the head, or past it.
            return [i for i, text in enumerate(texts)
                    if text is None or not (head.startswith(body + text) or (body + text).startswith(head))]
        return banned

    def _on_token(self, key: int, token: int, logprob: float) -> None:
        job = self._jobs.get(key)
        if job is None or job.done:
            return
        job.tokens.append(token)
        job.logprobs.append(logprob)
        delta = job.text.push(token)
        if delta:
            job.loop.call_soon_threadsafe(job.events.put_nowait, delta)
        if job.text.stopped:
            self._stopped.append(key)

    def _finish(self, job: _Job, result: TurnResult | None) -> None:
        if job.done:
            return
        job.done = True
        del self._jobs[job.key]
        tail = job.text.finish()
        if tail:
            job.loop.call_soon_threadsafe(job.events.put_nowait, tail)
        message = self._message(job)
        if job.segment is not None and result is not None:
            job.segment.sampled(result)
        if result is None or job.text.stopped:
            reason = "stop"
        elif result.finish_reason == "stop":
            reason = "tool_calls" if message.get("tool_calls") else "stop"
        else:
            reason = "length"
        # A continuation may pick up the row only where it holds what rendering the returned message gives, up to
        # the <|eot|> a turn cut at max_tokens lacks: not after a stop string (the row is mid-turn), nor after
        # text the message leaves out (stray text, a malformed call).
        missing = None if result is None or job.text.stopped else self._unseen_tail(job, message)
        if missing is not None and self.prefix_reuse:
            self._parked[job.key] = _Parked(job.choice.tools, job.choice.tier, job.choice.messages + [message],
                                            job.prompt_tokens + len(job.tokens), missing, job.choice.episode,
                                            job.segment)
        else:
            self.engine.release(job.key)
        finished = Finished(
            message=message, finish_reason=reason, prompt_tokens=job.prompt_tokens, cached_tokens=job.cached_tokens,
            completion_tokens=len(job.tokens), reasoning_tokens=job.text.reasoning_tokens,
            logprobs=list(zip(job.tokens, job.logprobs)),
        )
        job.loop.call_soon_threadsafe(job.events.put_nowait, finished)

    def _unseen_tail(self, job: _Job, message: dict) -> int | None:
        """How many tokens the message's rendering has beyond the sampled ones (0, or 1 for a missing <|eot|>);
        None when the rendering differs from what was sampled."""
        ids, mask = self.tokenizer.render_with_mask([message], None, job.choice.tier)
        rendered = [i for i, m in zip(ids, mask) if m]
        if rendered == job.tokens:
            return 0
        if rendered == job.tokens + [self.tokenizer.eot_id]:
            return 1
        return None

    def _message(self, job: _Job) -> dict:
        """The assistant message the client gets: exactly what the stream showed."""
        text = job.text
        message: dict[str, Any] = {"role": "assistant", "content": text.content}
        if text.reasoning is not None:
            message["reasoning_content"] = text.reasoning
        if text.tool_calls:
            message["tool_calls"] = [dict(call, function=dict(call["function"])) for call in text.tool_calls]
        return message

    def _reject(self, command: tuple, error: str) -> None:
        kind, job = command
        if kind == "submit":
            self._jobs.pop(job.key, None)
            self.engine.release(job.key)
            job.done = True
            job.loop.call_soon_threadsafe(job.events.put_nowait, RuntimeError(error))

    def _fail_all(self, error: str) -> None:
        for job in list(self._jobs.values()):
            job.done = True
            self.engine.release(job.key)
            job.loop.call_soon_threadsafe(job.events.put_nowait, RuntimeError(error))
        self._jobs.clear()

    def _forget_evicted(self) -> None:
        for key in [k for k in self._parked if not self.engine.resident(k)]:
            del self._parked[key]
            self.engine.release(key)  # drops the evicted history the engine keeps for a continuation


__all__ = ["Choice", "Delta", "Finished", "Scheduler"]
