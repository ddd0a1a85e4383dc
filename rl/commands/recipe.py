"""`jointrl recipe check | list | explain`: a recipe's resolved config or its problems, the shipped recipes, and
what a key means."""
from __future__ import annotations

import argparse
import difflib
import re
import sys
import types
import typing
from typing import Any


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


def add_list_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl recipe list` (none)."""


def first_comment(path) -> str:
    """The first comment line of a recipe file, without its '#' (empty when it opens with no comment)."""
    for line in path.read_text().splitlines():
        if line.strip():
            return line.strip().lstrip("#").strip() if line.lstrip().startswith("#") else ""
    return ""


def run_list(args: argparse.Namespace) -> int:
    """The `jointrl recipe list` command: each shipped recipe's name and the first line of its comment."""
    from jointrl.rl.recipe import shipped_recipes_dir

    paths = sorted(shipped_recipes_dir().glob("*.yaml"))
    width = max(len(p.stem) for p in paths)
    for path in paths:
        print(f"{path.stem:<{width}}  {first_comment(path)}")
    return 0


def add_explain_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl recipe explain`."""
    parser.add_argument("key", help="a dotted recipe key, e.g. trainer.steps, envs.mix.weight or rollout (a section)")


def run_explain(args: argparse.Namespace) -> int:
    """The `jointrl recipe explain` command: a key's type, default and description from the schema."""
    print(explain(args.key))
    return 0


def _element(ann: Any) -> Any:
    """The type under Optional, Annotated, list and tuple: what a key below this one is looked up in."""
    while True:
        origin = typing.get_origin(ann)
        options = [a for a in typing.get_args(ann) if a is not type(None)]
        if origin is typing.Annotated or (origin in (typing.Union, types.UnionType) and len(options) == 1):
            ann = options[0]
        elif origin in (list, tuple):
            ann = typing.get_args(ann)[0]
        else:
            return ann


def _type_text(ann: Any) -> str:
    text = ann.__name__ if isinstance(ann, type) else str(ann)
    # `list[jointrl.rl.config.envs.EnvMixEntry]` reads better as `list[EnvMixEntry]`.
    return re.sub(r"\b(?:typing|[a-z_]+(?:\.[a-z_0-9]+)+)\.(\w+)", r"\1", text)


def _default_text(field) -> str:
    from pydantic import BaseModel

    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "a section (its keys below)"
    if isinstance(value, list):
        value = [v.model_dump() if isinstance(v, BaseModel) else v for v in value]
    return repr(value)


def _bounds_text(field) -> str:
    marks = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "min_length": "length >="}
    found = [f"{sign} {getattr(m, name)}" for m in field.metadata for name, sign in marks.items() if hasattr(m, name)]
    return f" ({', '.join(found)})" if found else ""


def explain(key: str) -> str:
    """A dotted recipe key's type, default and description (a section also lists its keys); unknown keys raise."""
    from pydantic import BaseModel

    from jointrl.model.config import ModelConfig
    from jointrl.rl.config.model import PRESET_KEY, PRETRAINED_KEY
    from jointrl.rl.config.run import RunConfig

    # List positions do not change what a key means: envs.mix[0].weight is envs.mix.weight.
    parts = [part for part in re.sub(r"\[\d+\]", "", key).split(".") if part]
    if not parts:
        raise ValueError("expected a dotted key such as trainer.steps")
    ann: Any = RunConfig
    field = None
    for depth, part in enumerate(parts):
        ann = _element(ann)
        where = ".".join(parts[:depth]) or "a recipe"
        if typing.get_origin(ann) is dict:
            # A mapping's keys are the user's names (a domain, a glob): the next part is one of them.
            ann = typing.get_args(ann)[1]
            continue
        if ann is ModelConfig and part in (PRESET_KEY, PRETRAINED_KEY):
            return "\n".join([f"{key}", "  type: str", "  default: none",
                               f"  {RunConfig.model_fields['model'].description}"])
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            raise ValueError(f"{where} has type {_type_text(ann)}: there is no key {part!r} below it")
        if part not in ann.model_fields:
            close = difflib.get_close_matches(part, list(ann.model_fields), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"keys: {', '.join(ann.model_fields)}"
            raise ValueError(f"{where} has no key {part!r} ({hint})")
        field = ann.model_fields[part]
        ann = field.annotation
    lines = [key, f"  type: {_type_text(field.annotation)}{_bounds_text(field)}", f"  default: {_default_text(field)}",
             f"  {field.description or ''}"]
    section = _element(ann)
    if typing.get_origin(section) is dict:
        section = _element(typing.get_args(section)[1])
    if isinstance(section, type) and issubclass(section, BaseModel):
        # A section typed as one model is a mapping; a list or mapping of models has these keys in each item.
        each = not (isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel))
        lines.append(f"  keys{' of each item' if each else ''}:")
        width = max(len(name) for name in section.model_fields)
        lines += [f"    {name:<{width}}  {f.description or ''}" for name, f in section.model_fields.items()]
    return "\n".join(lines)
