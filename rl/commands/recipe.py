"""`jointrl recipe check RECIPE [KEY=VALUE...]`: print a recipe's resolved config, or every problem in it."""
from __future__ import annotations

import argparse
import sys


def add_recipe_arguments(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    """A recipe (required, or `default` when given) and KEY=VALUE overrides: the arguments of every recipe command."""
    if default is None:
        parser.add_argument("recipe", help="recipe file, or the name of a shipped recipe such as 'quickstart'")
    else:
        parser.add_argument("recipe", nargs="?", default=default, help=f"recipe file or shipped name (default: {default})")
    parser.add_argument(
        "overrides", nargs="*", metavar="KEY=VALUE", help="settings applied on top of the recipe, e.g. trainer.steps=10"
    )


def print_yaml(text: str) -> None:
    """Write YAML to stdout, syntax-highlighted when stdout is a terminal."""
    if not sys.stdout.isatty():
        sys.stdout.write(text)
        return
    from rich.console import Console
    from rich.syntax import Syntax

    # soft_wrap leaves long lines whole, so what is copied from the terminal is still valid YAML.
    console = Console(file=sys.stdout, force_terminal=True, soft_wrap=True)
    console.print(Syntax(text.rstrip("\n"), "yaml", background_color="default"))


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl recipe check`."""
    add_recipe_arguments(parser)


def run_check(args: argparse.Namespace) -> int:
    """The `jointrl recipe check` command."""
    from jointrl.rl.recipe import dump_config, load_recipe

    print_yaml(dump_config(load_recipe(args.recipe, args.overrides)))
    return 0
