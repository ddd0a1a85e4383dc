"""A generated turn, token by token, as the deltas a stream sends: reasoning text, content text, whole tool calls.

The chat format's markers are single special tokens, so the section a token belongs to is known the moment it
is sampled: after `<think>` it is reasoning, before the first `<tool_call>` it is content, between
`<tool_call>` and `</tool_call>` it is a call's body (sent whole once it closes, and only if it parses: the
rule the final message follows too), and text between calls or after `<|eot|>` is not shown. Text is decoded
per run of tokens and sent once its characters are complete (a multi-byte character may span tokens).

Stop strings apply to the content: content that could still turn into a stop string is held back until it
cannot, and a completed stop string ends the turn with the content before it, as OpenAI's `stop` does.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from jointrl.model import chat
from jointrl.model.tokenizer import JointTokenizer


@dataclass
class Delta:
    """What one token added: reasoning text, content text, or a tool call that just closed."""

    reasoning: str = ""
    content: str = ""
    tool_call: dict | None = None

    def __bool__(self) -> bool:
        return bool(self.reasoning or self.content or self.tool_call)


@dataclass
class TurnText:
    """Follows one generated turn; `push(token)` returns what the client has not seen yet."""

    tokenizer: JointTokenizer
    stops: list[str] = field(default_factory=list)
    section: str = "start"  # "start" | "reasoning" | "content" | "call" | "between" | "ended"
    run: list[int] = field(default_factory=list)  # text tokens of the current run
    run_text: str = ""  # decoded text of `run` already accounted for
    content: str = ""  # the whole content decoded so far
    shown: int = 0  # characters of `content` sent
    calls: int = 0  # tool-call blocks closed, parsed or not
    stopped: bool = False  # a stop string completed: the turn is over
    reasoning: str | None = None  # the think block's text, None when the turn opened none
    reasoning_tokens: int = 0
    tool_calls: list[dict] = field(default_factory=list)  # the calls that parsed, in order
    call_prefix: str = field(default_factory=lambda: uuid.uuid4().hex[:12])  # makes call ids unique across turns

    def __post_init__(self):
        ids = self.tokenizer.special_ids
        self.marks = {ids[chat.THINK_OPEN]: "think", ids[chat.THINK_CLOSE]: "unthink", ids[chat.CALL_OPEN]: "call",
                      ids[chat.CALL_CLOSE]: "uncall", ids[chat.EOT]: "eot", ids[chat.EOS]: "eot"}

    def push(self, token: int) -> Delta:
        """Account for one sampled token."""
        if self.stopped or self.section == "ended":
            return Delta()
        mark = self.marks.get(token, "other" if self.tokenizer.is_special(token) else None)
        if mark is None:
            if self.section == "start":
                self.section = "content"
            self.reasoning_tokens += self.section == "reasoning"
            self.run.append(token)
            return self._grow(final=False)
        delta = self._grow(final=True)
        if self.section == "content":
            delta.content += self._release()
        # Any marker ends the text run before it; one the format does not expect there ends the content too.
        if mark == "think" and self.section == "start":
            self.section, self.reasoning = "reasoning", ""
        elif mark == "unthink" and self.section == "reasoning":
            self.section = "content"
        elif mark == "call" and self.section in ("start", "content", "between"):
            self.section = "call"
        elif mark == "uncall" and self.section == "call":
            call, error = chat._parse_call(self.tokenizer.decode(self.run), self.calls)
            if call is not None:
                call["id"] = f"call_{self.call_prefix}_{len(self.tool_calls)}"
            self.calls += 1
            delta.tool_call = call if error is None else None
            self.tool_calls += [call] if error is None else []
            self.section = "between"
        elif mark == "eot":
            self.section = "ended"
        else:
            self.section = "between"
        self.run, self.run_text = [], ""
        return delta

    def finish(self) -> Delta:
        """What is still held back when the turn ends without a marker (length limit)."""
        delta = self._grow(final=True)
        if self.section == "content":
            delta.content += self._release()
        return delta

    def _grow(self, final: bool) -> Delta:
        if self.section not in ("reasoning", "content"):
            return Delta()
        text = self.tokenizer.decode(self.run)
        if not final:
            text = text.rstrip("\ufffd")  # an incomplete multi-byte character waits for its next token
        new = text[len(self.run_text):] if text.startswith(self.run_text) else ""
        self.run_text += new
        if self.section == "reasoning":
            self.reasoning += new
            return Delta(reasoning=new)
        self.content += new
        return Delta(content=self._visible())

    def _visible(self) -> str:
        """Content that no stop string can still claim; ends the turn when one completes."""
        longest = max((len(s) for s in self.stops), default=0)
        start = max(0, self.shown - longest + 1)
        found = [at for at in (self.content.find(s, start) for s in self.stops) if at != -1]
        if found:
            self.stopped = True
            self.content = self.content[:min(found)]
            return self._release()
        hold = max((k for s in self.stops for k in range(1, len(s)) if self.content.endswith(s[:k])), default=0)
        out = self.content[self.shown:len(self.content) - hold]
        self.shown += len(out)
        return out

    def _release(self) -> str:
        out = self.content[self.shown:]
        self.shown = len(self.content)
        return out
