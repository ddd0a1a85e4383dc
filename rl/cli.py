"""The `jointrl` command line: every subcommand is one entry of COMMANDS, built into argparse by one loop.

Adding a command is one entry, for example `jointrl model info NAME`:

    def _model_info_args(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("name", help="preset name")

    COMMANDS.append(Command(("model", "info"), "print a preset's sizes", _model_info_args, "jointrl.model.info:cli"))

- `path` is the words after `jointrl`. A longer path nests under groups (`model`, then `info`) that are
  created on first use; a group's help line comes from GROUP_HELP.
- `add_arguments(parser)` declares the command's own arguments and runs whenever the parser is built, so
  it must stay cheap.
- `run` is `run(args) -> int` or a "module:function" string imported only when the command runs, so that
  `jointrl --help` never pays for importing torch or ray.
- A user mistake is a ValueError (RecipeError included), OSError or KeyError: main prints one line (or the
  recipe's list of problems) on stderr and returns 1; with `--debug` the exception propagates instead.
  Usage errors return 2.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import Callable, Sequence

from jointrl.rl import env_commands as _envs
from jointrl.rl import eval_command as _eval
from jointrl.rl import export_command as _export
from jointrl.rl import model_commands as _model
from jointrl.rl import plan as _plan
from jointrl.rl.recipe import RecipeError, dump_config, load_recipe

RunFn = Callable[[argparse.Namespace], int]
DEBUG_HELP = "let errors raise with a traceback instead of a one-line message"


@dataclass(frozen=True)
class Command:
    """One subcommand: the words that call it, its help line, its arguments and what it runs."""

    path: tuple[str, ...]
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: RunFn | str


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


def _recipe_check_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", help="recipe file, or the name of a shipped recipe such as 'quickstart'")
    parser.add_argument(
        "overrides", nargs="*", metavar="KEY=VALUE", help="settings applied on top of the recipe, e.g. trainer.steps=10"
    )


def _recipe_check(args: argparse.Namespace) -> int:
    print_yaml(dump_config(load_recipe(args.recipe, args.overrides)))
    return 0


def _recipe_args(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    if default is None:
        parser.add_argument("recipe", help="recipe file or shipped recipe name")
    else:
        parser.add_argument("recipe", nargs="?", default=default, help="recipe file or shipped recipe name")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="settings applied on top of the recipe")


def _quickstart_args(parser: argparse.ArgumentParser) -> None:
    _recipe_args(parser, default="quickstart")


def _train_args(parser: argparse.ArgumentParser) -> None:
    _recipe_args(parser)
    parser.add_argument("--init", metavar="CKPT", help="start from this model checkpoint (default: the recipe's SFT checkpoint)")
    parser.add_argument("--resume", action="store_true", help="continue from the run's last complete checkpoint")


GROUP_HELP: dict[str, str] = {
    "recipe": "validate and inspect recipes",
    "model": "inspect model presets and checkpoints",
    "tokenizer": "train and inspect the tokenizer",
    "envs": "list, show and try environments",
}

COMMANDS: list[Command] = [
    Command(
        ("recipe", "check"), "print a recipe's resolved config, or every problem in it", _recipe_check_args, _recipe_check
    ),
    Command(
        ("model", "info"),
        "parameters (total / active), layer kinds, weight and state memory of a preset or checkpoint",
        _model.model_info_args,
        "jointrl.rl.model_commands:model_info",
    ),
    Command(("model", "presets"), "list the model presets", _model.model_presets_args, "jointrl.rl.model_commands:model_presets"),
    Command(("envs", "list"), "list registered environments (id, domain, tools, tier)", _envs.list_args, "jointrl.rl.env_commands:list_envs"),
    Command(("envs", "show"), "show an environment's spec, tools and prompt", _envs.show_args, "jointrl.rl.env_commands:show_env"),
    Command(("envs", "try"), "play an environment's demo; print transcript and signals", _envs.try_args, "jointrl.rl.env_commands:try_env"),
    Command(
        ("sft",),
        "supervised cold start on the recipe's environment demonstrations; writes a checkpoint",
        _recipe_args,
        "jointrl.rl.cold_start:run",
    ),
    Command(
        ("train",),
        "joint RL from a recipe: rollouts, rewards, learner updates, weight sync, eval, checkpoints (--resume)",
        _train_args,
        "jointrl.rl.trainer:run",
    ),
    Command(
        ("quickstart",),
        "the quickstart job: SFT cold start, held-out eval, joint RL, held-out eval again (CPU, minutes)",
        _quickstart_args,
        "jointrl.rl.quickstart:run",
    ),
    Command(
        ("tokenizer", "train"),
        "train the byte-level BPE on project-generated text",
        _model.tokenizer_train_args,
        "jointrl.rl.model_commands:tokenizer_train",
    ),
    Command(
        ("eval",),
        "evaluate a checkpoint on held-out seeds: pass rate, reward, think tokens, pass@k per domain and tier",
        _eval.add_arguments,
        "jointrl.rl.eval_command:run",
    ),
    Command(
        ("export",),
        "export a checkpoint for transformers (kimi_linear or native remote code, optional MXFP4 experts)",
        _export.add_arguments,
        "jointrl.rl.export_command:run",
    ),
    Command(
        ("plan",),
        "per-GPU memory of learner ranks and rollout workers, and the GPUs a recipe needs (exit 1: does not fit)",
        _plan.add_arguments,
        "jointrl.rl.plan:run",
    ),
]


def _version() -> str:
    try:
        return metadata.version("jointrl")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser(commands: Sequence[Command] | None = None) -> argparse.ArgumentParser:
    """The argparse tree of every registered command."""
    parser = argparse.ArgumentParser(
        prog="jointrl", description="Joint RL post-training of sparse MoE language models into tool-using agents."
    )
    parser.add_argument("--version", action="version", version=f"jointrl {_version()}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    parser.set_defaults(_parser=parser)
    subparsers = {(): parser.add_subparsers(title="commands", metavar="COMMAND")}
    for command in COMMANDS if commands is None else commands:
        for depth, word in enumerate(command.path[:-1]):
            group = command.path[: depth + 1]
            if group not in subparsers:
                help_text = GROUP_HELP.get(word, "")
                sub = subparsers[group[:-1]].add_parser(word, help=help_text, description=help_text)
                sub.set_defaults(_parser=sub)
                subparsers[group] = sub.add_subparsers(title="commands", metavar="COMMAND")
        leaf = subparsers[command.path[:-1]].add_parser(command.path[-1], help=command.help, description=command.help)
        # SUPPRESS keeps a leaf that was not given --debug from resetting one given before the command.
        leaf.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
        command.add_arguments(leaf)
        leaf.set_defaults(_run=command.run)
    return parser


def _resolve(run: RunFn | str) -> RunFn:
    if callable(run):
        return run
    module, _, attr = run.partition(":")
    return getattr(importlib.import_module(module), attr)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _one_line(exc: BaseException) -> str:
    # str(KeyError('x')) is "'x'"; the bare argument reads better.
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    return str(exc) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run `jointrl` with argv (default sys.argv[1:]) and return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return _exit_code(exc.code)
    run = getattr(args, "_run", None)
    if run is None:
        args._parser.print_help(sys.stderr)
        return 2
    try:
        return int(_resolve(run)(args) or 0)
    except RecipeError as exc:
        if args.debug:
            raise
        count = len(exc.problems)
        print(f"jointrl: {count} problem{'s' * (count != 1)} in the recipe:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    except (ValueError, OSError, KeyError) as exc:
        if args.debug:
            raise
        print(f"jointrl: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("jointrl: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
