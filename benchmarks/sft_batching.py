"""SFT on a recipe's demonstrations with shuffled vs length-grouped batches: padded tokens, wall time, loss.

    python benchmarks/sft_batching.py learning_cpu --steps 60
    python benchmarks/sft_batching.py quickstart trainer.sft.demos_per_env=128

Both arms train a fresh model from the same initial weights on the same encoded demonstrations, for the same
number of optimizer steps of the same batch size; only the order of the examples into batches differs
(`rl/sft.py` batch_order). Prints each arm's padded and real tokens per step, seconds per step, the wall-time
ratio and the loss over the last steps, so a speed-up that costs learning shows as such.
"""
from __future__ import annotations

import argparse
import copy
import sys
import time

import torch
from rich.console import Console
from rich.table import Table

from jointrl.model.transformer import Transformer
from jointrl.rl.cold_start import demo_counts, sft_data
from jointrl.rl.recipe import load_recipe
from jointrl.rl.sft import batch_order, batches, encode, sft_loss, train_sft


HELD_OUT = 64


@torch.no_grad()
def held_out_loss(model: Transformer, examples: list, batch_size: int, pad_id: int) -> float:
    """Mean SFT loss over the examples, batch by batch (each batch's mean over its generated tokens)."""
    losses = [sft_loss(model, batch)[0].item() for batch in batches(examples, batch_size, pad_id, seed=0)]
    return sum(losses) / len(losses)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("recipe", nargs="?", default="quickstart")
    parser.add_argument("overrides", nargs="*", help="recipe overrides key=value")
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps per arm (default 60)")
    args = parser.parse_intermixed_args(argv)
    console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160)
    cfg = load_recipe(args.recipe, args.overrides)
    sft = cfg.trainer.sft
    demos, tokenizer = sft_data(cfg, console, demo_counts(cfg))
    examples = encode(tokenizer, demos, sft.max_len)
    lengths = [len(ids) - 1 for ids, _ in examples]
    # Each arm trains one epoch over the first examples of one seeded order (the same ones for equal steps); the
    # loss is measured on examples no arm trained on.
    order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(0)).tolist()
    available = (len(examples) - HELD_OUT) // sft.batch_size
    if available < args.steps:
        raise SystemExit(f"{len(examples)} sequences: too few for {args.steps} steps of {sft.batch_size} and {HELD_OUT} "
                         "held out; raise trainer.sft.demos_per_env or lower --steps")
    held = [examples[i] for i in order[-HELD_OUT:]]
    torch.manual_seed(cfg.trainer.seed)
    initial = Transformer(cfg.model)

    table = Table(title=f"{args.recipe}: {len(examples)} sequences, batch {sft.batch_size}, mean length "
                  f"{sum(lengths) / len(lengths):.0f} tokens")
    for column in ("batches", "steps", "real tok/step", "padded tok/step", "s/step", "wall s",
                   f"loss on {HELD_OUT} held-out demos"):
        table.add_column(column, justify="right")

    def arm(name: str, steps: int, grouped: bool) -> float:
        subset = [examples[i] for i in order[: steps * sft.batch_size]]
        groups = batch_order([len(ids) - 1 for ids, _ in subset], sft.batch_size, cfg.trainer.seed, grouped)
        padded = sum(len(g) * max(len(subset[i][0]) - 1 for i in g) for g in groups)
        real = sum(len(ids) - 1 for ids, _ in subset)
        model = copy.deepcopy(initial)
        began = time.perf_counter()
        train_sft(model, subset, epochs=1, lr=sft.lr, batch_size=sft.batch_size, pad_id=tokenizer.pad_id,
                  seed=cfg.trainer.seed, group_by_length=grouped)
        wall = time.perf_counter() - began
        table.add_row(name, str(steps), f"{real / steps:,.0f}", f"{padded / steps:,.0f}", f"{wall / steps:.2f}",
                      f"{wall:.0f}", f"{held_out_loss(model, held, sft.batch_size, tokenizer.pad_id):.3f}")
        return wall

    seconds = {grouped: arm("length-grouped" if grouped else "shuffled", args.steps, grouped) for grouped in (False, True)}
    ratio = seconds[False] / seconds[True]
    # What a user gets from the same minutes: the grouped arm for as many steps as the shuffled arm's time buys.
    arm("length-grouped, equal time", min(available, round(args.steps * ratio)), True)
    console.print(table)
    console.print(f"wall time at equal steps, shuffled / length-grouped: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
