"""The tokenizer and chat template an imported checkpoint brings, behind the interface of JointTokenizer.

Rendering is the checkpoint's own Jinja chat template (transformers' apply_chat_template over its tokenizer.json;
transformers is needed only here). The thinking tier reaches the template as `thinking_tier`, and any tier turns
thinking on (`thinking=True`, `enable_thinking=True`, the switches DeepSeek and Qwen-style templates read); budgets
are the engine's, as for jointrl's format.

Parsing follows the format the template emits, found once on load by rendering a probe conversation (reasoning,
content, one tool call) and parsing its assistant turn back with each known tool-call format:
  kimi-k2         <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:I<|tool_call_argument_begin|>ARGS
                  <|tool_call_end|>...<|tool_calls_section_end|>   (Kimi K2, Kimi Linear)
  deepseek-v3.1   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
                  (DeepSeek V3.1, V3.2-Exp)
Reasoning sits in <think>...</think>; a generation prompt may open the block itself (DeepSeek's thinking mode).
The end of an assistant turn (the stop token) is the special token the probe's turn ends with. A template that
drops the probe's tools or call, or writes it in another format, loads, but rendering any tools raises.

The assistant tokens of a rendering (render_with_mask) are found by rendering prefixes: assistant turn i is what
render(messages[:i+1]) adds to render(messages[:i], generation prompt), through its end-of-turn token. Each such
span and each text between them is encoded on its own, so a rendering only ever appends tokens as the
conversation grows; a template that renders an earlier turn differently once later messages follow is refused.
"""
from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from jointrl.model.chat import TIER_TOKENS, TOOL_NAME

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"
# What save() copies: everything transformers reads for a fast tokenizer and its template.
TOKENIZER_FILES = (TOKENIZER_FILE, CONFIG_FILE, "special_tokens_map.json", TEMPLATE_FILE)
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
NO_ID = -1  # a marker this tokenizer does not have: never equal to a sampled id


@dataclass(frozen=True)
class ToolCallFormat:
    """The markers of one tool-call format; `head` full-matches the text before the arguments, group 1 the name."""

    name: str
    section_open: str
    call_open: str
    args_open: str
    call_close: str
    section_close: str
    head: re.Pattern


KIMI_K2 = ToolCallFormat(
    "kimi-k2", "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
    "<|tool_call_end|>", "<|tool_calls_section_end|>", re.compile(r"\s*(?:functions\.)?(.*?)(?::\d+)?\s*", re.S),
)
DEEPSEEK_V31 = ToolCallFormat(
    "deepseek-v3.1", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>", re.compile(r"\s*(.*?)\s*", re.S),
)
FORMATS = (KIMI_K2, DEEPSEEK_V31)

_PROBE_TOOL = {"type": "function", "function": {
    "name": "probe_lookup", "description": "probe tool 3141",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
}}
_PROBE_ARGS = '{"query": "probe argument 2718"}'
_PROBE_USER = {"role": "user", "content": "probe question"}
_PROBE_TURN = {"role": "assistant", "reasoning_content": "probe reasoning", "content": "probe answer"}
_PROBE_CALL = {"id": "call_0", "type": "function", "function": {"name": "probe_lookup", "arguments": _PROBE_ARGS}}


class HFTokenizer:
    """tokenizer.json plus the checkpoint's chat template: encode, decode, render (with masks) and parse turns."""

    def __init__(self, directory: str | Path):
        from transformers import PreTrainedTokenizerFast

        self.directory = Path(directory)
        if not (self.directory / TOKENIZER_FILE).is_file():
            raise ValueError(f"{self.directory} has no {TOKENIZER_FILE} (a tiktoken or sentencepiece-only tokenizer "
                             "must be converted to tokenizer.json first)")
        self._hf = PreTrainedTokenizerFast.from_pretrained(str(self.directory))
        if not isinstance(self._hf.chat_template, str):
            raise ValueError(f"{self.directory}: no single chat template in {CONFIG_FILE} or {TEMPLATE_FILE} "
                             f"(found {type(self._hf.chat_template).__name__})")
        self._backend = self._hf.backend_tokenizer
        added = self._backend.get_added_tokens_decoder()
        self._id_to_special = {i: t.content for i, t in added.items() if t.special}
        self._special_id_set = frozenset(self._id_to_special)
        self.special_ids: dict[str, int] = {t: i for i, t in self._id_to_special.items()}
        self._split = re.compile("(" + "|".join(re.escape(t) for t in sorted(self.special_ids, key=len, reverse=True))
                                 + ")") if self.special_ids else None
        self.think_start_id = self._id(THINK_OPEN)
        self.think_end_id = self._id(THINK_CLOSE)
        self.eot, self.opens_think = self._probe_turn()
        self.eot_id = self.special_ids[self.eot]
        self.eos_id = self._hf.eos_token_id if self._hf.eos_token_id is not None else self.eot_id
        self.bos_id = self._hf.bos_token_id
        self.pad_id = self._hf.pad_token_id if self._hf.pad_token_id is not None else self.eos_id
        self.tool_format, self.no_tools_reason = self._probe_tools()

    def __reduce__(self):
        # Rollout workers get a copy: rebuilding from the files is simpler than pickling the Jinja state.
        return HFTokenizer, (str(self.directory),)

    def _id(self, token: str) -> int:
        token_id = self._backend.token_to_id(token)
        return NO_ID if token_id is None else token_id

    @property
    def vocab_size(self) -> int:
        """Ids the tokenizer can produce or decode (the model's embedding may have more rows)."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    def is_special(self, token_id: int) -> bool:
        """Whether an id is a special (added) token."""
        return token_id in self._special_id_set

    def encode(self, text: str) -> list[int]:
        """Text to ids as the checkpoint's tokenizer encodes it (special-token spellings become their ids)."""
        return self._backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        """Ids to text with every special token written out."""
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} are outside the vocabulary [0, {self.vocab_size})")
        return self._backend.decode(ids, skip_special_tokens=False)

    # Rendering.

    def _template(self, messages: list[dict], tools: list[dict] | None, tier: str | None, generation: bool) -> str:
        if tools and self.tool_format is None:
            raise ValueError(f"{self.directory}: the chat template cannot express tool calls ({self.no_tools_reason}), "
                             "but these messages come with tools")
        return self._apply(messages, tools, tier, generation)

    def _apply(self, messages: list[dict], tools: list[dict] | None, tier: str | None, generation: bool) -> str:
        if tier is not None and tier not in TIER_TOKENS:
            raise ValueError(f"tier={tier!r} is not one of {sorted(TIER_TOKENS)} or None")
        switches = {} if tier is None else {"thinking": True, "enable_thinking": True, "thinking_tier": tier}
        return self._hf.apply_chat_template(
            messages, tools=tools or None, add_generation_prompt=generation, tokenize=False, **switches
        )

    def _turn_spans(self, messages: list[dict], tools, tier, full: str) -> list[tuple[int, int]]:
        """(start, end) in `full` of every assistant turn's generated text, found by rendering prefixes."""
        spans = []
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") != "assistant":
                continue
            prompt = self._template(messages[:i], tools, tier, generation=True)
            turn = self._template(messages[:i + 1], tools, tier, generation=False)
            if not (turn.startswith(prompt) and full.startswith(turn)):
                raise ValueError(f"{self.directory}: the chat template renders messages[{i}] (assistant) differently "
                                 "once later messages follow; the agent loop needs a template that only appends")
            end = turn.rfind(self.eot, len(prompt))
            if end < 0:
                raise ValueError(f"{self.directory}: messages[{i}] (assistant) renders without {self.eot}")
            spans.append((len(prompt), end + len(self.eot)))
        return spans

    def render_with_mask(
        self, messages: list[dict], tools: list[dict] | None = None, tier: str | None = None,
        add_generation_prompt: bool = False,
    ) -> tuple[list[int], list[int]]:
        """Ids plus a mask that is 1 on the tokens the policy generates (each assistant turn through its end token)."""
        full = self._template(messages, tools, tier, add_generation_prompt)
        spans = self._turn_spans(messages, tools, tier, full)
        if spans and not add_generation_prompt and messages[-1].get("role") == "assistant":
            # A rendering that ends with a turn ends where its generation stopped, so the next feed starts after it.
            full = full[:spans[-1][1]]
        ids: list[int] = []
        mask: list[int] = []
        cut = 0
        for start, end in spans + [(len(full), len(full))]:
            for text, generated in ((full[cut:start], 0), (full[start:end], 1)):
                piece = self.encode(text) if text else []
                ids += piece
                mask += [generated] * len(piece)
            cut = end
        return ids, mask

    def render(
        self, messages: list[dict], tools: list[dict] | None = None, tier: str | None = None,
        add_generation_prompt: bool = False,
    ) -> list[int]:
        """Ids of a conversation rendered by the checkpoint's chat template."""
        return self.render_with_mask(messages, tools, tier, add_generation_prompt)[0]

    def render_text(
        self, messages: list[dict], tools: list[dict] | None = None, tier: str | None = None,
        add_generation_prompt: bool = False,
    ) -> str:
        """The chat template's output, as apply_chat_template gives it."""
        return self._template(messages, tools, tier, add_generation_prompt)

    # Parsing.

    def _pieces(self, text: str) -> list[tuple[str, bool]]:
        parts = self._split.split(text) if self._split else [text]
        return [(p, p in self.special_ids) for p in parts if p]

    def parse_assistant(self, text_or_ids: str | Sequence[int]) -> dict:
        """A generated assistant turn (text or ids after the generation prompt) back into a message; never raises."""
        text = text_or_ids if isinstance(text_or_ids, str) else self.decode(text_or_ids)
        return parse_turn(self._pieces(text), self.eot, self.tool_format, self._hf.pad_token)

    def save(self, directory: str | Path) -> Path:
        """Copy the checkpoint's tokenizer files (tokenizer.json, its config and chat template) into a directory."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        copy_tokenizer_files(self.directory, out)
        return out

    # The probes.

    def _probe_turn(self) -> tuple[str, bool]:
        """The end-of-turn token, and whether the generation prompt opens the think block."""
        prompt = self._apply([_PROBE_USER], None, "high", generation=True)
        turn = self._apply([_PROBE_USER, _PROBE_TURN], None, "high", generation=False)
        if not turn.startswith(prompt):
            raise ValueError(f"{self.directory}: the chat template's assistant turn does not continue its generation "
                             "prompt, so generated tokens cannot be told from the prompt")
        pieces = [p for p in self._pieces(turn[len(prompt):]) if p[1] or p[0].strip()]
        if not pieces or not pieces[-1][1]:
            raise ValueError(f"{self.directory}: the chat template ends an assistant turn with "
                             f"{pieces[-1][0] if pieces else 'nothing'!r}, not a special token to stop at")
        return pieces[-1][0], prompt.rstrip().endswith(THINK_OPEN)

    def _probe_tools(self) -> tuple[ToolCallFormat | None, str]:
        """The tool-call format the template writes, or None and why it cannot express tool calls."""
        try:
            prompt = self._apply([_PROBE_USER], [_PROBE_TOOL], "high", generation=True)
            turn = self._apply([_PROBE_USER, {**_PROBE_TURN, "tool_calls": [_PROBE_CALL]}], [_PROBE_TOOL], "high",
                               generation=False)
        except Exception as err:  # a template's raise_exception, or any Jinja error: the probe only learns "no"
            return None, f"rendering a tool call fails: {type(err).__name__}: {err}"
        if "probe tool 3141" not in prompt:
            return None, "the tools given are not rendered"
        if not turn.startswith(prompt) or "probe argument 2718" not in turn[len(prompt):]:
            return None, "a tool call's arguments are not rendered"
        for fmt in FORMATS:
            parsed = parse_turn(self._pieces(turn[len(prompt):]), self.eot, fmt, None)
            if parsed.get("tool_calls") == [_PROBE_CALL] and "parse_errors" not in parsed:
                return fmt, ""
        names = ", ".join(f.name for f in FORMATS)
        return None, f"its tool calls are in none of the known formats ({names})"


def parse_turn(pieces: list[tuple[str, bool]], eot: str, fmt: ToolCallFormat | None, pad: str | None) -> dict:
    """An assistant turn, cut into (text, is_special) pieces, as a message shaped like chat.parse_assistant_text's."""
    seq = [(t, s) for t, s in pieces if s or t]
    errors: list[dict] = []

    def note(kind: str, detail: str, raw: str = "", call_index: int | None = None) -> None:
        errors.append({"kind": kind, "detail": detail, "raw": raw, "call_index": call_index})

    def is_token(i: int, token: str | None) -> bool:
        return i < len(seq) and seq[i][1] and seq[i][0] == token

    def text_at(i: int) -> tuple[str, int]:
        return (seq[i][0], i + 1) if i < len(seq) and not seq[i][1] else ("", i)

    message: dict[str, Any] = {"role": "assistant"}
    i = 0
    if is_token(0, THINK_OPEN):
        message["reasoning_content"], i = text_at(1)
        if is_token(i, THINK_CLOSE):
            i += 1
        else:
            note("unterminated_think", f"no {THINK_CLOSE} after the reasoning")
    elif is_token(0, THINK_CLOSE) or is_token(1, THINK_CLOSE) and not seq[0][1]:
        # The generation prompt opened the block, so the turn starts inside it.
        message["reasoning_content"], i = text_at(0)
        i += 1
    message["content"], i = text_at(i)
    calls: list[dict] = []
    n_blocks, ended = 0, False
    while i < len(seq) and not ended:
        text, special = seq[i]
        if not special:
            if text.strip():
                note("stray_text", "text outside any block", text)
            i += 1
        elif text == eot:
            ended, i = True, i + 1
        elif fmt is not None and text == fmt.section_open:
            i, n_blocks = _parse_section(seq, i + 1, fmt, eot, calls, errors, n_blocks)
        else:
            note("unexpected_token", f"{text} in an assistant turn", text)
            i += 1
    if not ended:
        note("missing_end_of_turn", f"the turn does not end with {eot}")
    trailing = "".join(t for t, s in seq[i:] if not (s and t == pad))
    if trailing:
        note("trailing_text", f"output after {eot}", trailing)
    if calls:
        message["tool_calls"] = calls
    if errors:
        message["parse_errors"] = errors
    return message


def _parse_section(seq, i: int, fmt: ToolCallFormat, eot: str, calls: list, errors: list, n: int) -> tuple[int, int]:
    """The calls of one tool-call section from seq[i]; returns where parsing goes on and the blocks counted."""
    def error(kind: str, detail: str, raw: str) -> None:
        errors.append({"kind": kind, "detail": detail, "raw": raw, "call_index": n})

    while i < len(seq):
        text, special = seq[i]
        if special and text == fmt.section_close:
            return i + 1, n
        if special and text == eot:
            return i, n
        if not special and not text.strip():
            i += 1
        elif special and text == fmt.call_open:
            head, i = (seq[i + 1][0], i + 2) if i + 1 < len(seq) and not seq[i + 1][1] else ("", i + 1)
            args = None
            if i < len(seq) and seq[i] == (fmt.args_open, True):
                args, i = (seq[i + 1][0], i + 2) if i + 1 < len(seq) and not seq[i + 1][1] else ("", i + 1)
            if args is None or not (i < len(seq) and seq[i] == (fmt.call_close, True)):
                error("unterminated_tool_call", f"no {fmt.args_open} ... {fmt.call_close}", head + (args or ""))
            else:
                i += 1
                _add_call(head, args, fmt, n, calls, error)
            n += 1
        else:
            errors.append({"kind": "stray_text" if not special else "unexpected_token",
                           "detail": "inside a tool-call section", "raw": text, "call_index": None})
            i += 1
    return i, n


def _add_call(head: str, args: str, fmt: ToolCallFormat, index: int, calls: list, error) -> None:
    match = fmt.head.fullmatch(head)
    name = match.group(1) if match else ""
    if not name:
        return error("missing_name", "no function name", head)
    if not TOOL_NAME.fullmatch(name):
        return error("bad_name", f"name {name!r} does not match {TOOL_NAME.pattern}", head)
    try:
        decoded = json.loads(args)
    except (ValueError, RecursionError) as err:
        return error("bad_json", str(err)[:200], args)
    if not isinstance(decoded, dict):
        return error("bad_arguments", "arguments must be a JSON object", args)
    calls.append({"id": f"call_{index}", "type": "function", "function": {"name": name, "arguments": args.strip()}})


def copy_tokenizer_files(source: str | Path, directory: str | Path) -> list[str]:
    """Copy the tokenizer files a checkpoint directory holds into another; the names copied."""
    source, directory = Path(source), Path(directory)
    copied = []
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, directory / name)
            copied.append(name)
    return copied
