"""The `jointrl envs ...` commands: list the registered environments, show one, play its demo, check or audit them."""
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


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl envs audit`."""
    parser.add_argument("glob", help="env id glob, e.g. 'swe/*' (quote it)")
    parser.add_argument("--seeds", type=int, default=20, help="train and held-out seeds per id (default 20)")
    parser.add_argument("--json", metavar="FILE", help="also write every row as JSON")
    parser.add_argument("--setup", action="append", default=[], metavar="MODULE:FUNCTION",
                        help="registers plugin envs in the determinism check's fresh processes (repeatable)")
    parser.add_argument("--no-determinism", action="store_true", help="skip the fresh-process determinism check")


def run_audit(args: argparse.Namespace) -> int:
    """Measure demo and shortcut pass rates, prompt and answer variety, overlap and time per env id."""
    from jointrl.envs.audit import SHORTCUTS, audit, to_json, violations
    from jointrl.rl.progress import output_console

    if args.seeds < 2:
        raise ValueError(f"--seeds must be >= 2, got {args.seeds}")
    rows = audit(args.glob, args.seeds, tuple(args.setup), check_determinism=not args.no_determinism)
    table = Table(title=f"env audit: {args.seeds} train + {args.seeds} held-out seeds per id (shortcuts should be ~0)")
    columns = ("demo", *SHORTCUTS, "prompts", "answers", "overlap")
    table.add_column("env id")
    for name in (*columns, "s/ep", "determ.", "k"):
        table.add_column(name, justify="right")
    failing = {}
    for row in rows:
        cells = [f"{getattr(row, name):.2f}" for name in columns]
        determ = {True: "yes", False: "NO", None: "-"}[row.deterministic]
        if problems := violations(row):
            failing[row.env_id] = problems
        table.add_row(row.env_id + (" [red]FAIL[/]" if problems else ""), *cells, f"{row.seconds:.2f}", determ,
                      str(row.choices or "-"))
    console = output_console()
    console.print(table)
    worst = max(rows, key=lambda r: r.worst_shortcut()[1])
    name, value = worst.worst_shortcut()
    console.print(f"worst shortcut: {worst.env_id} {name} {value:.2f}"
                  + (f" (constant answer {worst.constant_answer!r})" if name == "constant" else ""), markup=False)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(to_json(rows), f, indent=1)
        console.print(f"wrote {args.json}")
    for env_id, problems in failing.items():
        console.print(f"FAIL {env_id}: {'; '.join(problems)}", markup=False)
    console.print(f"{len(rows) - len(failing)} of {len(rows)} ids meet the thresholds", markup=False)
    return 1 if failing else 0


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl envs check`."""
    parser.add_argument("env_id", help="a registered env id (built-in or from an installed plugin)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds the contract and the audit play (default 3)")
    parser.add_argument("--no-audit", action="store_true", help="check the contract only, not the audit's thresholds")


def run_check(args: argparse.Namespace) -> int:
    """Play the env contract's rules and the audit's thresholds on a few seeds; exit 1 if any is broken."""
    from jointrl.envs.conformance import check

    if args.seeds < 2:
        raise ValueError(f"--seeds must be >= 2 (the audit compares train and held-out seeds), got {args.seeds}")
    problems = check(args.env_id, args.seeds, audit=not args.no_audit, same_tasks=not args.no_audit)
    for problem in problems:
        print(f"FAIL {args.env_id}: {problem}")
    what = "the env contract" + ("" if args.no_audit else " and the audit's thresholds")
    verdict = f"{len(problems)} problem{'s' * (len(problems) != 1)}" if problems else "ok"
    print(f"{args.env_id}: {what} on {args.seeds} seeds: {verdict}")
    return 1 if problems else 0


def add_prepare_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl envs prepare`."""
    parser.add_argument("domain", choices=["swe"], help="the domain whose pinned sources to fetch (swe: real packages)")
    parser.add_argument("--mine", action="store_true", help="also re-mine the committed bug manifest (slow)")
    parser.add_argument("--jobs", type=int, default=1, help="packages mined at once with --mine (one process each)")
    parser.add_argument("--only", nargs="+", metavar="FAMILY", help="with --mine: re-mine these packages, keep the rest")


def run_prepare(args: argparse.Namespace) -> int:
    """Fetch, verify (sha256) and unpack a domain's pinned sources into the local cache, so its envs run offline."""
    import time

    from jointrl.envs.swe.realcode import manifest, prepare
    from jointrl.envs.swe.realcode.sources import SOURCES, source
    from jointrl.rl.progress import Progress

    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    started = time.perf_counter()
    trees = []
    # prepare.prepare() is this loop; spelled out here so each package advances the progress display.
    with Progress(Console(soft_wrap=True), "prepare", len(SOURCES), unit="package") as progress:
        for pin in SOURCES:
            trees.append(prepare.prepare_one(pin))
            progress.advance(info=f"{pin.name}=={pin.version}")
    print(f"prepared {len(trees)} packages in {prepare.cache_root()} ({prepare.cache_bytes() / 1e6:.1f} MB) "
          f"in {time.perf_counter() - started:.0f} s")
    if args.mine:
        started = time.perf_counter()
        pins = tuple(source(f) for f in args.only) if args.only else SOURCES
        packages = manifest.mine_all(pins, jobs=args.jobs)["packages"]
        print(f"mined {sum(len(p['bugs']) for p in packages.values())} bugs from {len(packages)} packages in "
              f"{time.perf_counter() - started:.0f} s; wrote {manifest.PATH}")
    return 0
