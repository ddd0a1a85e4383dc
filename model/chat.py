"""The chat format: its special tokens, the renderer of OpenAI-style messages, its Jinja twin, and the parser.

A conversation renders as below (one turn per line here; nothing is inserted between turns). Every ``<...>``
marker is one special token, and the text between two markers is encoded on its own, so no token spans a marker::

    <|bos|>
    <|tools|>{"name": "f", "description": "...", "parameters": {...}}\\n{...}<|eot|>    only when tools are given
    <|system|>text<|eot|>
    <|user|>text<|eot|>
    <|assistant|><|tier_high|><think>reasoning</think>content<tool_call>{"name": "f", "arguments": {...}}</tool_call>
        <tool_call>...</tool_call><|eot|>
    <|tool|><tool_result>text</tool_result><|eot|>
    <|assistant|><|tier_high|>                                              the generation prompt

Decisions:

- The thinking tier (``low``, ``high``, ``max``) is a control token right after every ``<|assistant|>``, so the
  generation prompt ends with it and the model's first token is ``<think>``. Earlier assistant turns carry the same
  token and keep their reasoning, so rendering a longer conversation only ever appends tokens: the ids of the whole
  conversation equal the prompt ids + the generated ids + the next messages' ids. With ``tier=None`` there is no
  tier token.
- The think block is present exactly when ``reasoning_content`` is a string (an empty string gives an empty block).
- ``content=None`` renders like ``""``; the parser always returns a string.
- Tools are listed one function spec per line, each serialised by ``json.dumps(spec, ensure_ascii=False)``,
  which is what transformers' ``tojson`` filter does in the Jinja template. A spec wrapped as
  ``{"type": "function", "function": {...}}`` lists only the inner function.
- Tool-call arguments given as a string are written verbatim (they are already JSON); a dict is serialised like a
  tool spec. The parser returns the arguments' exact text.
- Tool-call ids are not rendered: the model never has to copy opaque strings, and tool results follow their calls
  in order. The parser names calls ``call_0``, ``call_1``, ... by their position in the turn, so a message round
  trips exactly when its ids are those; any other id is the only thing lost.
- Text that spells a marker (a user typing ``<think>``) is plain text: ``JointTokenizer`` encodes it as bytes.
  transformers' ``apply_chat_template`` does the same only with ``sanitize_control_tokens=True``; without it such
  text becomes the special id there. Parsing *text* cannot tell the two apart; parsing *ids* can.
- The parser never raises on model output. Problems are listed under ``parse_errors`` as
  ``{"kind", "detail", "raw", "call_index"}``. A malformed tool call (a kind in ``TOOL_CALL_ERROR_KINDS``, with its
  block's ``call_index``) is left out of ``tool_calls`` and the others keep their positional ids; the other kinds
  (``TURN_ERROR_KINDS``) describe the turn: truncation without ``<|eot|>``, an unclosed think block, stray text or
  markers. A message without problems has no ``parse_errors`` key. Trailing ``<|pad|>`` after ``<|eot|>`` is fine.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterable, NamedTuple

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
SYSTEM, USER, ASSISTANT, TOOL = "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>"
EOT = "<|eot|>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
RESULT_OPEN, RESULT_CLOSE = "<tool_result>", "</tool_result>"
TOOLS = "<|tools|>"
TIER_TOKENS = {"low": "<|tier_low|>", "high": "<|tier_high|>", "max": "<|tier_max|>"}
ROLE_TOKENS = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT, "tool": TOOL}

# The order fixes the ids: special token i has id i in every trained tokenizer.
SPECIAL_TOKENS: tuple[str, ...] = (
    BOS, EOS, PAD, SYSTEM, USER, ASSISTANT, TOOL, EOT, THINK_OPEN, THINK_CLOSE,
    CALL_OPEN, CALL_CLOSE, RESULT_OPEN, RESULT_CLOSE, TOOLS, *TIER_TOKENS.values(),
)

TOOL_CALL_ERROR_KINDS = frozenset({"bad_json", "missing_name", "bad_name", "bad_arguments", "unterminated_tool_call"})
TURN_ERROR_KINDS = frozenset(
    {"unterminated_think", "missing_end_of_turn", "stray_text", "unexpected_token", "trailing_text"}
)
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_SPECIAL_SPLIT = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")
_SPECIALS = frozenset(SPECIAL_TOKENS)


class Piece(NamedTuple):
    """One span of a rendering: a special token or a run of text, and whether the policy generates it."""

    text: str
    special: bool
    generated: bool = False


class _Pieces:
    """Collects pieces, merging adjacent text with the same flag so each run is encoded in one go."""

    def __init__(self) -> None:
        self.pieces: list[Piece] = []

    def special(self, token: str, generated: bool = False) -> None:
        self.pieces.append(Piece(token, True, generated))

    def text(self, text: str, generated: bool = False) -> None:
        if not text:
            return
        last = self.pieces[-1] if self.pieces else None
        if last is not None and not last.special and last.generated == generated:
            self.pieces[-1] = Piece(last.text + text, False, generated)
        else:
            self.pieces.append(Piece(text, False, generated))


def _check_tier(tier: str | None) -> None:
    if tier is not None and tier not in TIER_TOKENS:
        raise ValueError(f"tier={tier!r} is not one of {sorted(TIER_TOKENS)} or None")


def _text_field(message: dict, key: str, where: str) -> str:
    value = message.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}: {key} must be a string or None, got {type(value).__name__}")
    return value


def _tool_function(tool: Any, where: str) -> dict:
    if not isinstance(tool, dict):
        raise ValueError(f"{where}: a tool must be a JSON-schema dict, got {type(tool).__name__}")
    return tool["function"] if "function" in tool else tool


def _call_body(call: Any, where: str) -> str:
    """The JSON text inside one <tool_call> block."""
    if not isinstance(call, dict):
        raise ValueError(f"{where}: a tool call must be a dict, got {type(call).__name__}")
    function = call["function"] if "function" in call else call
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise ValueError(f"{where}: tool name {name!r} must match {TOOL_NAME.pattern}")
    arguments = function.get("arguments")
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments, ensure_ascii=False)
    elif isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except json.JSONDecodeError as err:
            raise ValueError(f"{where}: arguments of {name!r} are not JSON ({err}): {arguments!r}") from None
        if not isinstance(decoded, dict):
            raise ValueError(f"{where}: arguments of {name!r} must be a JSON object, got {arguments!r}")
    else:
        raise ValueError(f"{where}: arguments of {name!r} must be a JSON string or a dict, got {arguments!r}")
    return f'{{"name": "{name}", "arguments": {arguments}}}'


def _assistant_open(out: _Pieces, tier: str | None) -> None:
    out.special(ASSISTANT)
    if tier is not None:
        out.special(TIER_TOKENS[tier])


def _render_message(out: _Pieces, message: Any, index: int, tier: str | None) -> None:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise ValueError(f"{where} must be a dict, got {type(message).__name__}")
    role = message.get("role")
    if role not in ROLE_TOKENS:
        raise ValueError(f"{where}: role {role!r} is not one of {sorted(ROLE_TOKENS)}")
    content = _text_field(message, "content", where)
    if role in ("system", "user"):
        out.special(ROLE_TOKENS[role])
        out.text(content)
        out.special(EOT)
    elif role == "tool":
        out.special(TOOL)
        out.special(RESULT_OPEN)
        out.text(content)
        out.special(RESULT_CLOSE)
        out.special(EOT)
    else:
        _assistant_open(out, tier)
        reasoning = message.get("reasoning_content")
        if isinstance(reasoning, str):
            out.special(THINK_OPEN, True)
            out.text(reasoning, True)
            out.special(THINK_CLOSE, True)
        out.text(content, True)
        for k, call in enumerate(message.get("tool_calls") or []):
            out.special(CALL_OPEN, True)
            out.text(_call_body(call, f"{where}.tool_calls[{k}]"), True)
            out.special(CALL_CLOSE, True)
        out.special(EOT, True)


def render_pieces(
    messages: list[dict], tools: list[dict] | None = None, tier: str | None = None,
    add_generation_prompt: bool = False,
) -> list[Piece]:
    """Render a conversation into special tokens and text runs (the format in the module docstring)."""
    _check_tier(tier)
    out = _Pieces()
    out.special(BOS)
    if tools:
        specs = [_tool_function(t, f"tools[{i}]") for i, t in enumerate(tools)]
        out.special(TOOLS)
        out.text("\n".join(json.dumps(spec, ensure_ascii=False) for spec in specs))
        out.special(EOT)
    for index, message in enumerate(messages):
        _render_message(out, message, index, tier)
    if add_generation_prompt:
        _assistant_open(out, tier)
    return out.pieces


def render_text(
    messages: list[dict], tools: list[dict] | None = None, tier: str | None = None,
    add_generation_prompt: bool = False,
) -> str:
    """The rendering as one string, exactly what the Jinja template produces."""
    return "".join(p.text for p in render_pieces(messages, tools, tier, add_generation_prompt))


def split_specials(text: str) -> list[Piece]:
    """Cut text at every spelling of a special token (text cannot say whether it was typed or a marker)."""
    return [Piece(part, part in _SPECIALS) for part in _SPECIAL_SPLIT.split(text) if part]


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _object_members(text: str) -> dict[str, tuple[Any, str]]:
    """Each top-level member of a JSON object as (value, exact source text); ValueError if it is not one."""
    decoder = json.JSONDecoder()
    members: dict[str, tuple[Any, str]] = {}
    pos = _skip_ws(text, 0)
    if not text.startswith("{", pos):
        raise ValueError("not a JSON object")
    pos = _skip_ws(text, pos + 1)
    if text.startswith("}", pos):
        pos += 1
    else:
        while True:
            key, pos = decoder.raw_decode(text, pos)
            if not isinstance(key, str):
                raise ValueError("object key is not a string")
            pos = _skip_ws(text, pos)
            if not text.startswith(":", pos):
                raise ValueError(f"expected ':' at {pos}")
            start = _skip_ws(text, pos + 1)
            value, pos = decoder.raw_decode(text, start)
            members[key] = (value, text[start:pos])
            pos = _skip_ws(text, pos)
            if text.startswith(",", pos):
                pos = _skip_ws(text, pos + 1)
            elif text.startswith("}", pos):
                pos += 1
                break
            else:
                raise ValueError(f"expected ',' or '}}' at {pos}")
    if _skip_ws(text, pos) != len(text):
        raise ValueError(f"text after the object at {pos}")
    return members


def _parse_call(body: str, index: int) -> tuple[dict | None, dict | None]:
    """One <tool_call> body as (tool call, None) or (None, error)."""

    def error(kind: str, detail: str) -> tuple[None, dict]:
        return None, {"kind": kind, "detail": detail, "raw": body, "call_index": index}

    try:
        members = _object_members(body)
    except (ValueError, RecursionError) as err:
        return error("bad_json", str(err)[:200])
    unknown = sorted(set(members) - {"name", "arguments"})
    if unknown:
        return error("bad_json", f"unknown keys {unknown}")
    name = members.get("name", (None, ""))[0]
    if not isinstance(name, str) or not name:
        return error("missing_name", "no string 'name'")
    if not TOOL_NAME.fullmatch(name):
        return error("bad_name", f"name {name!r} does not match {TOOL_NAME.pattern}")
    if "arguments" not in members or not isinstance(members["arguments"][0], dict):
        return error("bad_arguments", "'arguments' must be a JSON object")
    call = {"id": f"call_{index}", "type": "function", "function": {"name": name, "arguments": members["arguments"][1]}}
    return call, None


def parse_pieces(pieces: Iterable[Piece]) -> dict:
    """Turn a generated assistant turn (after the generation prompt, through <|eot|>) into a message."""
    seq = [p for p in pieces if p.special or p.text]
    errors: list[dict] = []

    def note(kind: str, detail: str, raw: str = "") -> None:
        errors.append({"kind": kind, "detail": detail, "raw": raw, "call_index": None})

    def text_at(i: int) -> tuple[str, int]:
        return (seq[i].text, i + 1) if i < len(seq) and not seq[i].special else ("", i)

    def is_token(i: int, token: str) -> bool:
        return i < len(seq) and seq[i].special and seq[i].text == token

    # Tolerate the generation prompt itself at the front, so a whole rendered turn parses too.
    i = 1 if is_token(0, ASSISTANT) else 0
    i += 1 if i < len(seq) and seq[i].special and seq[i].text in TIER_TOKENS.values() else 0
    message: dict[str, Any] = {"role": "assistant"}
    if is_token(i, THINK_OPEN):
        message["reasoning_content"], i = text_at(i + 1)
        if is_token(i, THINK_CLOSE):
            i += 1
        else:
            note("unterminated_think", "no </think> after the reasoning")
    message["content"], i = text_at(i)
    calls: list[dict] = []
    n_blocks, ended = 0, False
    while i < len(seq) and not ended:
        piece = seq[i]
        if not piece.special:
            if piece.text.strip():
                note("stray_text", "text outside any block", piece.text)
            i += 1
        elif piece.text == EOT:
            ended, i = True, i + 1
        elif piece.text == CALL_OPEN:
            body, i = text_at(i + 1)
            if is_token(i, CALL_CLOSE):
                call, err = _parse_call(body, n_blocks)
                i += 1
            else:
                call, err = None, {"kind": "unterminated_tool_call", "detail": "no </tool_call>", "raw": body,
                                   "call_index": n_blocks}
            calls += [call] if call else []
            errors += [err] if err else []
            n_blocks += 1
        else:
            note("unexpected_token", f"{piece.text} in an assistant turn", piece.text)
            i += 1
    if not ended:
        note("missing_end_of_turn", f"the turn does not end with {EOT}")
    trailing = "".join(p.text for p in seq[i:] if not (p.special and p.text == PAD))
    if trailing:
        note("trailing_text", f"output after {EOT}", trailing)
    if calls:
        message["tool_calls"] = calls
    if errors:
        message["parse_errors"] = errors
    return message


def parse_assistant_text(text: str) -> dict:
    """Parse a generated assistant turn given as text (markers recognised by their spelling)."""
    return parse_pieces(split_specials(text))


# apply_chat_template(thinking_budget=...) names a tier, as a serve request's thinking_budget does; a token count
# is enforced while generating, which a template cannot do, and enable_thinking (another format's switch) has no
# meaning here: both are refused rather than ignored.
_THINKING_KWARGS = (
    "{%- if enable_thinking is defined -%}{{- raise_exception('enable_thinking is not part of this chat format: "
    "it always thinks; choose how much with thinking_tier (low, high, max)') -}}{%- endif -%}\n"
    "{%- if thinking_budget is defined and thinking_budget is not none -%}"
    "{%- if thinking_budget is not string or thinking_budget not in tier_tokens -%}"
    "{{- raise_exception('thinking_budget in a chat template must be a tier (low, high, max), got ' ~ thinking_budget"
    " ~ '; a token count is enforced while generating (jointrl serve)') -}}"
    "{%- elif tier is not none and tier != thinking_budget -%}"
    "{{- raise_exception('thinking_budget ' ~ thinking_budget ~ ' and thinking_tier ' ~ tier ~ ' disagree') -}}"
    "{%- endif -%}{%- set tier = thinking_budget -%}{%- endif -%}\n"
)


def chat_template(thinking_kwargs: bool = True) -> str:
    """The Jinja twin of ``render_text`` for transformers' ``apply_chat_template``.

    The tier kwarg is ``thinking_tier``; ``thinking_budget`` is accepted when it names the same tier (see
    _THINKING_KWARGS). thinking_kwargs=False gives the template saved before those checks existed, which renders
    every conversation the same.
    """
    tiers = ", ".join(f'"{name}": "{token}"' for name, token in TIER_TOKENS.items())
    return (
        "{%- set tier_tokens = {" + tiers + "} -%}\n"
        "{%- set tier = thinking_tier if thinking_tier is defined and thinking_tier is not none else none -%}\n"
        + (_THINKING_KWARGS if thinking_kwargs else "")
        + "{%- if tier is not none and tier not in tier_tokens -%}"
        "{{- raise_exception('thinking_tier must be one of low, high, max, got ' ~ tier) -}}{%- endif -%}\n"
        "{%- set assistant_open = '" + ASSISTANT + "' ~ (tier_tokens[tier] if tier is not none else '') -%}\n"
        "{{- '" + BOS + "' -}}\n"
        "{%- if tools -%}{{- '" + TOOLS + "' -}}\n"
        "{%- for tool in tools -%}"
        "{%- if not loop.first -%}{{- '\\n' -}}{%- endif -%}"
        "{{- (tool['function'] if tool['function'] is defined else tool) | tojson -}}"
        "{%- endfor -%}{{- '" + EOT + "' -}}{%- endif -%}\n"
        "{%- for message in messages -%}\n"
        "{%- set content = message['content'] if message['content'] is string else '' -%}\n"
        "{%- if message['role'] == 'system' or message['role'] == 'user' -%}"
        "{{- ('" + SYSTEM + "' if message['role'] == 'system' else '" + USER + "') ~ content ~ '" + EOT + "' -}}\n"
        "{%- elif message['role'] == 'tool' -%}"
        "{{- '" + TOOL + RESULT_OPEN + "' ~ content ~ '" + RESULT_CLOSE + EOT + "' -}}\n"
        "{%- elif message['role'] == 'assistant' -%}{{- assistant_open -}}\n"
        "{%- if message['reasoning_content'] is string -%}"
        "{{- '" + THINK_OPEN + "' ~ message['reasoning_content'] ~ '" + THINK_CLOSE + "' -}}{%- endif -%}\n"
        "{{- content -}}\n"
        "{%- set calls = message['tool_calls'] if message['tool_calls'] is defined else none -%}"
        "{%- set calls = calls if calls else [] -%}"
        "{%- for call in calls -%}"
        "{%- set fn = call['function'] if call['function'] is defined else call -%}"
        "{%- set args = fn['arguments'] if fn['arguments'] is string else fn['arguments'] | tojson -%}"
        "{{- '" + CALL_OPEN + "{\"name\": \"' ~ fn['name'] ~ '\", \"arguments\": ' ~ args ~ '}" + CALL_CLOSE + "' -}}"
        "{%- endfor -%}{{- '" + EOT + "' -}}\n"
        "{%- else -%}{{- raise_exception('unknown role ' ~ message['role']) -}}{%- endif -%}\n"
        "{%- endfor -%}\n"
        "{%- if add_generation_prompt -%}{{- assistant_open -}}{%- endif -%}"
    )
