"""`jointrl serve` through the official openai client against a live server on 127.0.0.1.

The reference for every generated answer is independent of the server: the same model decoding greedily
with jointrl.model.generate on the conversation rendered by the tokenizer, parsed by the tokenizer.
"""
import concurrent.futures
import random
import json
import time

import httpx
import openai
import pytest

from jointrl.model.generate import SamplingParams, generate
from jointrl.rl.serve.app import ServedModel, build_app
from jointrl.rl.serve.background import BackgroundServer
from jointrl.rl.serve.scheduler import Scheduler
from tests.rl.agent_envs import WORDS, Lookup

NAME = "lookup-debug"
BUDGETS = {"low": 64, "high": 128, "max": 256}


@pytest.fixture(scope="module")
def server(fitted_lookup_policy):
    """(base url, scheduler, model, tokenizer) of a live server on a free local port."""
    model, tokenizer = fitted_lookup_policy
    scheduler = Scheduler(model, tokenizer, max_rows=8)
    scheduler.start()
    app = build_app(scheduler, ServedModel(NAME, BUDGETS, default_tier="low", default_max_tokens=48))
    with BackgroundServer(app) as web:
        yield web.url, scheduler, model, tokenizer
    scheduler.stop()


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="unused", max_retries=0, timeout=60)


def _task(seed: int) -> tuple[list[dict], list[dict]]:
    obs = Lookup().reset(seed)
    return obs.messages, obs.tools


def _reference(server, messages, tools, tier="low", max_new_tokens=48) -> tuple[dict, int, int]:
    """(parsed message, prompt tokens, completion tokens) of greedy decoding outside the server."""
    _, _, model, tokenizer = server
    prompt = tokenizer.render(messages, tools, tier, add_generation_prompt=True)
    out = generate(model, [prompt], SamplingParams(temperature=0, stop_ids=(tokenizer.eot_id, tokenizer.eos_id)),
                   max_new_tokens=[max_new_tokens], pad_id=tokenizer.pad_id)[0]
    return tokenizer.parse_assistant(out.tokens), len(prompt), len(out.tokens)


def _calls(message) -> list[tuple[str, dict]]:
    return [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]


def _reference_calls(message: dict) -> list[tuple[str, dict]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls", [])]


def _health(server) -> dict:
    return httpx.get(server[0] + "/health").json()


def test_models_and_health(server, client):
    assert [m.id for m in client.models.list().data] == [NAME]
    health = _health(server)
    assert health["status"] == "ok" and health["rows"] == 8


def test_a_tool_calling_conversation_matches_greedy_decoding_and_reuses_the_cache(server, client):
    messages, tools = _task(1)
    first = client.chat.completions.create(model=NAME, messages=messages, tools=tools, temperature=0,
                                           extra_body={"thinking_budget": "low"})
    expected, prompt_len, completion_len = _reference(server, messages, tools)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert _calls(choice.message) == _reference_calls(expected)
    assert [name for name, _ in _calls(choice.message)] == ["length"]
    assert choice.message.reasoning_content == expected["reasoning_content"]
    assert first.usage.prompt_tokens == prompt_len and first.usage.completion_tokens == completion_len
    assert first.usage.prompt_tokens_details.cached_tokens == 0

    # The client sends the conversation back with the tool's result, as any agent would.
    call = choice.message.tool_calls[0]
    assistant = {"role": "assistant", "content": choice.message.content,
                 "reasoning_content": choice.message.reasoning_content,
                 "tool_calls": [{"id": call.id, "type": "function",
                                 "function": {"name": call.function.name, "arguments": call.function.arguments}}]}
    answer = str(len(json.loads(call.function.arguments)["word"]))
    messages = messages + [assistant, {"role": "tool", "tool_call_id": call.id, "content": answer}]
    second = client.chat.completions.create(model=NAME, messages=messages, tools=tools, temperature=0,
                                            extra_body={"thinking_budget": "low"})
    expected, prompt_len, _ = _reference(server, messages, tools)
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == expected["content"]
    assert second.usage.prompt_tokens == prompt_len
    # Everything before the tool result was already in the row: the first turn's prompt and its answer.
    assert second.usage.prompt_tokens_details.cached_tokens == first.usage.prompt_tokens + first.usage.completion_tokens - 1


def test_streaming_sends_what_the_plain_response_holds(server, client):
    messages, tools = _task(2)
    plain = client.chat.completions.create(model=NAME, messages=messages, tools=tools, temperature=0).choices[0]
    stream = client.chat.completions.create(model=NAME, messages=messages, tools=tools, temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    reasoning, content, calls, finish, usage = "", "", {}, None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            delta = c.delta
            reasoning += getattr(delta, "reasoning_content", None) or ""
            content += delta.content or ""
            for call in delta.tool_calls or []:
                calls.setdefault(call.index, [call.function.name, ""])[1] += call.function.arguments or ""
            finish = c.finish_reason or finish
    assert reasoning == plain.message.reasoning_content and content == (plain.message.content or "")
    assert [(n, json.loads(a)) for n, a in calls.values()] == _calls(plain.message)
    assert finish == plain.finish_reason == "tool_calls"
    assert usage is not None and usage.completion_tokens > 0


@pytest.mark.parametrize("budget", [0, 2, "low", "high", "max"])
def test_thinking_budget_bounds_the_reasoning_tokens(server, client, budget):
    messages, tools = _task(3)
    response = client.chat.completions.create(model=NAME, messages=messages, tools=tools, temperature=1.0, seed=5,
                                              max_tokens=40, extra_body={"thinking_budget": budget})
    limit = budget if isinstance(budget, int) else BUDGETS[budget]
    assert response.usage.completion_tokens_details.reasoning_tokens <= limit
    if budget == 0:
        # The engine closes the think block at once: an empty reasoning, then the answer or call.
        assert response.choices[0].message.reasoning_content == ""


def test_several_choices_with_a_seed_repeat_and_differ_from_each_other(server, client):
    messages, tools = _task(0)
    ask = dict(model=NAME, messages=messages, tools=tools, temperature=1.5, n=3, seed=11, max_tokens=24,
               logprobs=True)
    first, again = client.chat.completions.create(**ask), client.chat.completions.create(**ask)
    tokens = [[t.token for t in c.logprobs.content] for c in first.choices]
    assert [[t.token for t in c.logprobs.content] for c in again.choices] == tokens
    assert len({tuple(t) for t in tokens}) > 1
    assert first.usage.completion_tokens == sum(len(t) for t in tokens)
    assert all(t.logprob <= 0 for c in first.choices for t in c.logprobs.content)


def test_tool_choice_none_required_and_a_named_function(server, client):
    messages, tools = _task(1)
    none = client.chat.completions.create(model=NAME, messages=messages, tools=tools, temperature=0, max_tokens=16,
                                          tool_choice="none").choices[0]
    assert not none.message.tool_calls and none.finish_reason in ("stop", "length")
    # The policy calls `length`; naming another tool makes the call that one, with whatever arguments follow.
    other = {"type": "function", "function": {"name": "count_vowels", "description": "vowels in a word",
                                              "parameters": {"type": "object", "properties": {}}}}
    named = client.chat.completions.create(
        model=NAME, messages=messages, tools=tools + [other], temperature=0, max_tokens=48,
        tool_choice={"type": "function", "function": {"name": "count_vowels"}}).choices[0]
    assert named.message.tool_calls and named.message.tool_calls[0].function.name == "count_vowels"
    free = client.chat.completions.create(model=NAME, messages=messages, tools=tools + [other], temperature=0,
                                          max_tokens=48).choices[0]
    assert free.message.tool_calls[0].function.name == "length"


def test_stop_strings_end_the_content_before_them(server, client):
    messages, tools = _task(1)
    messages = messages + [
        {"role": "assistant", "content": "", "reasoning_content": "Ask the tool.",
         "tool_calls": [{"id": "a", "type": "function", "function": {"name": "length", "arguments": "{\"word\": \"banana\"}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "6"},
    ]
    full = client.chat.completions.create(model=NAME, messages=messages, tools=tools, temperature=0).choices[0]
    assert full.message.content == "6"
    cut = client.chat.completions.create(model=NAME, messages=messages, tools=tools, temperature=0, stop=["6"]).choices[0]
    assert cut.message.content == "" and cut.finish_reason == "stop"


@pytest.mark.parametrize("change, expected", [
    ({"model": "other"}, "not served here"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "role"),
    ({"messages": [{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": "", "tool_calls": [
                       {"id": "x", "type": "function", "function": {"name": "length", "arguments": "{}"}}]},
                   {"role": "user", "content": "and?"}]}, "no tool result"),
    ({"extra_body": {"thinking_budget": "huge"}}, "thinking_budget"),
    ({"extra_body": {"thinking_budget": -1}}, "thinking_budget"),
    ({"messages": [{"role": "user", "content": "word " * 5000}]}, "context"),
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"extra_body": {"best_of": 2}}, "best_of"),
])
def test_bad_requests_get_a_400_naming_the_problem(server, client, change, expected):
    ask = {"model": NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, **change}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**ask)
    assert expected in caught.value.body["message"]
    assert _health(server)["status"] == "ok"


def test_a_body_that_is_not_json_gets_a_400(server):
    response = httpx.post(server[0] + "/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]["message"]


def test_a_stream_closed_early_frees_its_row(server, client):
    messages, tools = _task(2)
    before = _health(server)["cancelled"]
    stream = client.chat.completions.create(model=NAME, messages=messages, tools=tools, temperature=2.0, seed=3,
                                            max_tokens=2000, tool_choice="required", stream=True,
                                            extra_body={"thinking_budget": "max"})
    for k, _ in enumerate(stream):
        if k == 2:
            break
    stream.close()
    deadline = time.monotonic() + 30
    while (health := _health(server))["live"]:
        assert time.monotonic() < deadline, health
        time.sleep(0.05)
    assert health["cancelled"] == before + 1
    assert health["rows_in_use"] == health["parked"]


def test_64_concurrent_clients_each_get_their_own_answer(server):
    """No response lost, duplicated or mixed with another's: each equals its own greedy reference."""
    asks = []
    for k in range(64):
        messages, tools = _task(k % len(WORDS))
        # Distinct conversations: the system line names the client.
        messages = [{"role": "system", "content": f"Use the tool. Client {k}."}] + messages[1:]
        asks.append((messages, tools))
    expected = {json.dumps(messages): _reference(server, messages, tools)[0] for messages, tools in asks}

    def ask(item):
        messages, tools = item
        client = openai.OpenAI(base_url=server[0] + "/v1", api_key="unused", max_retries=0, timeout=120)
        response = client.chat.completions.create(model=NAME, messages=messages, tools=tools, temperature=0)
        return messages, response

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
        results = list(pool.map(ask, asks))
    assert time.monotonic() - started < 240
    assert len(results) == 64 and len({r.id for _, r in results}) == 64
    for messages, response in results:
        reference = expected[json.dumps(messages)]
        message = response.choices[0].message
        assert _calls(message) == _reference_calls(reference)
        assert (message.content or "") == reference["content"]
        assert message.reasoning_content == reference.get("reasoning_content")
    # The clients differ: had answers been swapped between them, the words they ask about would not match.
    assert sum(bool(_calls(r.choices[0].message)) for _, r in results) >= 48


def test_a_turn_cut_just_before_its_end_token_is_still_continued_from_its_row(server, client):
    messages, tools = _task(3)
    _, prompt_len, completion_len = _reference(server, messages, tools)
    # One token short: the call is complete, the <|eot|> after it was never sampled.
    cut = client.chat.completions.create(model=NAME, messages=messages, tools=tools, temperature=0,
                                         max_tokens=completion_len - 1)
    choice = cut.choices[0]
    assert choice.finish_reason == "length" and choice.message.tool_calls
    call = choice.message.tool_calls[0]
    messages = messages + [
        {"role": "assistant", "content": choice.message.content, "reasoning_content": choice.message.reasoning_content,
         "tool_calls": [{"id": call.id, "type": "function",
                         "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "5"},
    ]
    second = client.chat.completions.create(model=NAME, messages=messages, tools=tools, temperature=0)
    expected, full_len, _ = _reference(server, messages, tools)
    assert second.choices[0].message.content == expected["content"]
    assert second.usage.prompt_tokens == full_len
    assert second.usage.prompt_tokens_details.cached_tokens == prompt_len + completion_len - 2


def test_random_bodies_get_answers_or_client_errors_never_a_crash(server):
    """Mangled requests (wrong types, missing fields, odd values) are answered with a 4xx; the server stays up."""
    rng = random.Random(0)
    messages, tools = _task(0)
    base = {"model": NAME, "messages": messages, "tools": tools, "max_tokens": 4}
    odd = [None, 0, -1, 1e9, "", "x" * 50, [], {}, [1, 2], {"role": "user"}, True, "low", "max", 2**40]
    statuses = []
    for _ in range(60):
        body = json.loads(json.dumps(base))
        for _ in range(rng.randint(1, 3)):
            target = body
            if rng.random() < 0.4 and body.get("messages") and isinstance(body["messages"], list):
                target = rng.choice(body["messages"]) if isinstance(rng.choice(body["messages"]), dict) else body
            key = rng.choice(list(target) + ["n", "stop", "thinking_budget", "tool_choice", "temperature",
                                             "content", "tool_calls", "role", "seed", "top_p"])
            target[key] = rng.choice(odd)
        response = httpx.post(server[0] + "/v1/chat/completions", json=body, timeout=120)
        statuses.append(response.status_code)
        assert response.status_code in (200, 400, 401), (response.status_code, body, response.text)
        if response.status_code != 200:
            assert response.json()["error"]["message"]
    assert statuses.count(200) and statuses.count(400)
    assert _health(server)["status"] == "ok"


def test_a_choice_the_engine_refuses_fails_alone_and_the_server_lives_on(server, client, monkeypatch):
    _, scheduler, _, _ = server
    real = scheduler.engine.submit

    def refuse_once(request):
        monkeypatch.setattr(scheduler.engine, "submit", real)
        raise ValueError("no room for this one")

    monkeypatch.setattr(scheduler.engine, "submit", refuse_once)
    messages, tools = _task(0)
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model=NAME, messages=messages, tools=tools, max_tokens=4)
    assert "no room for this one" in caught.value.body["message"]
    after = client.chat.completions.create(model=NAME, messages=messages, tools=tools, max_tokens=4)
    assert after.choices[0].finish_reason in ("stop", "length", "tool_calls")
