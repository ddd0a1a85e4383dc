"""The `jointrl envs ...` commands: list the registered environments, show one, play its demo."""
from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table


def add_list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("glob", nargs="?", default="*", help="env id glob, e.g. 'swe/*:hard' (default: all)")


def run_list(args: argparse.Namespace) -> int:
    """Print id, domain, tools and default tier of every env matching the glob."""
    from jointrl.envs import registry

    ids = registry.env_ids(args.glob)
    if not ids:
        raise ValueError(f"no env id matches {args.glob!r}")
    rows = []
    for env_id in ids:
        spec = registry.spec(env_id)
        env = registry.make(env_id)
        try:
            tools = ", ".join(t["function"]["name"] for t in env.tool_specs()) or "-"
        finally:
            env.close()
        rows.append((env_id, spec.domain, tools, spec.default_tier, spec.description))
    if not sys.stdout.isatty():
        # Piped output stays one line per env, tab-separated, for grep and scripts.
        print("\n".join("\t".join(row) for row in rows))
        return 0
    table = Table(title=f"{len(ids)} environments", show_lines=False)
    for column in ("id", "domain", "tools", "tier", "description"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    Console(soft_wrap=True).print(table)
    return 0


def add_show_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env_id", help="a registered env id")
    parser.add_argument("--seed", type=int, default=0, help="seed of the task to show")


def run_show(args: argparse.Namespace) -> int:
    """Print an env's spec, tools and the opening messages of one seed."""
    from jointrl.envs import registry

    spec = registry.spec(args.env_id)
    env = registry.make(args.env_id)
    try:
        obs = env.reset(args.seed)
    finally:
        env.close()
    console = Console(soft_wrap=True)
    console.print(f"[bold]{spec.id}[/]  domain={spec.domain} family={spec.family} difficulty={spec.difficulty} "
                  f"tier={spec.default_tier} max_turns={spec.max_turns}\n{spec.description}\nentry point {spec.entry_point}")
    console.rule("tools")
    console.print_json(json.dumps(obs.tools))
    console.rule(f"prompt (seed {args.seed})")
    for message in obs.messages:
        console.print(f"[bold]{message['role']}[/]: {message['content']}")
    return 0


def add_try_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env_id", help="a registered env id")
    parser.add_argument("--seed", type=int, default=0, help="seed of the task to play")


def run_try(args: argparse.Namespace) -> int:
    """Play the env's scripted demo and print the transcript and the signals."""
    from jointrl.envs import registry

    env = registry.make(args.env_id)
    console = Console(soft_wrap=True)
    try:
        obs = env.reset(args.seed)
        transcript = obs.messages + env.demo()
        signals = env.signals()
    finally:
        env.close()
    for message in transcript:
        console.rule(message["role"])
        if message.get("reasoning_content"):
            console.print(f"[dim]{message['reasoning_content']}[/]")
        if message.get("content"):
            console.print(message["content"], markup=False)
        for call in message.get("tool_calls") or []:
            console.print(f"-> {call['function']['name']}({call['function']['arguments']})", markup=False)
    console.rule("signals")
    console.print_json(json.dumps(signals))
    return 0
