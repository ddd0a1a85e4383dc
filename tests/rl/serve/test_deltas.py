"""Streamed deltas against the chat format's own parser: what a stream shows adds up to the parsed message."""
import random

import pytest

from jointrl.model import chat
from jointrl.rl.serve.deltas import TurnText

CALL = {"id": "call_0", "type": "function", "function": {"name": "length", "arguments": "{\"word\": \"ünïcode ✓\"}"}}
MESSAGES = [
    {"role": "assistant", "content": "plain answer"},
    {"role": "assistant", "content": "héllo wörld ✓ 日本", "reasoning_content": "think ✓ first"},
    {"role": "assistant", "content": "", "reasoning_content": "", "tool_calls": [CALL]},
    {"role": "assistant", "content": "two calls", "reasoning_content": "r", "tool_calls": [CALL, CALL]},
]


@pytest.fixture(scope="module")
def tokenizer(fitted_lookup_policy):
    return fitted_lookup_policy[1]


def _turn(tokenizer, message) -> list[int]:
    """The ids the model would generate for this assistant message (after the generation prompt)."""
    ids, mask = tokenizer.render_with_mask([{"role": "user", "content": "q"}, message], None, "low")
    return [i for i, m in zip(ids, mask) if m]


def _play(tokenizer, tokens, stops=()):
    text = TurnText(tokenizer, list(stops))
    deltas = [text.push(t) for t in tokens] + [text.finish()]
    return text, deltas


def _shown(deltas):
    reasoning = "".join(d.reasoning for d in deltas)
    content = "".join(d.content for d in deltas)
    calls = [d.tool_call for d in deltas if d.tool_call]
    return reasoning, content, calls


def _seen(message: dict):
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls", [])]
    return message.get("reasoning_content"), message.get("content", ""), calls


@pytest.mark.parametrize("index", range(len(MESSAGES)))
def test_a_streamed_turn_adds_up_to_the_parsed_message(tokenizer, index):
    tokens = _turn(tokenizer, MESSAGES[index])
    text, deltas = _play(tokenizer, tokens)
    parsed = tokenizer.parse_assistant(tokens)
    reasoning, content, calls = _shown(deltas)
    assert (text.reasoning, content, [(c["function"]["name"], c["function"]["arguments"]) for c in calls]) == _seen(parsed)
    if text.reasoning is not None:
        assert reasoning == text.reasoning
    assert not any("\ufffd" in d.content + d.reasoning for d in deltas)
    # Call ids are unique within and across turns.
    other, _ = _play(tokenizer, tokens)
    ids = [c["id"] for c in text.tool_calls] + [c["id"] for c in other.tool_calls]
    assert len(set(ids)) == len(ids)


def test_random_token_soup_follows_the_parser(tokenizer):
    """Whatever the model samples (markers in odd places, truncation), the stream shows what the parser keeps."""
    rng = random.Random(0)
    specials = [tokenizer.special_ids[t] for t in (chat.THINK_OPEN, chat.THINK_CLOSE, chat.CALL_OPEN, chat.CALL_CLOSE,
                                                   chat.EOT, chat.USER)]
    words = tokenizer.encode('abc {"name": "length", "arguments": {}} é') + _turn(tokenizer, MESSAGES[3])
    for _ in range(300):
        tokens = [rng.choice(specials) if rng.random() < 0.3 else rng.choice(words) for _ in range(rng.randint(1, 25))]
        text, deltas = _play(tokenizer, tokens)
        parsed = tokenizer.parse_assistant(tokens)
        reasoning, content, calls = _shown(deltas)
        assert _seen(parsed)[1:] == (content, [(c["function"]["name"], c["function"]["arguments"]) for c in calls]), tokens
        assert text.reasoning == parsed.get("reasoning_content"), tokens


@pytest.mark.parametrize("stop, expected", [("wörld", "héllo "), ("✓ 日", "héllo wörld "), ("zzz", "héllo wörld ✓ 日本"),
                                            ("h", "")])
def test_stop_strings_cut_the_content_and_nothing_after_them_is_shown(tokenizer, stop, expected):
    tokens = _turn(tokenizer, MESSAGES[1])
    text, deltas = _play(tokenizer, tokens, [stop, "never"])
    assert "".join(d.content for d in deltas) == text.content == expected
    assert text.stopped == (stop in MESSAGES[1]["content"])
