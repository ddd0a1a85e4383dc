"""Redrawn slots: which values count as slots, and that redrawing renames them alike in every message, and no more."""
from __future__ import annotations

import json
import random
import re

import pytest

from jointrl.rl.redraw import redraw, slots, template_runs
from jointrl.rl.sft import Conversation

SYSTEM = {"role": "system", "content": "You are in a shell. Files: radar.log, 12 of them."}


def _count(stem: str, ext: str, word: str, lines: int, source: str = "terminal/count") -> Conversation:
    command = json.dumps({"command": f"grep -c -- '{word}' '{stem}.{ext}'"})
    return Conversation([
        SYSTEM,
        {"role": "user", "content": f"How many lines of `{stem}.{ext}` contain the text `{word}`?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": command}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": f"{lines}\n[exit code 0]"},
        {"role": "assistant", "content": f"{lines}"},
    ], source=source)


def _prism(length: int, width: int, source: str = "cad/prism") -> Conversation:
    code = f"x1 = {width}\npart = prism([(0, 0), (x1, 0), (x1, 1)], {length})\nsave(part)\n"
    return Conversation([
        {"role": "user", "content": f"Extrude from x = 0 to x = {length} the triangle (0, 0), ({width}, 0), "
                                    f"({width}, 1)."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_0", "type": "function",
             "function": {"name": "run", "arguments": json.dumps({"code": code})}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": f"saved: length {length}"},
    ], source=source)


COUNTS = [_count("radar", "log", "bridge", 82), _count("harbor", "txt", "melody", 5),
          _count("switch", "md", "tomato", 17), _count("pillow", "log", "lemon", 3)]
PRISMS = [_prism(130, 42), _prism(85, 1), _prism(170, 40)]


def test_a_slot_is_a_value_the_question_and_a_call_share_that_most_of_the_env_ids_questions_lack():
    templates = template_runs(COUNTS + PRISMS)
    # In all four count questions, or all three prism questions: template. "log" is in two of four, half: template.
    assert templates["terminal/count"] == {"How", "many", "lines", "of", "contain", "the", "text", "log"}
    assert templates["cad/prism"] == {"Extrude", "from", "x", "to", "0", "the", "triangle", "1"}
    assert slots(COUNTS[0], templates["terminal/count"]) == {"radar", "bridge"}
    assert slots(COUNTS[1], templates["terminal/count"]) == {"harbor", "txt", "melody"}
    # 1 is also in `x1`'s name, but an identifier is one run; the width 1 of the second prism is template here.
    assert slots(PRISMS[0], templates["cad/prism"]) == {"130", "42"}
    assert slots(PRISMS[1], templates["cad/prism"]) == {"85"}


def _runs_and_rest(text: str) -> tuple[list[str], list[str]]:
    pattern = re.compile(r"[A-Za-z_]\w*|\d+")
    return pattern.findall(text), pattern.split(text)


def _texts(conv: Conversation) -> list[str]:
    """Every text of a conversation but its system prompt, tool-call arguments parsed, in order."""
    out = []
    for message in conv.messages:
        if message["role"] == "system":
            continue
        out.append(message.get("content") or "")
        out += [json.loads(call["function"]["arguments"])[key] for call in message.get("tool_calls") or []
                for key in ("command", "code") if key in json.loads(call["function"]["arguments"])]
    return out


@pytest.mark.parametrize("kinds", [("number", "name"), ("number",), ("name",)])
def test_redrawing_renames_each_slot_one_way_in_every_message_and_leaves_all_else(kinds):
    conversations = COUNTS + PRISMS
    templates = template_runs(conversations)
    values = {run for conv in conversations for run in slots(conv, templates[conv.source])}
    out = redraw(conversations, 1.0, random.Random(3), kinds)
    for before, after in zip(conversations, out):
        # Every slot of a count is a name and every slot of a prism a number: a conversation whose slots are all of
        # another kind comes back as it was.
        if ("name" if before.source == "terminal/count" else "number") not in kinds:
            assert after is before
            continue
        assert after is not before and after.source == before.source
        assert [m for m in after.messages if m["role"] == "system"] == [m for m in before.messages
                                                                         if m["role"] == "system"]
        wanted = slots(before, templates[before.source])
        renamed: dict[str, str] = {}
        for old_text, new_text in zip(_texts(before), _texts(after), strict=True):
            old_runs, old_rest = _runs_and_rest(old_text)
            new_runs, new_rest = _runs_and_rest(new_text)
            assert old_rest == new_rest, "text between the runs changed"
            for old, new in zip(old_runs, new_runs, strict=True):
                if old not in wanted:
                    assert new == old, f"{old!r} is no slot but became {new!r}"
                else:
                    assert renamed.setdefault(old, new) == new, f"{old!r} renamed two ways"
        assert set(renamed) == wanted, "a slot kept its value"  # every slot here has a free value to take
        assert len(set(renamed.values())) == len(renamed), "two slots share a value"
        seen = set(_runs_and_rest(" ".join(_texts(before)))[0])
        assert not set(renamed.values()) & seen, "a slot took a value the conversation already holds"
        for old, new in renamed.items():
            assert new != old and new in values, "a slot takes another slot's value"
            assert new.isdigit() == old.isdigit(), "a number takes a number, a name a name"
        for message in after.messages:  # the arguments are still one JSON object
            for call in message.get("tool_calls") or []:
                assert isinstance(json.loads(call["function"]["arguments"]), dict)


def test_share_picks_which_conversations_are_redrawn_and_none_leaves_them_untouched():
    conversations = [_count(f"stem{i}", ["log", "txt", "md"][i % 3], f"word{i}", i) for i in range(200)]
    assert all(a is b for a, b in zip(redraw(conversations, 0.0, random.Random(0)), conversations))
    changed = sum(a is not b for a, b in zip(redraw(conversations, 0.5, random.Random(0)), conversations))
    assert 70 < changed < 130  # 200 draws at one half: 100 +- 7 is one standard deviation
    # A conversation with no slot (a lone demonstration is all template) comes back as it was.
    [alone] = redraw([COUNTS[0]], 1.0, random.Random(0))
    assert alone is COUNTS[0]


def test_arguments_that_are_not_json_are_renamed_as_text():
    plain = [Conversation([
        {"role": "user", "content": f"Show `{name}.txt`."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": f"cat {name}.txt"}}]},
    ], source="terminal/show") for name in ("radar", "harbor", "switch")]
    out = redraw(plain, 1.0, random.Random(0))
    for before, after in zip(plain, out):
        name = before.messages[0]["content"][len("Show `"):-len(".txt`.")]
        new = after.messages[0]["content"][len("Show `"):-len(".txt`.")]
        assert new != name and new in {"radar", "harbor", "switch"}
        assert after.messages[1]["tool_calls"][0]["function"]["arguments"] == f"cat {new}.txt"


def test_one_kind_redrawn_leaves_the_other_kinds_slots_as_they_were():
    def head(n: int, stem: str) -> Conversation:
        command = json.dumps({"command": f"head -n {n} '{stem}.log'"})
        return Conversation([
            {"role": "user", "content": f"Print the first {n} lines of `{stem}.log`."},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": command}}]},
        ], source="terminal/head")
    conversations = [head(n, stem) for n, stem in [(3, "radar"), (7, "harbor"), (12, "switch"), (40, "pillow")]]
    question = re.compile(r"Print the first (\d+) lines of `(\w+)\.log`\.")
    for kinds, moved in [(("number",), 0), (("name",), 1)]:
        for before, after in zip(conversations, redraw(conversations, 1.0, random.Random(5), kinds)):
            old = question.fullmatch(before.messages[0]["content"]).groups()  # (lines, stem)
            new = question.fullmatch(after.messages[0]["content"]).groups()
            assert new[moved] != old[moved], f"{kinds}: the slot of that kind kept its value"
            assert new[1 - moved] == old[1 - moved], f"{kinds}: a slot of the other kind was redrawn"
            command = json.loads(after.messages[1]["tool_calls"][0]["function"]["arguments"])["command"]
            assert command == f"head -n {new[0]} '{new[1]}.log'"
