"""Supervised cold start: next-token loss on the assistant tokens of rendered conversations.

Shape legend: B = sequences per batch, T = longest sequence in the batch.
Conversations are OpenAI-format messages (environment demonstrations, JSONL or Parquet files such as a
run's rollouts, synthetic chats); they are rendered with the chat template, so the model learns exactly
the format rollouts parse.
"""
from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import torch
import torch.nn.functional as F

from jointrl.model.openings import forward_sharing_openings, opening_limits
from jointrl.model.tokenizer import JointTokenizer
from jointrl.model.transformer import ModelOutput, Transformer
from jointrl.rl.progress import datasets_quiet

LENGTH_WINDOW = 32  # batches per window that group_by_length sorts: wide enough to find look-alikes, small enough to stay shuffled


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
    # Read line by line rather than through datasets' JSON loader, whose errors name no line.
    conversations = []
    for line_no, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            conversations.append(_conversation(json.loads(line)))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{path}:{line_no}: not a conversation record ({err})") from err
    return conversations


def read_parquet(path: str | Path) -> list[Conversation]:
    """Conversations from a Parquet file with a messages column (tools, tier optional), e.g. a rollouts shard."""
    import datasets

    with datasets_quiet():
        table = datasets.Dataset.from_parquet(str(path))
    if "messages" not in table.column_names:
        raise ValueError(f"{path}: no 'messages' column (columns: {', '.join(table.column_names)})")
    conversations = []
    for row_no, record in enumerate(table):
        try:
            conversations.append(_conversation(record))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{path}: row {row_no}: not a conversation record ({err})") from err
    return conversations


def read_conversations(path: str | Path) -> list[Conversation]:
    """Conversations from a .jsonl or a .parquet file of OpenAI-format messages."""
    readers = {".jsonl": read_jsonl, ".parquet": read_parquet}
    suffix = Path(path).suffix
    if suffix not in readers:
        raise ValueError(f"{path}: SFT data must be a .jsonl or a .parquet file, got {suffix or 'no suffix'!r}")
    if not Path(path).is_file():
        raise ValueError(f"{path}: no such SFT data file")
    return readers[suffix](path)


def _without_nulls(value):
    # Parquet gives every struct the union of all rows' keys, absent ones as null; the chat format has no nulls.
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _conversation(record: dict) -> Conversation:
    messages = record["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise ValueError("messages must be a list of {role, content, ...} objects")
    # An assistant turn that only calls tools has content null, which the format keeps.
    messages = [{"content": m.get("content"), **_without_nulls(m)} for m in messages]
    tools = record.get("tools")
    if isinstance(tools, str):
        tools = json.loads(tools)  # rollouts store tools as JSON text: their schemas differ from row to row
    return Conversation(messages, _without_nulls(tools) or None, record.get("tier"))


def encode(tokenizer: JointTokenizer, conversations: Iterable[Conversation], max_len: int) -> list[tuple[list[int], list[int]]]:
    """Ids and generated-token masks, cut to max_len + 1 tokens (inputs plus the last target)."""
    examples = []
    for conv in conversations:
        ids, mask = tokenizer.render_with_mask(conv.messages, conv.tools, conv.tier)
        ids, mask = ids[: max_len + 1], mask[: max_len + 1]
        if sum(mask[1:]):
            examples.append((ids, mask))
    return examples


def batch_order(lengths: list[int], batch_size: int, seed: int, group_by_length: bool = False) -> list[list[int]]:
    """One epoch's batches as example indices: shuffled, or with group_by_length, of similar lengths.

    Batches are right-padded to their longest sequence, so a mix of 300- and 1,500-token demonstrations pads
    nearly every random batch to ~1,500 tokens. Grouping sorts each window of LENGTH_WINDOW batches by length
    before cutting it (the windows and the batches' order stay random), so a batch pads to its neighbours.
    """
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    if group_by_length:
        window = batch_size * LENGTH_WINDOW
        order = [i for start in range(0, len(order), window)
                 for i in sorted(order[start : start + window], key=lambda i: -lengths[i])]
    groups = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    if group_by_length:
        rng.shuffle(groups)
    return groups


def batches(examples: list[tuple[list[int], list[int]]], batch_size: int, pad_id: int, seed: int,
            group_by_length: bool = False) -> Iterator[SFTBatch]:
    """One epoch of right-padded batches, in batch_order."""
    for group in batch_order([len(ids) for ids, _ in examples], batch_size, seed, group_by_length):
        chunk = [examples[i] for i in group]
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


def sft_loss(model: Transformer, batch: SFTBatch, share_openings: bool = False) -> tuple[torch.Tensor, ModelOutput]:
    """Mean next-token loss over generated targets, and the forward's output (aux loss, expert load; no logits).

    share_openings: rows that open alike (an env's system prompt and tool schemas, up to their first target) run
    that opening once (`forward_sharing_openings`): the same loss and gradients for fewer tokens.
    """
    if share_openings:
        limits = opening_limits(batch.loss_mask > 0, batch.valid)
        out = forward_sharing_openings(model, batch.tokens, batch.valid, limits)
    else:
        out = model(batch.tokens, valid=batch.valid, return_logits=False)
    # Logits only where the loss counts: the generated tokens are a fraction of a demonstration (system prompt,
    # tool schemas and tool output are not), and the vocabulary projection and its softmax are a large share of a
    # small model's step.
    keep = batch.loss_mask > 0  # [B, T]
    nll = F.cross_entropy(model.head(out.hidden[keep]), batch.targets[keep], reduction="none")  # [N]
    return (nll * batch.loss_mask[keep]).sum() / batch.loss_mask.sum().clamp_min(1), out


def sft_steps(examples: int, batch_size: int, epochs: int) -> int:
    """How many optimizer steps train_sft takes."""
    return epochs * math.ceil(examples / batch_size)


def train_sft(
    model: Transformer,
    examples: list[tuple[list[int], list[int]]],
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    pad_id: int,
    seed: int = 0,
    group_by_length: bool = False,
    share_openings: bool = False,
    log: Callable[[int, dict[str, float]], None] | None = None,
    extra: Callable[[], SFTBatch] | None = None,
) -> list[float]:
    """AdamW with cosine decay over every batch of every epoch; returns the loss of each step.

    log(step, metrics) gets after each step its loss, the learning rate it used and tokens/s (every
    non-padding position of the batch, over the step's wall time).
    extra: a second batch for each step, whose loss is added to the step's (the drill's pairs during SFT); the
    metrics then hold it as extra_loss, and the returned losses stay the demonstrations' own.
    """
    if not examples:
        raise ValueError("train_sft got no training sequences")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    total = sft_steps(len(examples), batch_size, epochs)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / total)))
    model.train()
    losses = []
    for epoch in range(epochs):
        for batch in batches(examples, batch_size, pad_id, seed + epoch, group_by_length):
            started = time.perf_counter()
            step_lr = optimizer.param_groups[0]["lr"]
            loss, out = sft_loss(model, batch, share_openings)
            objective, load, tokens = loss + out.aux_loss, out.expert_load, float(batch.valid.sum())
            metrics = {}
            if extra is not None:
                second = extra()
                extra_loss, extra_out = sft_loss(model, second)
                objective = objective + extra_loss + extra_out.aux_loss
                if load is not None:
                    load = load + extra_out.expert_load
                tokens += float(second.valid.sum())
                metrics["extra_loss"] = extra_loss.item()
            optimizer.zero_grad(set_to_none=True)
            objective.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            model.update_router_biases(load)
            losses.append(loss.item())
            if log is not None:
                seconds = max(time.perf_counter() - started, 1e-9)
                log(len(losses), {"loss": losses[-1], "lr": step_lr, "tokens_per_s": tokens / seconds, **metrics})
    model.eval()
    return losses
