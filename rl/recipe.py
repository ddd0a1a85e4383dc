"""Loads a YAML recipe (with includes and command-line overrides) into a RunConfig, reporting every problem
as `file:line: key.path: message`.

A recipe is parsed node by node so that every key keeps the file and line it came from; includes are
deep-merged underneath the including file (a key written `name!:` replaces what the includes hold under
`name` instead of merging into it); overrides `a.b.c=value` are parsed as YAML and applied before the schema
in `jointrl.rl.config` types and checks the tree. Schema errors are mapped back to the line of the key they
concern. Numbers are strict: YAML `true` where the schema wants a number, or `3.0` where it wants an int,
is an error rather than pydantic's silent 1 or 3.
"""
from __future__ import annotations

import difflib
import os
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Union

import yaml
from pydantic import BaseModel, ValidationError

import jointrl.model.presets as presets
from jointrl.model.config import ModelConfig
from jointrl.rl.config.model import PRESET_KEY, PRETRAINED_KEY
from jointrl.rl.config.run import RunConfig

Key = tuple[str | int, ...]
INCLUDE_KEY = "include"
# `name!: value` in a file replaces the included value of `name` rather than merging into it.
REPLACE_SUFFIX = "!"
# Past this many keys a "valid keys" list stops helping and the suggestion alone is shown.
_MAX_LISTED_KEYS = 12


@dataclass(frozen=True)
class Location:
    """Where a value came from: a file and line, or a command-line override (line None)."""

    source: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.source}:{self.line}" if self.line is not None else self.source


Locs = dict[Key, Location]
# Key paths a file marked `name!:`, whose included values it replaces.
Replaced = set[Key]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a recipe, at the key path it concerns."""

    location: Location
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.key}: {self.message}" if self.key else f"{self.location}: {self.message}"


class RecipeError(ValueError):
    """Every problem found in a recipe, one per line."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class _RecipeLoader(yaml.SafeLoader):
    """SafeLoader that also reads exponent floats without a dot (`1e-6`), which YAML 1.1 leaves as strings."""


_RecipeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def shipped_recipes_dir() -> Path:
    """The recipes/ folder installed with the package (the `jointrl.recipes` data package)."""
    import jointrl.recipes

    # An editable install's namespace path also holds a finder placeholder that is not a folder.
    for entry in jointrl.recipes.__path__:
        if Path(entry).is_dir():
            return Path(entry)
    raise FileNotFoundError("the jointrl.recipes data folder is not installed")


def find_recipe(name: str | os.PathLike[str], base_dir: Path | None = None) -> Path | None:
    """A recipe file by path (relative to base_dir or the working directory), else under the shipped recipes."""
    path = Path(name)
    if path.is_absolute():
        return path if path.is_file() else None
    candidates = [(base_dir or Path.cwd()) / path, shipped_recipes_dir() / path]
    if path.suffix not in (".yaml", ".yml"):
        # A name like "moe-2.8t" has a dot but no YAML suffix: append one rather than replace ".8t".
        candidates.append(shipped_recipes_dir() / path.with_name(path.name + ".yaml"))
    return next((c.resolve() for c in candidates if c.is_file()), None)


def _show_path(path: Path) -> str:
    """A path as the user would write it: relative when under the working directory."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def dotted(key: Iterable[str | int]) -> str:
    """A key path as text: `envs.mix[0].weight`."""
    out = ""
    for seg in key:
        if seg == "[key]":
            continue
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else str(seg))
    return out


def _yaml_problem(exc: yaml.YAMLError, source: str) -> Problem:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    what = getattr(exc, "problem", None) or str(exc)
    return Problem(Location(source, mark.line + 1 if mark else None), "", f"invalid YAML: {what}")


def _parse(text: str, source: str, problems: list[Problem]) -> tuple[Any, Locs, Replaced]:
    """Parse YAML text into plain values, the location of every key and list item, and the `name!:` keys."""
    loader = _RecipeLoader(text)
    locs: Locs = {}
    replaced: Replaced = set()

    def build(node: yaml.Node, key: Key) -> Any:
        if len(key) > 64:
            raise yaml.YAMLError(f"nesting deeper than 64 levels at {dotted(key)} (a recursive alias?)")
        if isinstance(node, yaml.MappingNode):
            loader.flatten_mapping(node)
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                name = loader.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if not isinstance(name, str):
                    problems.append(Problem(Location(source, line), dotted(key), f"key {name!r} must be a string"))
                    continue
                if name.endswith(REPLACE_SUFFIX) and len(name) > 1:
                    name = name[: -len(REPLACE_SUFFIX)]
                    replaced.add(key + (name,))
                if name in out:
                    first = locs[key + (name,)].line
                    message = f"duplicate key (first at line {first})"
                    problems.append(Problem(Location(source, line), dotted(key + (name,)), message))
                locs[key + (name,)] = Location(source, line)
                out[name] = build(value_node, key + (name,))
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                locs[key + (index,)] = Location(source, item.start_mark.line + 1)
                items.append(build(item, key + (index,)))
            return items
        return loader.construct_object(node)

    try:
        root = loader.get_single_node()
        data = build(root, ()) if root is not None else {}
    except yaml.YAMLError as exc:
        raise RecipeError(problems + [_yaml_problem(exc, source)]) from None
    finally:
        loader.dispose()
    return data, locs, replaced


def _read(path: Path, problems: list[Problem], at: Location | None = None) -> tuple[Any, Locs, Replaced]:
    try:
        text = path.read_text()
    except OSError as exc:
        where = at or Location(_show_path(path))
        raise RecipeError(problems + [Problem(where, "", f"cannot read {_show_path(path)}: {exc.strerror}")]) from None
    return _parse(text, _show_path(path), problems)


def _merge(
    dst: dict, dst_locs: Locs, src: dict, src_locs: Locs, prefix: Key = (), replaced: Replaced = frozenset()
) -> None:
    """Deep-merge src over dst: mappings merge key by key unless marked replaced; anything else is replaced."""
    for name, value in src.items():
        key = prefix + (name,)
        if isinstance(value, dict) and isinstance(dst.get(name), dict) and key not in replaced:
            _merge(dst[name], dst_locs, value, src_locs, key, replaced)
        else:
            _drop_locations(dst_locs, key)
            dst[name] = value
    if not prefix:
        dst_locs.update(src_locs)


def _drop_locations(locs: Locs, key: Key) -> None:
    for k in [k for k in locs if k[: len(key)] == key]:
        del locs[k]


def _load_file(
    path: Path, stack: tuple[Path, ...], problems: list[Problem], at: Location | None = None
) -> tuple[dict[str, Any], Locs]:
    """One recipe file with its includes merged underneath it."""
    data, locs, replaced = _read(path, problems, at)
    source = _show_path(path)
    if not isinstance(data, dict):
        message = f"a recipe is a mapping of sections, got {type(data).__name__}"
        raise RecipeError(problems + [Problem(Location(source, 1), "", message)])
    includes = data.pop(INCLUDE_KEY, None)
    include_at = locs.get((INCLUDE_KEY,), Location(source, 1))
    _drop_locations(locs, (INCLUDE_KEY,))
    names = [includes] if isinstance(includes, str) else includes or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        message = f"expected a file name or a list of them, got {includes!r}"
        raise RecipeError(problems + [Problem(include_at, INCLUDE_KEY, message)])
    merged: dict[str, Any] = {}
    merged_locs: Locs = {}
    for name in names:
        target = find_recipe(name, path.parent)
        if target is None:
            looked = f"{_show_path(path.parent)} and the shipped recipes {_show_path(shipped_recipes_dir())}"
            raise RecipeError(problems + [Problem(include_at, INCLUDE_KEY, f"file {name!r} not found (looked in {looked})")])
        if target in stack + (path,):
            chain = " -> ".join(_show_path(p) for p in stack + (path, target))
            raise RecipeError(problems + [Problem(include_at, INCLUDE_KEY, f"include cycle: {chain}")])
        sub, sub_locs = _load_file(target, stack + (path,), problems, include_at)
        _merge(merged, merged_locs, sub, sub_locs)
    _merge(merged, merged_locs, data, locs, replaced=replaced)
    return merged, merged_locs


_SEGMENT = re.compile(r"^([^.\[\]=]+)((?:\[\d+\])*)$")


def _override_key(text: str) -> Key | None:
    key: list[str | int] = []
    for part in text.split("."):
        match = _SEGMENT.match(part.strip())
        if match is None:
            return None
        name = match.group(1)
        key.append(int(name) if name.isdigit() else name)
        key.extend(int(i) for i in re.findall(r"\[(\d+)\]", match.group(2)))
    return tuple(key)


def _register(locs: Locs, key: Key, value: Any, where: Location) -> None:
    locs[key] = where
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for name, child in children:
        _register(locs, key + (name,), child, where)


def _override_location(text: str) -> Location:
    return Location(f"override {text!r}")


def _apply_override(data: dict, locs: Locs, text: str, problems: list[Problem]) -> None:
    """Set one `a.b.c=value` override in the tree, or record why it cannot be set."""
    where = _override_location(text)
    key_text, sep, value_text = text.partition("=")
    key = _override_key(key_text) if sep else None
    if key is None:
        problems.append(Problem(where, "", "expected KEY=VALUE with a dotted key, e.g. trainer.steps=10"))
        return
    if key[0] == INCLUDE_KEY:
        problems.append(Problem(where, INCLUDE_KEY, "include can only be set in a recipe file"))
        return
    try:
        value = yaml.load(value_text, Loader=_RecipeLoader)
    except yaml.YAMLError as exc:
        problems.append(Problem(where, dotted(key), f"value is not valid YAML: {getattr(exc, 'problem', exc)}"))
        return
    node: Any = data
    for depth, seg in enumerate(key):
        here = key[: depth + 1]
        if isinstance(node, list) and isinstance(seg, int):
            if seg >= len(node):
                problems.append(Problem(where, dotted(here), f"index {seg} is past the end of a list of {len(node)}"))
                return
        elif isinstance(node, dict):
            seg = str(seg)
        else:
            problems.append(Problem(where, dotted(key[:depth]), f"is a {type(node).__name__}, not a mapping"))
            return
        if depth == len(key) - 1:
            _drop_locations(locs, here)
            node[seg] = value
            _register(locs, here, value, where)
        elif isinstance(node, dict) and not isinstance(node.get(seg), (dict, list)):
            # A new or scalar intermediate becomes a mapping; the schema then names an unknown key.
            node[seg] = {}
            locs[here] = where
        node = node[seg]


def _note_preset_lines(data: dict, locs: Locs, problems: list[Problem]) -> None:
    """Point keys that come from a file preset (recipes/models/NAME.yaml) at that file's lines."""
    section = data.get("model")
    name = section.get(PRESET_KEY) if isinstance(section, dict) else None
    if not isinstance(name, str) or name in presets.PRESETS:
        return
    path = presets.preset_path(name)
    if path is None:
        return
    _, file_locs, _ = _read(path, problems, locs.get(("model", PRESET_KEY)))
    for key, where in file_locs.items():
        if key[:1] == ("model",) and len(key) > 1 and key[1] not in section:
            locs[key] = where


def _unwrap(ann: Any) -> Any:
    while True:
        origin = typing.get_origin(ann)
        if origin is typing.Annotated:
            ann = typing.get_args(ann)[0]
        elif origin in (Union, types.UnionType):
            options = [a for a in typing.get_args(ann) if a is not type(None)]
            if len(options) != 1:
                return ann
            ann = options[0]
        else:
            return ann


def _annotation_at(loc: Key) -> Any:
    """The schema type at a pydantic error location, or None where the schema does not say."""
    ann: Any = RunConfig
    for seg in loc:
        ann = _unwrap(ann)
        origin = typing.get_origin(ann)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            field = ann.model_fields.get(seg) if isinstance(seg, str) else None
            if field is None:
                return None
            ann = field.annotation
        elif origin in (list, tuple):
            args = typing.get_args(ann)
            ann = args[seg] if origin is tuple and isinstance(seg, int) and seg < len(args) else args[0]
        elif origin is dict:
            ann = typing.get_args(ann)[0 if seg == "[key]" else 1]
        else:
            return None
    return _unwrap(ann)


def _known_keys(loc: Key) -> list[str]:
    ann = _annotation_at(loc)
    if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
        return []
    keys = list(ann.model_fields)
    return keys + [PRESET_KEY, PRETRAINED_KEY] if ann is ModelConfig else keys


def _got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _suggest(word: Any, choices: list[Any]) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


_EXPECTED = {
    "int_type": "int", "int_parsing": "int", "int_from_float": "int",
    "float_type": "float", "float_parsing": "float", "finite_number": "a finite number",
    "bool_type": "bool (true or false)", "bool_parsing": "bool (true or false)",
    "string_type": "str", "list_type": "a list", "tuple_type": "a list",
    "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
}
_BOUNDS = {
    "greater_than": ("gt", ">"), "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"), "less_than_equal": ("le", "<="),
}


def _message(error: dict[str, Any], loc: Key) -> str:
    """A short sentence for one pydantic error."""
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind == "extra_forbidden":
        keys = _known_keys(loc[:-1])
        hint = _suggest(loc[-1], keys)
        if not hint and 0 < len(keys) <= _MAX_LISTED_KEYS:
            hint = f" (valid keys: {', '.join(keys)})"
        return f"unknown key {loc[-1]!r}{hint}"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {_got(value)}"
    if kind == "literal_error":
        # pydantic places a bad dict key at (..., key, "[key]"); the schema walk wants (..., "[key]").
        schema_loc = loc[:-2] + loc[-1:] if loc[-1:] == ("[key]",) else loc
        choices = list(typing.get_args(_annotation_at(schema_loc)))
        listed = ", ".join(repr(c) for c in choices) if choices else ctx.get("expected", "")
        return f"expected one of {listed}, got {_got(value)}{_suggest(value, choices)}"
    if kind in _BOUNDS:
        name, op = _BOUNDS[kind]
        bound = ctx.get(name)
        shown = f"{bound:g}" if isinstance(bound, float) else str(bound)
        return f"must be {op} {shown}, got {_got(value)}"
    if kind == "too_short":
        return f"expected at least {ctx.get('min_length')} item(s), got {ctx.get('actual_length')}"
    if kind == "string_too_short":
        return "must not be empty"
    text = error["msg"].removeprefix("Value error, ")
    return text[:1].lower() + text[1:]


def _locate(loc: Key, locs: Locs, root: Location) -> Location:
    """Where a key path (or its nearest located parent) came from."""
    for end in range(len(loc), 0, -1):
        if loc[:end] in locs:
            return locs[loc[:end]]
    return root


def _wanted_number(ann: Any) -> type | None:
    """int or float when the schema type at a key is that number (an all-int Literal counts as int), else None."""
    if ann in (int, float):
        return ann
    options = typing.get_args(ann) if typing.get_origin(ann) is typing.Literal else ()
    if options and all(type(o) is int for o in options):
        return int
    return None


def _strict_numbers(value: Any, key: Key, locs: Locs, root: Location) -> list[Problem]:
    """bool where the schema wants a number, or a float where it wants an int: pydantic would coerce both."""
    if isinstance(value, dict):
        return [p for name, child in value.items() for p in _strict_numbers(child, key + (name,), locs, root)]
    if isinstance(value, list):
        return [p for index, child in enumerate(value) for p in _strict_numbers(child, key + (index,), locs, root)]
    wanted = _wanted_number(_annotation_at(key)) if key else None
    if wanted is None or not (isinstance(value, bool) or (wanted is int and isinstance(value, float))):
        return []
    return [Problem(_locate(key, locs, root), dotted(key), f"expected {wanted.__name__}, got {_got(value)}")]


def _explain(errors: list[dict[str, Any]], locs: Locs, root: Location) -> list[Problem]:
    """Turn pydantic errors into located problems; missing keys of one mapping become one problem."""

    def locate(loc: Key) -> Location:
        return _locate(loc, locs, root)

    out: list[Problem] = []
    missing: dict[Key, list[str]] = {}
    for error in errors:
        loc = tuple(error["loc"])
        if error["type"] == "missing":
            missing.setdefault(loc[:-1], []).append(str(loc[-1]))
            continue
        where = locate(loc[:-1] if loc[-1:] == ("[key]",) else loc)
        out.append(Problem(where, dotted(loc), _message(error, loc)))
    for parent, names in missing.items():
        ann = _annotation_at(parent)
        if typing.get_origin(ann) is tuple:
            message = f"expected {len(typing.get_args(ann))} items, got {min(int(n) for n in names)}"
        else:
            hint = f" (or name one with {PRESET_KEY})" if parent == ("model",) else ""
            listed = ", ".join(repr(n) for n in names)
            message = f"missing required key{'s' * (len(names) > 1)} {listed}{hint}"
        out.append(Problem(locate(parent), dotted(parent), message))
    return out


def load_recipe(path: str | os.PathLike[str], overrides: Iterable[str] = ()) -> RunConfig:
    """Load, merge, override and validate a recipe; raise RecipeError listing every problem."""
    found = find_recipe(path)
    if found is None:
        raise RecipeError([Problem(Location(str(path)), "", "recipe file not found")])
    overrides = list(overrides)
    problems: list[Problem] = []
    data, locs = _load_file(found, (), problems)
    for text in overrides:
        _apply_override(data, locs, text, problems)
    _note_preset_lines(data, locs, problems)
    root = Location(_show_path(found), 1)
    problems += _strict_numbers(data, (), locs, root)
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        problems += _explain(exc.errors(), locs, root)
    if problems:
        # A float where an int belongs is reported by both the strict walk and pydantic: once is enough.
        problems = list(dict.fromkeys(problems))
        # File problems in file and line order, then the overrides' in command-line order.
        order = {_override_location(text): index for index, text in enumerate(overrides)}

        def rank(problem: Problem) -> tuple[int, str, int]:
            if problem.location in order:
                return (1, "", order[problem.location])
            return (0, problem.location.source, problem.location.line or 0)

        raise RecipeError(sorted(problems, key=rank))
    return config


def dump_config(config: RunConfig) -> str:
    """The resolved config as YAML, sections and fields in schema order."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False, allow_unicode=True, width=100)
