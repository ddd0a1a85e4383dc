"""Whether a model shape learns to copy a list of numbers it was shown, and in how many steps: a synthetic probe.

    python benchmarks/list_copy.py                                  # mini: fresh lists, then a pool of 2,000
    python benchmarks/list_copy.py --lists profile --arms fresh     # every number twice in a row, as in a profile
    python benchmarks/list_copy.py --steps 4000 --set index_topk=32 --arms fresh --loss all

Each example has the copy drill's format (rl/drill.py): a sentence that lists tuples of numbers, the arrow, then
the same list written as a Python assignment, the way a CAD program restates a profile's vertices. `--lists
random` gives 3-6 tuples of 2-3 numbers from 1 to 199; `profile` the 4-8 vertices of a rectilinear profile, where
each vertex shares a coordinate with the one before, so the number just written does not tell where the copy is.
The loss counts the reply only (`--loss all`: every token, as the drill's does). Every --eval-every steps the table
gets the teacher-forced accuracy on the digit tokens of 96 held-out replies and the share of replies whose digit
tokens are all right (a program needs every number). The `fresh` arm draws a new list for every example; the
`pool` arm trains on a fixed set of --pool examples, as the drill trains on its demonstrations' pairs. Both arms
start from the same weights and train at a constant learning rate, so a curve does not depend on the number of
steps asked for.
"""
from __future__ import annotations

import argparse
import copy
import random
import re
import sys
import time
from itertools import chain

import torch
import torch.nn.functional as F
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from jointrl.model.config import ModelConfig
from jointrl.model.presets import PRESETS
from jointrl.model.tokenizer import JointTokenizer, train_tokenizer
from jointrl.model.tokenizer_corpus import default_corpus
from jointrl.model.transformer import Transformer
from jointrl.rl.drill import ARROW

HELD_OUT = 96
HELD_OUT_SEED = 10_000   # held-out lists come from seeds no arm trains on
POOL_SEED = 500_000
TARGET = 0.95            # the digit accuracy whose first step the summary reports


def list_example(rng: random.Random) -> tuple[str, str]:
    """A (message, reply) pair: a sentence listing tuples of numbers, and the same tuples as a Python list."""
    count, width = rng.randint(3, 6), rng.randint(2, 3)
    items = ", ".join("(" + ", ".join(str(rng.randint(1, 199)) for _ in range(width)) + ")" for _ in range(count))
    return f"The profile's vertices are {items} in order.", f"points = [{items}]"


def profile_example(rng: random.Random) -> tuple[str, str]:
    """A (message, reply) pair of a rectilinear profile: each vertex shares one coordinate with the one before, so
    every number appears twice in a row and the last number written does not say where the copy is."""
    x, y = rng.randint(0, 199), rng.randint(0, 199)
    vertices = [(x, y)]
    for turn in range(rng.randint(4, 8) - 1):
        if turn % 2 == 0:
            x = rng.randint(0, 199)
        else:
            y = rng.randint(0, 199)
        vertices.append((x, y))
    items = ", ".join(f"({a}, {b})" for a, b in vertices)
    return f"The profile's vertices are {items} in order.", f"points = [{items}]"


EXAMPLES = {"random": list_example, "profile": profile_example}


def encode_example(tokenizer: JointTokenizer, message: str, reply: str) -> tuple[list[int], list[int]]:
    """Token ids of the message with the arrow, and of the reply with its closing newline."""
    return tokenizer.encode(message + ARROW), tokenizer.encode(reply + "\n")


def left_padded(rows: list[tuple[list[int], list[int]]],
                count_message: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """ids, valid and counted [B, T] of (message, reply) rows, left-padded; counted marks the reply's tokens (and the
    message's with count_message, as the drill counts every token)."""
    width = max(len(head) + len(reply) for head, reply in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    valid = torch.zeros(len(rows), width, dtype=torch.bool)
    counted = torch.zeros_like(valid)
    for row, (head, reply) in enumerate(rows):
        start = width - len(head) - len(reply)
        ids[row, start:] = torch.tensor(head + reply)
        valid[row, start:] = True
        counted[row, start if count_message else start + len(head):] = True
    return ids, valid, counted


@torch.no_grad()
def digit_accuracy(model: torch.nn.Module, tokenizer: JointTokenizer,
                   rows: list[tuple[list[int], list[int]]]) -> tuple[float, float]:
    """Teacher-forced argmax accuracy on the reply's digit tokens, and the share of rows with every one right."""
    was_training = model.training
    model.eval()
    right = total = whole = 0
    for head, reply in rows:
        ids = head + reply
        predicted = model(torch.tensor([ids[:-1]])).logits.argmax(-1)[0].tolist()  # [T - 1]
        row_right = True
        for position in range(len(head), len(ids)):
            if re.search(r"\d", tokenizer.decode([ids[position]])):
                hit = predicted[position - 1] == ids[position]
                right += hit
                total += 1
                row_right &= hit
        whole += row_right
    model.train(was_training)
    return right / max(total, 1), whole / len(rows)


def train_arm(model: Transformer, tokenizer: JointTokenizer, draw, held: list, *, steps: int, eval_every: int,
              lr: float, batch_size: int, count_message: bool, table: Table, name: str) -> int | None:
    """Train on draw()'s rows, a table row every eval_every steps; the first evaluated step at TARGET, if any."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses: list[float] = []
    reached = None
    began = time.perf_counter()
    for step in range(1, steps + 1):
        ids, valid, counted = left_padded([draw() for _ in range(batch_size)], count_message)
        out = model(ids[:, :-1], valid=valid[:, :-1])
        nll = F.cross_entropy(out.logits.flatten(0, 1), ids[:, 1:].flatten(), reduction="none")  # [B * (T - 1)]
        mask = counted[:, 1:].flatten().float()
        loss = (nll * mask).sum() / mask.sum()
        optimizer.zero_grad(set_to_none=True)
        (loss + out.aux_loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        model.update_router_biases(out.expert_load)
        losses.append(loss.item())
        if step % eval_every == 0 or step == steps:
            digits, whole = digit_accuracy(model, tokenizer, held)
            recent = losses[-eval_every:]
            row = (name, str(step), f"{sum(recent) / len(recent):.3f}", f"{digits:.3f}", f"{whole:.3f}",
                   f"{time.perf_counter() - began:.0f}")
            table.add_row(*row)
            print(" ".join(row), flush=True)  # progress: the table prints at the end
            if reached is None and digits >= TARGET:
                reached = step
    return reached


def drawer(arm: str, example, tokenizer: JointTokenizer, pool_size: int, seed: int):
    """A function giving the arm's next (message, reply) row: a new example, or one of a fixed pool."""
    rng = random.Random(seed + 1)
    if arm == "fresh":
        return lambda: encode_example(tokenizer, *example(rng))
    pool = [encode_example(tokenizer, *example(random.Random(POOL_SEED + i))) for i in range(pool_size)]
    return lambda: rng.choice(pool)


def parse_sets(pairs: list[str]) -> dict[str, object]:
    """--set key=value pairs as ModelConfig overrides (ints where the value is one)."""
    overrides: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set {pair!r}: expected key=value")
        overrides[key] = int(value) if value.lstrip("-").isdigit() else value
    return overrides


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="mini", choices=sorted(PRESETS))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a ModelConfig field of the preset to override (repeatable)")
    parser.add_argument("--arms", default="fresh,pool", help="comma-separated subset of fresh,pool")
    parser.add_argument("--lists", choices=sorted(EXAMPLES), default="random",
                        help="random: tuples of random numbers; profile: a rectilinear profile's vertices, each number "
                             "twice in a row (default random)")
    parser.add_argument("--pool", type=int, default=2000, help="examples in the pool arm's fixed set (default 2000)")
    parser.add_argument("--steps", type=int, default=2500, help="optimizer steps per arm (default 2500)")
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--lr", type=float, default=3e-3, help="constant AdamW learning rate (default: the SFT's)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--loss", choices=("reply", "all"), default="reply",
                        help="tokens the loss counts: the reply's, or the message's too, as the drill's "
                             "(default reply)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer", default=None, help="a checkpoint directory's tokenizer instead of training one")
    args = parser.parse_args(argv)
    example = EXAMPLES[args.lists]
    arms = args.arms.split(",")
    if not arms or not set(arms) <= {"fresh", "pool"}:
        raise SystemExit(f"--arms {args.arms!r}: expected a comma-separated subset of fresh,pool")
    console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160)
    try:
        cfg = ModelConfig.model_validate({**PRESETS[args.preset].model_dump(), **parse_sets(args.set)})
    except ValidationError as err:
        first = err.errors()[0]
        raise SystemExit(f"--set {'.'.join(map(str, first['loc']))}={first.get('input')!r}: {first['msg']}") from None

    if args.tokenizer:
        tokenizer = JointTokenizer.load(args.tokenizer)
    else:
        # The probe's own lists join the default corpus, so its numbers tokenise as an env's would in a cold start.
        examples = (" ".join(example(random.Random(seed))) for seed in range(2000))
        tokenizer = train_tokenizer(chain(default_corpus(0, n_chats=4000), examples), cfg.vocab_size)
    held = [encode_example(tokenizer, *example(random.Random(HELD_OUT_SEED + i))) for i in range(HELD_OUT)]
    torch.manual_seed(args.seed)
    initial = Transformer(cfg)
    parameters = sum(p.numel() for p in initial.parameters())
    table = Table(title=f"list copy: {args.preset} {' '.join(args.set)} ({parameters:,} parameters), {args.lists} "
                  f"lists, batch {args.batch_size}, lr {args.lr:g}, loss on the {args.loss} tokens, "
                  f"{HELD_OUT} held out")
    for column in ("arm", "step", "loss", "digit tokens right", "lists all right", "s"):
        table.add_column(column, justify="right")

    reached = {}
    for arm in arms:
        name = f"pool {args.pool}" if arm == "pool" else arm
        draw = drawer(arm, example, tokenizer, args.pool, args.seed)
        reached[name] = train_arm(copy.deepcopy(initial), tokenizer, draw, held, steps=args.steps,
                                  eval_every=args.eval_every, lr=args.lr, batch_size=args.batch_size,
                                  count_message=args.loss == "all", table=table, name=name)
    console.print(table)
    for name, step in reached.items():
        console.print(f"{name}: digit tokens {TARGET:.2f} right " + (f"first at step {step}" if step else
                                                                    f"not reached in {args.steps} steps"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
