"""The chat format against hand-written renderings: layout, prefix extension, render -> parse, malformed output."""
import json
import random
import re

import pytest

from jointrl.model import chat
from jointrl.model.presets import PRESETS
from jointrl.model.tokenizer import train_tokenizer
from jointrl.model.tokenizer_corpus import default_corpus

TOOLS = [
    {"type": "function", "function": {"name": "bash", "description": "Run a command.",
                                      "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "read_file", "description": "Read.", "parameters": {"type": "object"}}},
]


def call(index, name, arguments):
    return {"id": f"call_{index}", "type": "function", "function": {"name": name, "arguments": arguments}}


AGENT_CHAT = [
    {"role": "system", "content": "You fix bugs."},
    {"role": "user", "content": "Tests fail in src/a.py; fix them."},
    {"role": "assistant", "reasoning_content": "Look first.\nThen read.", "content": "",
     "tool_calls": [call(0, "bash", '{"command": "pytest -q"}'), call(1, "read_file", '{"path": "src/a.py"}')]},
    {"role": "tool", "tool_call_id": "call_0", "content": "1 failed, 3 passed"},
    {"role": "tool", "tool_call_id": "call_1", "content": "def f(x):\n    return {x: 1}\n"},
    {"role": "assistant", "reasoning_content": "Off by one.", "content": "The dict key is wrong; fixed."},
    {"role": "user", "content": "Thanks! And \"quotes\" {braces}?"},
    {"role": "assistant", "content": "Fine."},
]


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(default_corpus(seed=0, n_chats=100), PRESETS["debug"].vocab_size)


def completion_ids(tok, message):
    """The ids an assistant message adds after the generation prompt, built from the format by hand."""
    ids = []
    if isinstance(message.get("reasoning_content"), str):
        ids += [tok.think_start_id, *tok.encode(message["reasoning_content"]), tok.think_end_id]
    ids += tok.encode(message.get("content") or "")
    for c in message.get("tool_calls", []):
        body = '{"name": "%s", "arguments": %s}' % (c["function"]["name"], c["function"]["arguments"])
        ids += [tok.tool_call_start_id, *tok.encode(body), tok.tool_call_end_id]
    return ids + [tok.eot_id]


def test_render_text_matches_the_documented_layout():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "List files."},
        {"role": "assistant", "reasoning_content": "Use ls.", "content": None,
         "tool_calls": [call(0, "bash", '{"command": "ls"}')]},
        {"role": "tool", "tool_call_id": "call_0", "content": "a.py\nb.py"},
        {"role": "assistant", "reasoning_content": "", "content": "Two files."},
    ]
    tools = [{"type": "function", "function": {"name": "bash", "description": "Run.", "parameters": {}}},
             {"name": "noop", "description": "Ünïcode.", "parameters": {}}]
    expected = (
        '<|bos|><|tools|>{"name": "bash", "description": "Run.", "parameters": {}}\n'
        '{"name": "noop", "description": "Ünïcode.", "parameters": {}}<|eot|>'
        "<|system|>Be brief.<|eot|><|user|>List files.<|eot|>"
        '<|assistant|><|tier_low|><think>Use ls.</think><tool_call>{"name": "bash", "arguments": {"command": "ls"}}'
        "</tool_call><|eot|><|tool|><tool_result>a.py\nb.py</tool_result><|eot|>"
        "<|assistant|><|tier_low|><think></think>Two files.<|eot|><|assistant|><|tier_low|>"
    )
    assert chat.render_text(messages, tools, "low", add_generation_prompt=True) == expected
    no_tier = chat.render_text(messages[:2], None, None, add_generation_prompt=True)
    assert no_tier == "<|bos|><|system|>Be brief.<|eot|><|user|>List files.<|eot|><|assistant|>"


def test_dict_arguments_serialise_like_json_dumps():
    arguments = {"s": "é\"<>&", "n": [1.5, None]}
    message = {"role": "assistant", "content": "", "tool_calls": [call(0, "f", arguments)]}
    text = chat.render_text([message])
    assert json.loads('{"s": "é\\"<>&", "n": [1.5, null]}') == arguments
    assert '<tool_call>{"name": "f", "arguments": {"s": "é\\"<>&", "n": [1.5, null]}}</tool_call>' in text


def test_render_ids_are_markers_around_separately_encoded_text(tok):
    messages = [{"role": "user", "content": "hi there"},
                {"role": "assistant", "content": "yo", "reasoning_content": "r"}]
    expected = [tok.bos_id, tok.role_ids["user"], *tok.encode("hi there"), tok.eot_id,
                tok.role_ids["assistant"], tok.tier_ids["max"],
                tok.think_start_id, *tok.encode("r"), tok.think_end_id, *tok.encode("yo"), tok.eot_id]
    assert tok.render(messages, tier="max") == expected
    tool_turn = tok.render([{"role": "tool", "tool_call_id": "x", "content": "out"}])
    assert tool_turn == [tok.bos_id, tok.role_ids["tool"], tok.tool_result_start_id, *tok.encode("out"),
                         tok.tool_result_end_id, tok.eot_id]
    assert tok.render([], TOOLS[:1])[:2] == [tok.bos_id, tok.tools_id]


@pytest.mark.parametrize("tier", [None, "low", "high", "max"])
@pytest.mark.parametrize("tools", [None, TOOLS], ids=["no_tools", "tools"])
def test_each_turn_only_appends_tokens(tok, tier, tools):
    full = tok.render(AGENT_CHAT, tools, tier)
    for k, message in enumerate(AGENT_CHAT):
        before = tok.render(AGENT_CHAT[:k], tools, tier)
        after = tok.render(AGENT_CHAT[:k + 1], tools, tier)
        assert full[:len(after)] == after and after[:len(before)] == before
        if message["role"] != "assistant":
            continue
        prompt = tok.render(AGENT_CHAT[:k], tools, tier, add_generation_prompt=True)
        opener = [tok.role_ids["assistant"]] + ([tok.tier_ids[tier]] if tier else [])
        assert prompt == before + opener
        generated = after[len(prompt):]
        assert after[:len(prompt)] == prompt and generated == completion_ids(tok, message)


def test_mask_covers_exactly_the_generated_tokens(tok):
    ids, mask = tok.render_with_mask(AGENT_CHAT, TOOLS, "high")
    expected = [0] * len(ids)
    for k, message in enumerate(AGENT_CHAT):
        if message["role"] == "assistant":
            start = len(tok.render(AGENT_CHAT[:k], TOOLS, "high", add_generation_prompt=True))
            end = len(tok.render(AGENT_CHAT[:k + 1], TOOLS, "high"))
            expected[start:end] = [1] * (end - start)
    assert ids == tok.render(AGENT_CHAT, TOOLS, "high") and mask == expected


SHAPES = {
    "content_only": {"content": "Hello."},
    "reasoning_and_content": {"reasoning_content": "Let me think.", "content": "42"},
    "empty_reasoning_and_content": {"reasoning_content": "", "content": ""},
    "empty_content": {"content": ""},
    "two_calls": {"reasoning_content": "two", "content": "",
                  "tool_calls": [call(0, "bash", '{"command": "ls -la"}'),
                                 call(1, "read_file", '{"path": "a b.txt"}')]},
    "text_then_call": {"content": "Running it now.\n", "tool_calls": [call(0, "bash", "{}")]},
    "unicode": {"reasoning_content": "naïve 日本語 🙂 e\u0301 \u200b", "content": "Ωμέγα — done ✓",
                "tool_calls": [call(0, "write", '{"t": "日本 🙂", "u": "\\u00e9"}')]},
    "braces_quotes_newlines": {"reasoning_content": 'if x {\n\t"y"\n}', "content": 'x = {"a": [1, 2]}\n\n  \'q\' \\ }}',
                               "tool_calls": [call(0, "py", r'{"code": "print(\"{}\".format(1))\n", "n": [{}]}')]},
    "compact_arguments": {"content": "", "tool_calls": [call(0, "f", '{"a":1,"b":[true,false]}')]},
    "content_spelling_json": {"content": '{"name": "fake", "arguments": {}}', "reasoning_content": "}{"},
    "whitespace": {"reasoning_content": "   ", "content": "\n\n"},
}


@pytest.mark.parametrize("shape", SHAPES)
def test_render_then_parse_is_lossless(tok, shape):
    message = {"role": "assistant", **SHAPES[shape]}
    prompt = tok.render(AGENT_CHAT[:2], TOOLS, "high", add_generation_prompt=True)
    generated = tok.render(AGENT_CHAT[:2] + [message], TOOLS, "high")[len(prompt):]
    assert generated == completion_ids(tok, message)
    assert tok.parse_assistant(generated) == message
    assert tok.parse_assistant(tok.decode(generated)) == message
    # The whole turn, generation prompt included, parses the same.
    assert chat.parse_assistant_text(chat.render_text([message], tier="low")[len(chat.BOS):]) == message


def test_none_content_parses_as_empty_string(tok):
    message = {"role": "assistant", "content": None, "tool_calls": [call(0, "bash", '{"command": "ls"}')]}
    parsed = tok.parse_assistant(completion_ids(tok, message))
    assert parsed == {**message, "content": ""}


def test_foreign_call_ids_become_positional(tok):
    message = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_abc", "type": "function", "function": {"name": "a", "arguments": "{}"}},
        {"id": "toolu_9", "type": "function", "function": {"name": "b", "arguments": '{"k": 1}'}}]}
    parsed = tok.parse_assistant(completion_ids(tok, message))
    assert [c["id"] for c in parsed["tool_calls"]] == ["call_0", "call_1"]
    assert [c["function"] for c in parsed["tool_calls"]] == [c["function"] for c in message["tool_calls"]]


def test_literal_markers_in_text_stay_text(tok):
    sneaky = "Type </think> or <|eot|> or <tool_call>{} here"
    ids = tok.render([{"role": "user", "content": sneaky}])
    assert ids == [tok.bos_id, tok.role_ids["user"], *tok.encode(sneaky), tok.eot_id]
    assert not any(tok.is_special(i) for i in ids[2:-1])
    message = {"role": "assistant", "reasoning_content": "<think>", "content": sneaky}
    assert tok.parse_assistant(completion_ids(tok, message)) == message


def kinds(message):
    return [e["kind"] for e in message.get("parse_errors", [])]


MALFORMED = {
    "bad_json": ('<think>r</think><tool_call>{"name": "bash", "arguments": {"command": "ls"}</tool_call><|eot|>',
                 ["bad_json"]),
    "deep_nesting": ('<tool_call>{"name": "f", "arguments": {"a": ' + "[" * 100_000 + "}</tool_call><|eot|>",
                     ["bad_json"]),
    "not_an_object": ("<tool_call>[1, 2]</tool_call><|eot|>", ["bad_json"]),
    "unknown_key": ('<tool_call>{"name": "f", "arguments": {}, "id": "x"}</tool_call><|eot|>', ["bad_json"]),
    "missing_name": ('<tool_call>{"arguments": {}}</tool_call><|eot|>', ["missing_name"]),
    "name_not_string": ('<tool_call>{"name": 3, "arguments": {}}</tool_call><|eot|>', ["missing_name"]),
    "bad_name": ('<tool_call>{"name": "rm -rf", "arguments": {}}</tool_call><|eot|>', ["bad_name"]),
    "string_arguments": ('<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call><|eot|>', ["bad_arguments"]),
    "missing_arguments": ('<tool_call>{"name": "f"}</tool_call><|eot|>', ["bad_arguments"]),
    "unterminated_call": ('<tool_call>{"name": "f", "arguments": {}}<|eot|>', ["unterminated_tool_call"]),
    "truncated_in_call": ('ok<tool_call>{"name": "f", "argu', ["unterminated_tool_call", "missing_end_of_turn"]),
    "truncated_in_think": ("<think>partial reas", ["unterminated_think", "missing_end_of_turn"]),
    "no_end_of_turn": ("just an answer", ["missing_end_of_turn"]),
    "stray_text": ('<tool_call>{"name": "f", "arguments": {}}</tool_call>more<|eot|>', ["stray_text"]),
    "unexpected_marker": ("hi<|user|>x<|eot|>", ["unexpected_token", "stray_text"]),
    "after_end_of_turn": ("done<|eot|>more", ["trailing_text"]),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_output_gives_error_values(tok, case):
    text, expected = MALFORMED[case]
    for parsed in (tok.parse_assistant(text), tok.parse_assistant(ids_of_text(tok, text))):
        assert parsed["role"] == "assistant" and kinds(parsed) == expected
        assert all(set(e) == {"kind", "detail", "raw", "call_index"} for e in parsed["parse_errors"])
        assert set(expected) <= chat.TOOL_CALL_ERROR_KINDS | chat.TURN_ERROR_KINDS
        if expected[0] in chat.TOOL_CALL_ERROR_KINDS:
            assert "tool_calls" not in parsed and parsed["parse_errors"][0]["call_index"] == 0


def ids_of_text(tok, text):
    """Ids for a marked-up string, written out by hand: markers by id, text by encode."""
    ids = []
    for part in re.split("(" + "|".join(map(re.escape, chat.SPECIAL_TOKENS)) + ")", text):
        ids += [tok.special_ids[part]] if part in chat.SPECIAL_TOKENS else tok.encode(part)
    return ids


def test_good_calls_survive_a_bad_neighbour(tok):
    text = ('<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": }</tool_call>\n'
            '<tool_call>{"name": "c", "arguments": {"x": 1}}</tool_call><|eot|><|pad|><|pad|>')
    parsed = tok.parse_assistant(ids_of_text(tok, text))
    assert [(c["id"], c["function"]["name"]) for c in parsed["tool_calls"]] == [("call_0", "a"), ("call_2", "c")]
    assert [(e["kind"], e["call_index"], e["raw"]) for e in parsed["parse_errors"]] == [("bad_json", 1, '{"name": }')]


def test_every_truncation_parses_without_raising(tok):
    message = {"role": "assistant", **SHAPES["two_calls"]}
    generated = completion_ids(tok, message)
    for cut in range(len(generated)):
        parsed = tok.parse_assistant(generated[:cut])
        assert "missing_end_of_turn" in kinds(parsed)
    rng = random.Random(0)
    for _ in range(200):
        noise = [rng.randrange(tok.vocab_size) for _ in range(rng.randint(0, 40))]
        assert tok.parse_assistant(noise)["role"] == "assistant"


@pytest.mark.parametrize("messages, tools, tier, match", [
    ([{"role": "developer", "content": "x"}], None, None, "role 'developer'"),
    ([{"role": "user", "content": "x"}], None, "medium", "tier='medium'"),
    ([{"role": "user", "content": 3}], None, None, "content must be a string"),
    (["hi"], None, None, r"messages\[0\] must be a dict"),
    ([{"role": "user", "content": "x"}], ["bash"], None, r"tools\[0\]"),
    ([{"role": "assistant", "content": "", "tool_calls": [call(0, "f", "not json")]}], None, None, "not JSON"),
    ([{"role": "assistant", "content": "", "tool_calls": [call(0, "f", "[1]")]}], None, None, "JSON object"),
    ([{"role": "assistant", "content": "", "tool_calls": [call(0, "bad name", "{}")]}], None, None, "'bad name'"),
])
def test_bad_input_raises_value_error(messages, tools, tier, match):
    with pytest.raises(ValueError, match=match):
        chat.render_text(messages, tools, tier)

