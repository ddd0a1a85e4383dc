"""Supervised cold start: next-token loss on the assistant tokens of rendered conversations.

Shape legend: B = sequences per batch, T = longest sequence in the batch.
Conversations are OpenAI-format messages (environment demonstrations, JSONL files, synthetic chats);
they are rendered with the chat template, so the model learns exactly the format rollouts parse.
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import torch
import torch.nn.functional as F

from jointrl.model.tokenizer import JointTokenizer
from jointrl.model.transformer import ModelOutput, Transformer


@dataclass
class Conversation:
    """One training example: messages, the tools offered, and the thinking tier."""

    messages: list[dict]
    tools: list[dict] | None = None
    tier: str | None = None
    source: str | None = None  # the env id a demonstration was played in


@dataclass
class SFTBatch:
    """Right-padded token batch; the loss counts only positions whose target the policy generates."""

    tokens: torch.Tensor  # [B, T] input ids (padding = pad id)
    targets: torch.Tensor  # [B, T] next ids
    loss_mask: torch.Tensor  # [B, T] 1.0 where the target is a policy-generated token
    valid: torch.Tensor  # [B, T] bool, False on padding


def read_jsonl(path: str | Path) -> list[Conversation]:
    """Conversations from a JSONL file, one {"messages", "tools"?, "tier"?} object per line."""
    conversations = []
    for line_no, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            conversations.append(Conversation(record["messages"], record.get("tools"), record.get("tier")))
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(f"{path}:{line_no}: not a conversation record ({err})") from err
    return conversations


def encode(tokenizer: JointTokenizer, conversations: Iterable[Conversation], max_len: int) -> list[tuple[list[int], list[int]]]:
    """Ids and generated-token masks, cut to max_len + 1 tokens (inputs plus the last target)."""
    examples = []
    for conv in conversations:
        ids, mask = tokenizer.render_with_mask(conv.messages, conv.tools, conv.tier)
        ids, mask = ids[: max_len + 1], mask[: max_len + 1]
        if sum(mask[1:]):
            examples.append((ids, mask))
    return examples


def batches(examples: list[tuple[list[int], list[int]]], batch_size: int, pad_id: int, seed: int) -> Iterator[SFTBatch]:
    """One shuffled epoch of right-padded batches."""
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    for start in range(0, len(order), batch_size):
        chunk = [examples[i] for i in order[start : start + batch_size]]
        width = max(len(ids) for ids, _ in chunk) - 1
        tokens = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        targets = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        loss_mask = torch.zeros(len(chunk), width)
        valid = torch.zeros(len(chunk), width, dtype=torch.bool)
        for row, (ids, mask) in enumerate(chunk):
            n = len(ids) - 1
            tokens[row, :n] = torch.tensor(ids[:-1])
            targets[row, :n] = torch.tensor(ids[1:])
            loss_mask[row, :n] = torch.tensor(mask[1:], dtype=torch.float32)
            valid[row, :n] = True
        yield SFTBatch(tokens, targets, loss_mask, valid)


def sft_loss(model: Transformer, batch: SFTBatch) -> tuple[torch.Tensor, ModelOutput]:
    """Mean next-token loss over generated targets, and the forward's output (aux loss, expert load)."""
    out = model(batch.tokens, valid=batch.valid)
    nll = F.cross_entropy(out.logits.flatten(0, 1), batch.targets.flatten(), reduction="none")  # [B*T]
    mask = batch.loss_mask.flatten()
    return (nll * mask).sum() / mask.sum().clamp_min(1), out


def train_sft(
    model: Transformer,
    examples: list[tuple[list[int], list[int]]],
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    pad_id: int,
    seed: int = 0,
    log: Callable[[int, float], None] | None = None,
) -> list[float]:
    """AdamW with cosine decay over every batch of every epoch; returns the loss of each step."""
    if not examples:
        raise ValueError("train_sft got no training sequences")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    total = epochs * math.ceil(len(examples) / batch_size)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / total)))
    model.train()
    losses = []
    for epoch in range(epochs):
        for batch in batches(examples, batch_size, pad_id, seed + epoch):
            loss, out = sft_loss(model, batch)
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

