"""`jointrl train RECIPE [--init CKPT] [--resume] [KEY=VALUE...]`: joint RL from a recipe."""
from __future__ import annotations

import argparse
from pathlib import Path

from jointrl.rl.commands.recipe import add_recipe_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl train`."""
    add_recipe_arguments(parser)
    parser.add_argument("--init", metavar="CKPT", help="start from this model checkpoint (default: the recipe's SFT checkpoint)")
    parser.add_argument("--resume", action="store_true", help="continue from the run's last complete checkpoint")


def run(args: argparse.Namespace) -> int:
    """The `jointrl train` command."""
    from rich.console import Console

    from jointrl.rl.recipe import load_recipe
    from jointrl.rl.trainer import train

    console = Console(soft_wrap=True)
    cfg = load_recipe(args.recipe, args.overrides)
    result = train(cfg, init=Path(args.init) if args.init else None, resume=args.resume, console=console)
    console.print(f"trained to step {result.steps}; last checkpoint {result.checkpoint}")
    return 0
