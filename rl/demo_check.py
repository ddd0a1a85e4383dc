"""The cold start's copy check: how many unseen demonstrations the policy reproduces token for token.

A demonstration is reproduced when, fed the demo under teacher forcing, the policy's most likely next token is the
demo's own at every generated position. Each agent family's program or command holds numbers and names copied out
of the task, and a cold start forms that copy per family, on some seeds and not others (docs/learning.md). The
reproduced fraction on a few dozen demos per env id followed each family's held-out pass rate across cold starts,
and takes seconds where an evaluation takes minutes; the demos come from train seeds that SFT and the drill did not
use, so judging a cold start by them leaves the held-out seeds untouched.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table

from jointrl.model.transformer import Transformer
from jointrl.rl.sft import Conversation, encode


@dataclass
class DemoCheck:
    """One env id's check over its demos' generated tokens."""

    env_id: str
    demos: int
    # None when no demo has a generated token within max_len.
    loss: float | None  # mean next-token loss
    token_accuracy: float | None  # fraction whose most likely token is the demo's
    reproduced: float | None  # fraction of demos with every generated token the most likely one


@torch.no_grad()
def check_demos(model: Transformer, tokenizer, demos: dict[str, list[Conversation]], max_len: int) -> list[DemoCheck]:
    """The check of each env id on its demos, each cut to max_len + 1 tokens."""
    was_training = model.training
    model.eval()
    checks = []
    for env_id, conversations in demos.items():
        examples = encode(tokenizer, conversations, max_len)
        if not examples:
            # Its demos' replies lie past max_len (the cold start warns of such demos): nothing to check.
            checks.append(DemoCheck(env_id, 0, None, None, None))
            continue
        nll = hits = tokens = reproduced = 0.0
        for ids, mask in examples:
            row = torch.tensor(ids)
            generated = torch.tensor(mask[1:], dtype=torch.bool)  # [T]: is position t + 1 a generated token
            hidden = model(row[None, :-1], return_logits=False).hidden[0]  # [T, D]
            logits = model.head(hidden[generated]).float()  # [N, V]
            targets = row[1:][generated]  # [N]
            nll += F.cross_entropy(logits, targets, reduction="sum").item()
            right = logits.argmax(-1) == targets
            hits += right.sum().item()
            tokens += len(targets)
            reproduced += bool(right.all())
        checks.append(DemoCheck(env_id, len(examples), nll / tokens, hits / tokens, reproduced / len(examples)))
    model.train(was_training)
    return checks


def print_checks(checks: list[DemoCheck], console: Console) -> None:
    """One row per env id."""
    table = Table(title="copy check: unseen demonstrations under teacher forcing")
    for name in ("env id", "demos", "loss", "token accuracy", "reproduced"):
        table.add_column(name, justify="left" if name == "env id" else "right")
    for c in checks:
        if c.demos:
            table.add_row(c.env_id, str(c.demos), f"{c.loss:.4f}", f"{c.token_accuracy:.4f}", f"{c.reproduced:.2f}")
        else:
            table.add_row(c.env_id, "0", "-", "-", "- (no reply within the context)")
    console.print(table)
