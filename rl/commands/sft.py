"""`jointrl sft RECIPE [--overwrite] [KEY=VALUE...]`: the supervised cold start on the recipe's environment demonstrations."""
from __future__ import annotations

import argparse

from jointrl.rl.commands.recipe import add_recipe_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl sft`."""
    add_recipe_arguments(parser)
    parser.add_argument("--overwrite", action="store_true",
                        help="delete the run's earlier SFT checkpoint and metrics first (SFT does not resume)")


def run(args: argparse.Namespace) -> int:
    """The `jointrl sft` command."""
    from rich.console import Console

    from jointrl.rl.cold_start import cold_start
    from jointrl.rl.recipe import load_recipe

    cold_start(load_recipe(args.recipe, args.overrides), Console(soft_wrap=True), overwrite=args.overwrite)
    return 0
