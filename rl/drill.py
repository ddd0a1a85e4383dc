"""The copy drill: a mid-training stage before SFT that packs many (message -> reply) pairs per sequence.

Every agent family asks the policy to copy strings it was just shown (a file name and a word into a shell
command, a link out of search results, a figure out of a table) and a demonstration holds only a handful of
such copies among hundreds of tokens of fixed system prompt. Small models trained on whole demonstrations
learn the template and never the copy (docs/learning.md). The drill makes copy targets dense: it takes each
assistant turn that calls tools with the message it answers (user question or tool output), writes the
pair as plain text (the message, then the reply's tool-call arguments or content), packs `pack` random pairs
into one sequence and trains next-token loss on every token. The SFT that follows teaches the chat format.
"""
from __future__ import annotations

import math
import random
from typing import Callable, Iterable

import torch
import torch.nn.functional as F

from jointrl.model.transformer import Transformer
from jointrl.rl.sft import Conversation

PAIR_CHARS = 600  # a pair's message is cut to its last this many characters: long tool output would crowd the pack


DRILL_TURNS = ("calls", "tool", "all")


def drill_pairs(conversations: Iterable[Conversation], turns: str = "calls") -> list[str]:
    """One text per assistant turn: the message it answers, then what it wrote (tool-call arguments or content).

    turns picks the assistant turns: "calls", those that call tools (their arguments are where a policy copies
    what it was shown); "tool", also those that answer a tool's output (a figure copied out of it); "all", also
    answers to a user message (a short or computed answer, which dilutes the pack with guesses).
    """
    if turns not in DRILL_TURNS:
        raise ValueError(f"drill turns must be one of {', '.join(DRILL_TURNS)}, got {turns!r}")
    pairs = []
    for conv in conversations:
        question = ""
        for before, message in zip(conv.messages, conv.messages[1:]):
            if before.get("role") == "user":
                question = before.get("content") or ""
            if message.get("role") != "assistant" or before.get("role") not in ("user", "tool"):
                continue
            calls = [call["function"]["arguments"] for call in message.get("tool_calls") or []]
            if not calls and (turns == "calls" or (turns == "tool" and before["role"] != "tool")):
                continue
            reply = "\n".join(calls) if calls else (message.get("content") or "")
            prompt = (before.get("content") or "")[-PAIR_CHARS:]
            if before["role"] == "tool":
                # A later call copies from the question as well (a path the tool output does not show): keep it
                # in view, or the pair teaches writing a name that is nowhere before it.
                prompt = f"{question[-PAIR_CHARS:]}\n{prompt}"
            if reply.strip() and prompt.strip():
                pairs.append(f"{prompt}\n> {reply}\n")
    return pairs


def drill_batch(encoded: list[list[int]], pack: int, batch_size: int, max_len: int, pad_id: int,
                rng: random.Random, envs: list[list[int]] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of `pack` random pairs per row, cut to max_len + 1: (ids [B, T + 1], valid [B, T + 1]).

    envs (indices into encoded, one list per env id): each pair is drawn from an env id chosen uniformly, so an
    env with few tool turns is drilled as often as one with many; None draws distinct pairs uniformly.
    """
    rows = []
    for _ in range(batch_size):
        if envs is None:
            picked = rng.sample(encoded, min(pack, len(encoded)))
        else:
            picked = [encoded[rng.choice(rng.choice(envs))] for _ in range(pack)]
        ids = [token for pair in picked for token in pair]
        rows.append(ids[: max_len + 1])
    width = max(len(ids) for ids in rows)
    tokens = torch.full((batch_size, width), pad_id, dtype=torch.long)
    valid = torch.zeros(batch_size, width, dtype=torch.bool)
    for r, ids in enumerate(rows):
        tokens[r, : len(ids)] = torch.tensor(ids)
        valid[r, : len(ids)] = True
    return tokens, valid


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
) -> list[float]:
    """AdamW with cosine decay, next-token loss on every real token of packed pairs; the loss of each step.

    envs: the pairs of each env id (indices into encoded), to draw env ids uniformly (`drill_batch`).
    """
    if len(encoded) < 2:
        raise ValueError(f"the copy drill needs at least 2 (message -> reply) pairs, got {len(encoded)}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / steps)))
    rng = random.Random(seed)
    model.train()
    losses = []
    for _ in range(steps):
        tokens, valid = drill_batch(encoded, pack, batch_size, max_len, pad_id, rng, envs)
        out = model(tokens[:, :-1], valid=valid[:, :-1])
        nll = F.cross_entropy(out.logits.flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")  # [B*T]
        mask = valid[:, 1:].flatten().float()
        loss = (nll * mask).sum() / mask.sum()
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
