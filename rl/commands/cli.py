"""The `jointrl` command line: every subcommand is one entry of COMMANDS, built into argparse by one loop.

Adding a command is one module in this package and one entry, for example `jointrl model info NAME`:

    # commands/model.py
    def add_info_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("name", help="preset name")

    def run_info(args: argparse.Namespace) -> int:
        ...

    Command(("model", "info"), "print a preset's sizes", model.add_info_arguments, model.run_info)

A module with one command names its pair `add_arguments` / `run`; a group's module names them
`add_<word>_arguments` / `run_<word>`.

- `path` is the words after `jointrl`. A longer path nests under groups (`model`, then `info`) that are
  created on first use; a group's help line comes from GROUP_HELP.
- `add_arguments(parser)` declares the command's own arguments and runs whenever the parser is built, so
  it must stay cheap.
- `run` is `run(args) -> int` or a "module:function" string imported only when the command runs. Command
  modules import torch, ray and the jobs inside `run`, so that `jointrl --help` never pays for them.
- A command's options and positionals (a recipe and its KEY=VALUE overrides) may come in any order.
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

from jointrl.rl.commands import envs, export, hf_import, model, plan, quickstart, recipe, rewards, serve, sft, tokenizer, train
from jointrl.rl.commands import eval as eval_command  # `eval` would shadow the builtin
from jointrl.rl.recipe import RecipeError

RunFn = Callable[[argparse.Namespace], int]
DEBUG_HELP = "let errors raise with a traceback instead of a one-line message"


@dataclass(frozen=True)
class Command:
    """One subcommand: the words that call it, its help line, its arguments and what it runs."""

    path: tuple[str, ...]
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: RunFn | str


GROUP_HELP: dict[str, str] = {
    "recipe": "validate and inspect recipes",
    "model": "inspect model presets and checkpoints",
    "tokenizer": "train and inspect the tokenizer",
    "envs": "list, show, try, check and audit environments",
    "rewards": "inspect the registered reward functions",
}

COMMANDS: list[Command] = [
    Command(("recipe", "check"), "print a recipe's resolved config, or every problem in it", recipe.add_check_arguments, recipe.run_check),
    Command(("recipe", "list"), "list the shipped recipes with the first line of their comment",
            recipe.add_list_arguments, recipe.run_list),
    Command(("recipe", "explain"), "a recipe key's type, default and description, or a section's keys",
            recipe.add_explain_arguments, recipe.run_explain),
    Command(
        ("model", "info"),
        "parameters (total / active), layer kinds, weight and state memory of a preset or checkpoint",
        model.add_info_arguments, model.run_info,
    ),
    Command(("model", "presets"), "list the model presets", model.add_presets_arguments, model.run_presets),
    Command(("envs", "list"), "list registered environments (id, domain, tools, tier)", envs.add_list_arguments, envs.run_list),
    Command(("envs", "show"), "show an environment's spec, tools and prompt", envs.add_show_arguments, envs.run_show),
    Command(("envs", "try"), "play an environment's demo; print transcript and signals", envs.add_try_arguments, envs.run_try),
    Command(
        ("envs", "audit"), "how much shortcuts earn (no-op, constant, replayed, several answers), overlap, determinism",
        envs.add_audit_arguments, envs.run_audit,
    ),
    Command(
        ("envs", "check"), "the env contract and the audit's thresholds on a few seeds (any installed env; exit 1: broken)",
        envs.add_check_arguments, envs.run_check,
    ),
    Command(("rewards", "list"), "list registered rewards (name, parameters, where from, description)",
            rewards.add_list_arguments, rewards.run_list),
    Command(("envs", "prepare"), "fetch, verify and unpack a domain's pinned sources (swe: real packages) into the cache",
            envs.add_prepare_arguments, envs.run_prepare),
    Command(
        ("sft",), "supervised cold start on the recipe's environment demonstrations; writes a checkpoint",
        sft.add_arguments, sft.run,
    ),
    Command(
        ("train",),
        "joint RL from a recipe: rollouts, rewards, learner updates, weight sync, eval, checkpoints (--resume)",
        train.add_arguments, train.run,
    ),
    Command(
        ("quickstart",),
        "the quickstart job: SFT cold start, held-out eval, joint RL, held-out eval again (CPU, minutes)",
        quickstart.add_arguments, quickstart.run,
    ),
    Command(
        ("tokenizer", "train"), "train the byte-level BPE on project-generated text",
        tokenizer.add_train_arguments, tokenizer.run_train,
    ),
    Command(
        ("eval",),
        "evaluate a checkpoint on held-out seeds: pass rate, reward, think tokens, pass@k per domain and tier",
        eval_command.add_arguments, eval_command.run,
    ),
    Command(
        ("export",),
        "export a checkpoint for transformers (kimi_linear or native remote code, optional MXFP4 experts)",
        export.add_arguments, export.run,
    ),
    Command(
        ("import",),
        "import a transformers checkpoint (kimi_linear, deepseek_v3, deepseek_v32) as a jointrl checkpoint",
        hf_import.add_arguments, hf_import.run,
    ),
    Command(
        ("serve",),
        "an OpenAI-compatible chat-completions server for a checkpoint (tool calls, thinking budgets, streaming)",
        serve.add_arguments, serve.run,
    ),
    Command(
        ("plan",),
        "per-GPU memory of learner ranks and rollout workers, and the GPUs a recipe needs (exit 1: does not fit)",
        plan.add_arguments, plan.run,
    ),
]


class _CommandParser(argparse.ArgumentParser):
    """A parser whose command (a leaf: no subcommands) takes options and positionals in any order.

    Plain argparse stops filling `nargs="*"` positionals at the first option, so `train R --init X a.b=c`
    would reject `a.b=c`; intermixed parsing reads it as an override. Groups keep plain parsing (argparse
    cannot intermix around subcommands).
    """

    _intermixing = False

    def parse_known_args(self, args=None, namespace=None):
        if self._intermixing or self._subparsers is not None:
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


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
    subparsers = {(): parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_CommandParser)}
    for command in COMMANDS if commands is None else commands:
        for depth, word in enumerate(command.path[:-1]):
            group = command.path[: depth + 1]
            if group not in subparsers:
                help_text = GROUP_HELP.get(word, "")
                sub = subparsers[group[:-1]].add_parser(word, help=help_text, description=help_text)
                sub.set_defaults(_parser=sub)
                subparsers[group] = sub.add_subparsers(title="commands", metavar="COMMAND", parser_class=_CommandParser)
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
