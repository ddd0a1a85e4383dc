"""The copy drill: a mid-training stage before SFT that packs many (message -> reply) pairs per sequence.

Every agent family asks the policy to copy strings it was just shown (a file name and a word into a shell
command, a link out of search results, a figure out of a table) and a demonstration holds only a handful of
such copies among hundreds of tokens of fixed system prompt. Small models trained on whole demonstrations
learn the template and never the copy (docs/learning.md). The drill makes copy targets dense: it takes each
assistant turn that calls tools with the message it answers (user question or tool output), writes the
pair as plain text (the message, then the reply's tool-call arguments or content; `chat_pairs`: as the chat
template renders the turn and what it answers, which copied less on one seed, docs/learning.md), packs `pack`
random pairs into one sequence and trains next-token loss on every token, or on the replies' only (`drill_loss:
reply`: a message of random numbers is noise to predict, and counting it slowed the copy of a list,
docs/learning.md). The SFT that follows teaches the chat format.

Before the drill, an optional span stage (`train_spans`) teaches the copy itself: each segment is a message the
policy reads, an arrow, and a random span of that message written again, with loss only on the span's tokens after
its first. Nothing but a look back into the message predicts them, so the only way down is the induction that
finds the span's first token in the message and copies what follows: the copy a coined name (`Dridou Compass`)
needs, which the drill's few names among many template tokens did not teach (docs/learning.md).
"""
from __future__ import annotations

import math
import random
from typing import Callable, Iterable, Iterator

import torch

from jointrl.model.transformer import Transformer
from jointrl.rl.sft import Conversation, SFTBatch, sft_loss

PAIR_CHARS = 600  # a pair's message is cut to its last this many characters: long tool output would crowd the pack


DRILL_TURNS = ("calls", "tool", "all")
DRILL_FORMATS = ("text", "chat")
SPAN_TOKENS = (3, 12)  # shortest and longest copied span: a name, a path, a figure with its label
ARROW = "\n> "


def _picked_turns(conv: Conversation, turns: str) -> Iterator[tuple[int, int | None]]:
    """(index of each assistant turn the drill pairs, index of the user question before it or None)."""
    if turns not in DRILL_TURNS:
        raise ValueError(f"drill turns must be one of {', '.join(DRILL_TURNS)}, got {turns!r}")
    question = None
    for index, (before, message) in enumerate(zip(conv.messages, conv.messages[1:]), start=1):
        if before.get("role") == "user":
            question = index - 1
        if message.get("role") != "assistant" or before.get("role") not in ("user", "tool"):
            continue
        if not message.get("tool_calls") and (turns == "calls" or (turns == "tool" and before["role"] != "tool")):
            continue
        yield index, question


def drill_pairs(conversations: Iterable[Conversation], turns: str = "calls") -> list[str]:
    """One text per assistant turn: the message it answers, then what it wrote (tool-call arguments or content).

    turns picks the assistant turns: "calls", those that call tools (their arguments are where a policy copies
    what it was shown); "tool", also those that answer a tool's output (a figure copied out of it); "all", also
    answers to a user message (a short or computed answer, which dilutes the pack with guesses).
    """
    pairs = []
    for conv in conversations:
        for index, asked in _picked_turns(conv, turns):
            before, message = conv.messages[index - 1], conv.messages[index]
            question = (conv.messages[asked].get("content") or "") if asked is not None else ""
            calls = [call["function"]["arguments"] for call in message.get("tool_calls") or []]
            reply = "\n".join(calls) if calls else (message.get("content") or "")
            prompt = (before.get("content") or "")[-PAIR_CHARS:]
            if before["role"] == "tool":
                # A later call copies from the question as well (a path the tool output does not show): keep it
                # in view, or the pair teaches writing a name that is nowhere before it.
                prompt = f"{question[-PAIR_CHARS:]}\n{prompt}"
            if reply.strip() and prompt.strip():
                pairs.append(f"{prompt}\n> {reply}\n")
    return pairs


def chat_pairs(conversations: Iterable[Conversation], turns: str = "calls") -> list[Conversation]:
    """The turns `drill_pairs` picks, each as a short conversation in the chat format: the messages from the question
    up to and including the turn, read messages cut to their last PAIR_CHARS, no system prompt and no tool schemas."""
    pairs = []
    for conv in conversations:
        for index, asked in _picked_turns(conv, turns):
            before, message = conv.messages[index - 1], conv.messages[index]
            question = (conv.messages[asked].get("content") or "") if asked is not None else ""
            # The turns drill_pairs leaves out: one that says nothing, or answers nothing.
            said = message.get("tool_calls") or (message.get("content") or "").strip()
            heard = (before.get("content") or "").strip() or (before["role"] == "tool" and question.strip())
            if not (said and heard):
                continue
            shown = conv.messages[(index - 1 if asked is None else asked): index]
            shown = [{**m, "content": m["content"][-PAIR_CHARS:]} if m.get("role") in ("user", "tool")
                     and isinstance(m.get("content"), str) else m for m in shown]
            pairs.append(Conversation([*shown, message], None, conv.tier, source=conv.source))
    return pairs


def encode_pairs(tokenizer, conversations: Iterable[Conversation], turns: str, form: str,
                 with_starts: bool = True) -> list[tuple[list[int], int | None]]:
    """Each drill pair as (ids, where its reply begins, or None without with_starts): plain text (`drill_pairs`), or
    the chat template's rendering (`chat_pairs`), whose reply is the last turn's generated tokens."""
    if form not in DRILL_FORMATS:
        raise ValueError(f"drill format must be one of {', '.join(DRILL_FORMATS)}, got {form!r}")
    encoded: list[tuple[list[int], int | None]] = []
    if form == "text":
        for pair in drill_pairs(conversations, turns):
            ids = tokenizer.encode(pair)
            encoded.append((ids, reply_start(pair, ids, tokenizer.decode) if with_starts else None))
        return encoded
    for pair in chat_pairs(conversations, turns):
        ids, mask = tokenizer.render_with_mask(pair.messages, None, pair.tier)
        start = len(mask)
        while start > 0 and not mask[start - 1]:  # past anything the template closes the turn with
            start -= 1
        while start > 0 and mask[start - 1]:  # back to the first token of the last generated run
            start -= 1
        if start < len(mask):
            encoded.append((ids, start if with_starts else None))
    return encoded


def reply_start(pair: str, ids: list[int], decode: Callable[[list[int]], str]) -> int:
    """Index of the first token of a drill pair's reply in its ids: the first past the message and its arrow."""
    # The arrow's space joins the reply's first token; a message holding an arrow of its own counts from there.
    cut = pair.index(ARROW) + len(ARROW.rstrip())
    low, high = 0, len(ids)
    while low < high:  # the fewest leading tokens that decode to the message and "\n>"
        middle = (low + high) // 2
        if len(decode(ids[:middle])) >= cut:
            high = middle
        else:
            low = middle + 1
    return low


def drill_batch(encoded: list[list[int]], pack: int, batch_size: int, max_len: int, pad_id: int,
                rng: random.Random, envs: list[list[int]] | None = None,
                starts: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of `pack` random pairs per row, cut to max_len + 1: (ids, valid, counted), each [B, T + 1].

    envs (indices into encoded, one list per env id): each pair is drawn from an env id chosen uniformly, so an
    env with few tool turns is drilled as often as one with many; None draws distinct pairs uniformly.
    starts (each pair's `reply_start`): counted marks the replies' tokens only; None counts every real token.
    """
    rows, marks = [], []
    for _ in range(batch_size):
        if envs is None:
            picked = rng.sample(range(len(encoded)), min(pack, len(encoded)))
        else:
            picked = [rng.choice(rng.choice(envs)) for _ in range(pack)]
        rows.append([token for i in picked for token in encoded[i]][: max_len + 1])
        if starts is not None:
            marks.append([t >= starts[i] for i in picked for t in range(len(encoded[i]))][: max_len + 1])
    width = max(len(ids) for ids in rows)
    tokens = torch.full((batch_size, width), pad_id, dtype=torch.long)
    valid = torch.zeros(batch_size, width, dtype=torch.bool)
    for r, ids in enumerate(rows):
        tokens[r, : len(ids)] = torch.tensor(ids)
        valid[r, : len(ids)] = True
    if starts is None:
        return tokens, valid, valid
    counted = torch.zeros(batch_size, width, dtype=torch.bool)
    for r, marked in enumerate(marks):
        counted[r, : len(marked)] = torch.tensor(marked)
    return tokens, valid, counted


def read_messages(conversations: Iterable[Conversation]) -> list[str]:
    """The text of every message the policy reads (user questions and tool output), each cut to its last PAIR_CHARS."""
    return [message["content"][-PAIR_CHARS:] for conv in conversations for message in conv.messages
            if message.get("role") in ("user", "tool") and (message.get("content") or "").strip()]


def span_batch(messages: list[list[int]], arrow: list[int], end: list[int], batch_size: int, max_len: int,
               rng: random.Random) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows of (message, arrow, a random span of it, end) segments cut to max_len + 1: (ids, valid, counted), each
    [B, T + 1]; counted marks the span's tokens after its first (where the start was picked is not predictable).
    Segments fill every row past max_len, so no row is padded."""
    # A message keeps its last tokens so that a whole segment fits a row: every row then counts some copies.
    room = max(1, max_len + 1 - len(arrow) - SPAN_TOKENS[1] - len(end))
    rows, marks = [], []
    for _ in range(batch_size):
        ids: list[int] = []
        counted: list[bool] = []
        while len(ids) < max_len + 1:
            message = rng.choice(messages)[-room:]
            length = min(rng.randint(*SPAN_TOKENS), len(message))
            start = rng.randrange(len(message) - length + 1)
            span = message[start: start + length]
            ids += message + arrow + span + end
            counted += [False] * (len(message) + len(arrow) + 1) + [True] * (length - 1) + [False] * len(end)
        rows.append(ids[: max_len + 1])
        marks.append(counted[: max_len + 1])
    tokens = torch.tensor(rows)
    return tokens, torch.ones_like(tokens, dtype=torch.bool), torch.tensor(marks)


def as_sft_batch(tokens: torch.Tensor, valid: torch.Tensor, counted: torch.Tensor) -> SFTBatch:
    """A packed batch (ids, valid, counted; each [B, T + 1]) as SFT's inputs, targets and loss mask."""
    return SFTBatch(tokens[:, :-1], tokens[:, 1:], counted[:, 1:].float(), valid[:, :-1])


def train_packed(model: Transformer, next_batch: Callable[[], tuple[torch.Tensor, torch.Tensor, torch.Tensor]], *,
                 steps: int, lr: float, log: Callable[[int, float], None] | None = None) -> list[float]:
    """AdamW with cosine decay, next-token loss where the batch counts a target; the loss of each step.

    next_batch() gives (ids [B, T + 1], valid [B, T + 1], counted [B, T + 1]): position t + 1's token is a target of
    the loss when counted[t + 1].
    """
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / steps)))
    model.train()
    losses = []
    for _ in range(steps):
        tokens, valid, counted = next_batch()
        # SFT's loss projects only the counted positions onto the vocabulary, and a reply-only drill counts a minority.
        loss, out = sft_loss(model, as_sft_batch(tokens, valid, counted))
        optimizer.zero_grad(set_to_none=True)
        (loss + out.aux_loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        model.update_router_biases(out.expert_load)
        losses.append(loss.item())
        if log is not None:
            log(len(losses), losses[-1])
    model.eval()
    return losses


def train_drill(
    model: Transformer,
    encoded: list[list[int]],
    *,
    steps: int,
    lr: float,
    batch_size: int,
    pack: int,
    max_len: int,
    pad_id: int,
    seed: int = 0,
    log: Callable[[int, float], None] | None = None,
    envs: list[list[int]] | None = None,
    starts: list[int] | None = None,
) -> list[float]:
    """The drill: next-token loss on packed pairs' real tokens (their replies' with starts); the loss of each step.

    envs: the pairs of each env id (indices into encoded), to draw env ids uniformly (`drill_batch`).
    """
    next_batch = drill_batches(encoded, pack=pack, batch_size=batch_size, max_len=max_len, pad_id=pad_id, seed=seed,
                               envs=envs, starts=starts)
    return train_packed(model, next_batch, steps=steps, lr=lr, log=log)


def drill_batches(encoded: list[list[int]], *, pack: int, batch_size: int, max_len: int, pad_id: int, seed: int,
                  envs: list[list[int]] | None = None, starts: list[int] | None = None,
                  ) -> Callable[[], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """An endless source of `drill_batch`es drawn from one seeded generator."""
    if len(encoded) < 2:
        raise ValueError(f"the copy drill needs at least 2 (message -> reply) pairs, got {len(encoded)}")
    rng = random.Random(seed)
    return lambda: drill_batch(encoded, pack, batch_size, max_len, pad_id, rng, envs, starts)


def train_spans(model: Transformer, messages: list[list[int]], arrow: list[int], end: list[int], *, steps: int,
                lr: float, batch_size: int, max_len: int, seed: int = 0,
                log: Callable[[int, float], None] | None = None) -> list[float]:
    """The span stage: loss on spans copied out of the messages before them (`span_batch`); the loss of each step."""
    messages = [m for m in messages if len(m) >= SPAN_TOKENS[0]]
    if not messages:
        raise ValueError(f"the span stage needs messages of at least {SPAN_TOKENS[0]} tokens, got none")
    rng = random.Random(seed)
    return train_packed(model, lambda: span_batch(messages, arrow, end, batch_size, max_len, rng),
                        steps=steps, lr=lr, log=log)
