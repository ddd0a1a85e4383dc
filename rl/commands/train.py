"""`jointrl train RECIPE [--init CKPT] [--resume | --overwrite] [KEY=VALUE...]`: joint RL from a recipe."""
from __future__ import annotations

import argparse
from pathlib import Path

from jointrl.rl.commands.recipe import add_recipe_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl train`."""
    add_recipe_arguments(parser)
    parser.add_argument("--init", metavar="CKPT", help="start from this model checkpoint (default: the recipe's SFT checkpoint)")
    parser.add_argument("--resume", action="store_true", help="continue from the run's last complete checkpoint")
    parser.add_argument("--overwrite", action="store_true",
                        help="delete the run's earlier RL metrics, checkpoints and rollouts and start again")


def run(args: argparse.Namespace) -> int:
    """The `jointrl train` command."""
    from rich.console import Console

    from jointrl.rl.recipe import load_recipe
    from jointrl.rl.trainer import train

    console = Console(soft_wrap=True)
    cfg = load_recipe(args.recipe, args.overrides)
    # train() ends with a summary of where the checkpoints, metrics, rollouts and wandb run are.
    train(cfg, init=Path(args.init) if args.init else None, resume=args.resume, overwrite=args.overwrite, console=console)
    return 0
