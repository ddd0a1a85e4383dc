"""The cold start's copy check: how many unseen demonstrations the policy reproduces token for token.

A demonstration is reproduced when, fed the demo under teacher forcing, the policy's most likely next token is the
demo's own at every generated position. Each agent family's program or command holds numbers and names copied out
of the task, and a cold start forms that copy per family, on some seeds and not others (docs/learning.md). The
reproduced fraction on a few dozen demos per env id followed each family's held-out pass rate across cold starts,
and takes seconds where an evaluation takes minutes; the demos come from train seeds that SFT and the drill did not
use, so judging a cold start by them leaves the held-out seeds untouched. The same check on the demos' drill pairs
(each message, then the reply written out; `check_pairs`) follows each family's copy through the drill, whose one
loss for the mix hides a family that lags. Where a family's copy fails it has failed at one slot whose value the
policy guesses from a prior (a prism's length, a file's extension; docs/learning.md, sessions 29 and 34), so the
check of whole demos also names the first wrong token of a few examples, in context, and counts each example's
wrong tokens.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table

from jointrl.model.transformer import Transformer
from jointrl.rl.sft import Conversation, encode


@dataclass
class CopyCheck:
    """One env id's check over its examples' generated (or reply) tokens."""

    env_id: str
    examples: int  # demos or drill pairs checked
    # None when no example has a generated token within the length checked.
    loss: float | None  # mean next-token loss
    token_accuracy: float | None  # fraction whose most likely token is the example's
    reproduced: float | None  # fraction of examples with every generated token the most likely one
    wrong_tokens: list[int] = field(default_factory=list)  # per example: generated tokens not the most likely one
    misses: list[dict[str, str]] = field(default_factory=list)  # first wrong token of the first examples that miss


MISSES_SHOWN = 3
CONTEXT_TOKENS = 12  # tokens of text before a miss: enough to name the slot (`prism(profile, `)


@torch.no_grad()
def check_rows(model: Transformer, env_id: str, rows: list[tuple[list[int], list[bool]]],
               decode: Callable[[list[int]], str] | None = None) -> CopyCheck:
    """The check over rows of (ids, mask): mask[t] marks ids[t] as a generated token the policy must reproduce.

    With `decode`, the first wrong token of the first MISSES_SHOWN examples that miss is kept as text, in context.
    """
    was_training = model.training
    model.eval()
    nll, tokens = 0.0, 0
    wrong_tokens, misses = [], []
    rows = [(ids, mask) for ids, mask in rows if any(mask[1:])]
    for ids, mask in rows:
        row = torch.tensor(ids)
        generated = torch.tensor(mask[1:], dtype=torch.bool)  # [T]: is position t + 1 a generated token
        hidden = model(row[None, :-1], return_logits=False).hidden[0]  # [T, D]
        logits = model.head(hidden[generated]).float()  # [N, V]
        targets = row[1:][generated]  # [N]
        nll += F.cross_entropy(logits, targets, reduction="sum").item()
        predicted = logits.argmax(-1)  # [N]
        right = predicted == targets
        tokens += len(targets)
        wrong_tokens.append(int((~right).sum()))
        if decode is not None and wrong_tokens[-1] and len(misses) < MISSES_SHOWN:
            first = int((~right).nonzero()[0])
            at = int(generated.nonzero()[first]) + 1  # the wrong token's index in ids
            misses.append({"context": decode(ids[max(0, at - CONTEXT_TOKENS):at]), "want": decode([ids[at]]),
                           "got": decode([int(predicted[first])])})
    model.train(was_training)
    if not rows:
        return CopyCheck(env_id, 0, None, None, None)
    hits = tokens - sum(wrong_tokens)
    reproduced = wrong_tokens.count(0) / len(rows)
    return CopyCheck(env_id, len(rows), nll / tokens, hits / tokens, reproduced, wrong_tokens, misses)


def check_demos(model: Transformer, tokenizer, demos: dict[str, list[Conversation]], max_len: int) -> list[CopyCheck]:
    """The check of each env id on its demos, each cut to max_len + 1 tokens."""
    return [check_rows(model, env_id, encode(tokenizer, conversations, max_len), tokenizer.decode)
            for env_id, conversations in demos.items()]


def check_pairs(model: Transformer, pairs: dict[str, list[tuple[list[int], int]]]) -> list[CopyCheck]:
    """The check of each env id on its drill pairs, given as (ids, index of the reply's first token)."""
    return [check_rows(model, env_id, [(ids, [t >= start for t in range(len(ids))]) for ids, start in rows])
            for env_id, rows in pairs.items()]


def print_checks(checks: list[CopyCheck], console: Console, title: str) -> None:
    """One row per env id."""
    table = Table(title=title)
    for name in ("env id", "checked", "loss", "token accuracy", "reproduced"):
        table.add_column(name, justify="left" if name == "env id" else "right")
    for c in checks:
        if c.examples:
            table.add_row(c.env_id, str(c.examples), f"{c.loss:.4f}", f"{c.token_accuracy:.4f}", f"{c.reproduced:.2f}")
        else:
            table.add_row(c.env_id, "0", "-", "-", "- (no reply within the length checked)")
    console.print(table)
    for c in checks:
        if c.misses:
            per = ", ".join(f"{n}: {k}" for n, k in sorted(Counter(c.wrong_tokens).items()))
            console.print(f"{c.env_id}: examples by wrong tokens {{{per}}}; the first misses:", highlight=False)
            for miss in c.misses:
                console.print(f"  ...{miss['context']!r} wanted {miss['want']!r}, got {miss['got']!r}", highlight=False)


def check_line(step: int, checks: list[CopyCheck]) -> str:
    """One line for a check during training: each env id's reproduced fraction."""
    cells = [f"{c.env_id} {'-' if c.reproduced is None else f'{c.reproduced:.2f}'}" for c in checks]
    return f"step {step}: reproduced " + " | ".join(cells)
