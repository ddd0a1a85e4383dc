"""`jointrl rewards list`: every registered reward (built-in or from a plugin), where it comes from, what it does."""
from __future__ import annotations

import argparse
import sys


def add_list_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl rewards list` (none)."""


def run_list(args: argparse.Namespace) -> int:
    """Print name, parameters, source and the docstring's first line of every registered reward."""
    from rich.console import Console
    from rich.table import Table

    from jointrl.rewards import registry

    rows = []
    for name in registry.names():
        reward = registry.get(name)
        params = ", ".join(p.name if p.required else f"{p.name}={p.default!r}" for p in reward.params.values())
        rows.append((name, params or "-", reward.source, reward.summary))
    if not sys.stdout.isatty():
        # Piped output stays one line per reward, tab-separated, for grep and scripts.
        print("\n".join("\t".join(row) for row in rows))
        return 0
    table = Table(title=f"{len(rows)} rewards")
    for column in ("name", "params", "from", "description"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    Console(soft_wrap=True).print(table)
    return 0
