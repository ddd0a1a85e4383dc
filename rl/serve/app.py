"""The HTTP face of the server: OpenAI's /v1/chat/completions (plain and streamed), /v1/models and /health.

Every error is an OpenAI-style JSON body with a 4xx status for the client's mistakes and 500 for the server's;
nothing a client sends can stop the server. A streamed choice whose client disconnects is cancelled, which
frees its engine row.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from jointrl.model.generate import SamplingParams
from jointrl.rl.serve import protocol
from jointrl.rl.serve.deltas import Delta
from jointrl.rl.serve.protocol import ApiError, ChatRequest
from jointrl.rl.serve.scheduler import Choice, Finished, Scheduler
from jointrl.rl.serve.sessions import KEY_PREFIX


@dataclass
class ServedModel:
    """What the server serves and the defaults a request falls back on."""

    name: str
    budgets: dict[str, int]  # tier -> thinking tokens
    default_tier: str = "high"
    default_max_tokens: int = 1024


def build_app(scheduler: Scheduler, served: ServedModel) -> FastAPI:
    """The FastAPI application around a started scheduler."""
    app = FastAPI(title="jointrl serve")
    created = int(time.time())

    @app.exception_handler(ApiError)
    async def api_error(_: Request, err: ApiError) -> JSONResponse:
        return JSONResponse(err.body(), status_code=err.status)

    @app.exception_handler(Exception)
    async def server_error(_: Request, err: Exception) -> JSONResponse:
        error = ApiError(f"internal error: {type(err).__name__}: {err}", status=500, kind="server_error")
        return JSONResponse(error.body(), status_code=500)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "model": served.name, **scheduler.snapshot()}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": served.name, "object": "model", "created": created,
                                            "owned_by": "jointrl"}]}

    @app.post("/v1/chat/completions")
    async def chat_completions(http: Request):
        try:
            body = await http.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ApiError(f"the request body is not valid JSON: {err}") from None
        request = protocol.parse_request(body)
        if request.model != served.name:
            raise ApiError(f"model {request.model!r} is not served here; this server serves {served.name!r}",
                           "model", code="model_not_found")
        episode = _episode(http, request, scheduler)
        choices = _choices(request, scheduler, served)
        for choice in choices:
            choice.episode = episode
        handles = scheduler.submit(choices)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        if request.stream:
            return StreamingResponse(_stream(request, handles, scheduler, completion_id, served.name),
                                     media_type="text/event-stream")
        return await _complete(request, handles, scheduler, completion_id, served.name)

    return app


def _episode(http: Request, request: ChatRequest, scheduler: Scheduler) -> str | None:
    """The black-box episode an `ep-` API key names (its requests are recorded), else None; other keys are not checked."""
    key = http.headers.get("authorization", "").removeprefix("Bearer ").strip()
    if not key.startswith(KEY_PREFIX):
        return None
    if scheduler.sessions is None or not scheduler.sessions.known(key):
        raise ApiError("the API key names no open episode on this server", status=401, kind="authentication_error",
                       code="invalid_api_key")
    # A recorded episode is one sequence of turns whose every token the learner replays.
    if request.n != 1:
        raise ApiError("n must be 1 in a recorded episode", "n")
    if protocol.stops(request):
        raise ApiError("stop is not supported in a recorded episode (a turn cut mid-row cannot be replayed)", "stop")
    return key


def _choices(request: ChatRequest, scheduler: Scheduler, served: ServedModel) -> list[Choice]:
    """The request as engine choices: rendered prompt, limits and sampling, or an ApiError."""
    tier, budget = protocol.tier_and_budget(request, served.budgets, served.default_tier)
    mode = protocol.tool_choice(request)
    tokenizer = scheduler.tokenizer
    try:
        prompt = tokenizer.render(request.messages, request.tools, tier, add_generation_prompt=True)
    except ValueError as err:
        raise ApiError(f"messages cannot be rendered: {err}", "messages") from None
    room = scheduler.max_seq_len - len(prompt)
    if room < 1:
        raise ApiError(f"the prompt is {len(prompt)} tokens; this model's context is {scheduler.max_seq_len}",
                       "messages", code="context_length_exceeded")
    wanted = request.max_completion_tokens or request.max_tokens or served.default_max_tokens
    stops = (tokenizer.eot_id, tokenizer.eos_id)
    sampling = SamplingParams(temperature=request.temperature, top_p=request.top_p, stop_ids=stops)
    return [
        Choice(messages=request.messages, tools=request.tools, tier=tier, prompt=prompt,
               max_new_tokens=min(wanted, room), think_budget=budget, sampling=sampling,
               stops=protocol.stops(request), tool_choice=mode,
               seed=None if request.seed is None else request.seed + k, reuse=request.n == 1)
        for k in range(request.n)
    ]


def _usage(done: list[Finished]) -> dict:
    prompt = done[0].prompt_tokens
    completion = sum(d.completion_tokens for d in done)
    return {
        "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": done[0].cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": sum(d.reasoning_tokens for d in done)},
    }


def _logprobs(done: Finished, scheduler: Scheduler) -> dict:
    entries = []
    for token, logprob in done.logprobs:
        text = scheduler.tokenizer.decode([token])
        entries.append({"token": text, "logprob": logprob, "bytes": list(text.encode()), "top_logprobs": []})
    return {"content": entries}


async def _next(events: asyncio.Queue) -> Delta | Finished:
    event = await events.get()
    if isinstance(event, Exception):  # the engine thread could not run this choice
        raise ApiError(str(event), status=500, kind="server_error")
    return event


async def _complete(request: ChatRequest, handles, scheduler: Scheduler, completion_id: str, model: str) -> dict:
    results: list[Finished] = []
    try:
        for _, events in handles:
            event = await _next(events)
            while not isinstance(event, Finished):
                event = await _next(events)
            results.append(event)
    finally:
        if len(results) < len(handles):  # the client went away or generation failed
            for handle, _ in handles:
                scheduler.cancel(handle)
    choices = []
    for index, done in enumerate(results):
        choice: dict[str, Any] = {"index": index, "message": done.message, "finish_reason": done.finish_reason,
                                  "logprobs": _logprobs(done, scheduler) if request.logprobs else None}
        choices.append(choice)
    return {"id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": choices, "usage": _usage(results)}


def _sse(payload: dict | str) -> str:
    return f"data: {payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)}\n\n"


async def _stream(request: ChatRequest, handles, scheduler: Scheduler, completion_id: str,
                  model: str) -> AsyncIterator[str]:
    created = int(time.time())

    def chunk(index: int, delta: dict, finish: str | None = None, **extra) -> str:
        return _sse({"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [{"index": index, "delta": delta, "finish_reason": finish, **extra}]})

    finished: dict[int, Finished] = {}
    pending: dict[asyncio.Future, int] = {}
    try:
        for index in range(len(handles)):
            yield chunk(index, {"role": "assistant", "content": ""})
        # Choices are interleaved as their tokens come: wait on all their queues at once.
        pending = {asyncio.ensure_future(_next(events)): index for index, (_, events) in enumerate(handles)}
        calls = [0] * len(handles)
        while pending:
            ready, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in ready:
                index = pending.pop(future)
                event = future.result()
                if isinstance(event, Finished):
                    finished[index] = event
                    extra = {"logprobs": _logprobs(event, scheduler)} if request.logprobs else {}
                    yield chunk(index, {}, event.finish_reason, **extra)
                    continue
                if event.reasoning:
                    yield chunk(index, {"reasoning_content": event.reasoning})
                if event.content:
                    yield chunk(index, {"content": event.content})
                if event.tool_call:
                    call = {"index": calls[index], **event.tool_call}
                    calls[index] += 1
                    yield chunk(index, {"tool_calls": [call]})
                pending[asyncio.ensure_future(_next(handles[index][1]))] = index
        if request.stream_options is not None and request.stream_options.include_usage:
            usage = _usage([finished[i] for i in range(len(handles))])
            yield _sse({"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                        "choices": [], "usage": usage})
        yield _sse("[DONE]")
    finally:
        # A client that disconnects mid-stream ends this generator early: free the rows it held.
        for future in pending:
            future.cancel()
        for index, (handle, _) in enumerate(handles):
            if index not in finished:
                scheduler.cancel(handle)
