"""Redrawn slots: demonstrations whose copied values are swapped for others, so that a guess no longer predicts them.

A family's tool call copies a few values out of the task (a file name, a length), and the env draws each from a small
set: three file extensions, a range of lengths. A policy that guesses from that set gets part of the drill's loss
without looking back, and on some seeds the copy of one slot never formed (docs/learning.md, sessions 29 and 34).
Redrawing a demonstration's slots from a wider set, the same way in every message, leaves the copy the one way to
predict them.

A slot is a name or a number that the task's question and a tool call's arguments share and that fewer
than half of its env id's questions contain: the words and numbers every task repeats are the template, and stay.
"""
from __future__ import annotations

import json
import random
import re
from collections import Counter
from typing import Callable, Iterable

from jointrl.rl.sft import Conversation

# The units a slot is made of: a file name splits at its dots, a tuple at its commas; an identifier (x1) is one run,
# so a program's variable names never take a slot's value.
RUN = re.compile(r"[A-Za-z_]\w*|\d+")
TEMPLATE_SHARE = 0.5  # a run in at least this share of an env id's questions is template, not a slot
KINDS = ("number", "name")


def kind(run: str) -> str:
    """A run's kind: "number" (digits) or "name"."""
    return "number" if run.isdigit() else "name"


def question(conv: Conversation) -> str:
    """The first user message's text ("" without one)."""
    return next((m.get("content") or "" for m in conv.messages if m.get("role") == "user"), "")


def call_arguments(conv: Conversation) -> str:
    """Every tool call's arguments, parsed, as one text (JSON escapes such as \\n are not runs of the text)."""
    texts: list[str] = []
    for message in conv.messages:
        for call in message.get("tool_calls") or []:
            _map_strings(_parsed(call["function"]["arguments"]), lambda text: texts.append(text) or text)
    return "\n".join(texts)


def _parsed(arguments: str):
    """A call's arguments parsed; the text itself where it is not JSON (a conversation file's own calls may not be)."""
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


def _map_strings(value, change: Callable[[str], str]):
    """A parsed JSON value with change applied to every string in it."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {key: _map_strings(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [_map_strings(item, change) for item in value]
    return value


def template_runs(conversations: Iterable[Conversation]) -> dict[str | None, set[str]]:
    """Each env id's template: the runs in at least TEMPLATE_SHARE of its conversations' questions."""
    counts: dict[str | None, Counter] = {}
    sizes: Counter = Counter()
    for conv in conversations:
        counts.setdefault(conv.source, Counter()).update(set(RUN.findall(question(conv))))
        sizes[conv.source] += 1
    return {source: {run for run, n in counted.items() if n >= TEMPLATE_SHARE * sizes[source]}
            for source, counted in counts.items()}


def slots(conv: Conversation, template: set[str]) -> set[str]:
    """The runs a conversation copies from its question into a tool call, less its env id's template."""
    return (set(RUN.findall(question(conv))) & set(RUN.findall(call_arguments(conv)))) - template


def redraw(conversations: list[Conversation], share: float, rng: random.Random,
           kinds: Iterable[str] = KINDS) -> list[Conversation]:
    """The conversations, `share` of them (those with slots of `kinds`, drawn by rng) with every such slot redrawn in
    every message.

    A slot takes the value of another conversation's slot of its kind (number or name), from any env id, each distinct
    value alike likely: a value the env draws is one the tokenizer was fitted on, where a random three-digit number
    is two tokens for most of them (docs/learning.md, session 35). Distinct slots stay distinct.
    """
    templates = template_runs(conversations)
    kinds = set(kinds)
    found = [{run for run in slots(conv, templates[conv.source]) if kind(run) in kinds} for conv in conversations]
    values = {run for runs in found for run in runs}
    pools = {k: sorted(v for v in values if kind(v) == k) for k in KINDS}
    out = []
    for conv, runs in zip(conversations, found):
        if not runs or rng.random() >= share:
            out.append(conv)
            continue
        held = set(RUN.findall(question(conv))) | set(RUN.findall(call_arguments(conv)))
        out.append(_renamed(conv, _mapping(sorted(runs), held, pools, rng)))
    return out


def _mapping(runs: list[str], held: set[str], pools: dict[str, list[str]],
             rng: random.Random) -> dict[str, str]:
    """Each run to a value of its kind's pool (numbers, names) that no other run maps to and that the conversation
    does not hold already (held); a run with no such value after 100 draws keeps its own."""
    taken = set(held)
    mapping = {}
    for run in runs:
        pool = pools[kind(run)]
        for _ in range(100):
            new = rng.choice(pool)
            if new not in taken:
                taken.add(new)
                mapping[run] = new
                break
    return mapping


def _renamed(conv: Conversation, mapping: dict[str, str]) -> Conversation:
    """The conversation with each run in mapping replaced in every message but the system prompt."""
    def swap(text: str) -> str:
        return RUN.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)

    messages = []
    for message in conv.messages:
        if message.get("role") == "system":
            messages.append(message)
            continue
        message = dict(message)
        for key in ("content", "reasoning_content"):
            if isinstance(message.get(key), str):
                message[key] = swap(message[key])
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {**call, "function": {**call["function"], "arguments": _renamed_arguments(
                    call["function"]["arguments"], swap)}}
                for call in message["tool_calls"]]
        messages.append(message)
    return Conversation(messages, conv.tools, conv.tier, source=conv.source)


def _renamed_arguments(arguments: str, swap: Callable[[str], str]) -> str:
    """A call's arguments with swap applied to each string in them, still JSON; text that is not JSON as text."""
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return swap(arguments)
    return json.dumps(_map_strings(parsed, swap))
