"""`jointrl quickstart [RECIPE] [--overwrite] [KEY=VALUE...]`: cold start, held-out eval, joint RL, held-out eval again (CPU)."""
from __future__ import annotations

import argparse

from jointrl.rl.commands.recipe import add_recipe_arguments

DEFAULT_RECIPE = "quickstart"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl quickstart`."""
    add_recipe_arguments(parser, default=DEFAULT_RECIPE)
    parser.add_argument("--overwrite", action="store_true",
                        help="delete an earlier run's checkpoints, metrics and rollouts in the run directory first")


def run(args: argparse.Namespace) -> int:
    """The `jointrl quickstart` command."""
    from jointrl.rl.progress import output_console
    from jointrl.rl.quickstart import quickstart
    from jointrl.rl.recipe import load_recipe

    quickstart(load_recipe(args.recipe, args.overrides), output_console(), args.recipe, overwrite=args.overwrite)
    return 0
