"""The reward registry: named reward functions, the parameters each accepts, and checks of a recipe's terms.

A reward is `fn(episode, **params) -> float | None`; None means the reward abstains (the signal it needs is
absent). `@register` records a function under a name, reads its keyword parameters and their types from
the signature, and wraps it so that every reward abstains on a failed episode and never returns NaN.

Packages add rewards through the entry-point group `jointrl.rewards`: each entry point names a function that
registers rewards, or a module whose import does (a module of `@register` functions). Plugins load on the
first lookup in each process, so a Ray actor that scores episodes finds them as the driver does; one whose
registration raises is skipped with a one-line log message and its partial registrations undone.
"""
from __future__ import annotations

import difflib
import functools
import inspect
import logging
import math
import re
import types
import typing
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable, Mapping

from jointrl.envs.episode import Episode

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
REQUIRED = inspect.Parameter.empty
# Parameter types a recipe can express in YAML; anything richer would need a schema of its own.
SIMPLE_TYPES = (bool, int, float, str)

Check = Callable[[dict[str, Any]], list[str]]
PLUGIN_GROUP = "jointrl.rewards"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Param:
    """One keyword parameter of a reward: its type and default (REQUIRED when it has none)."""

    name: str
    annotation: Any
    default: Any = REQUIRED

    @property
    def required(self) -> bool:
        """Whether a recipe must give this parameter."""
        return self.default is REQUIRED


@dataclass(frozen=True)
class Reward:
    """A registered reward: its name, the wrapped function, its parameters and an optional value check."""

    name: str
    fn: Callable[..., float | None]
    params: Mapping[str, Param]
    check: Check | None = None
    source: str = ""  # the defining module, and the plugin that registered it if one did

    @property
    def summary(self) -> str:
        """The first line of the reward's docstring."""
        return (self.fn.__doc__ or "").strip().splitlines()[0]

    def __call__(self, episode: Episode, **params: Any) -> float | None:
        """The reward of one episode, or None where it abstains."""
        return self.fn(episode, **params)


_REWARDS: dict[str, Reward] = {}
_plugins_loaded = False
# The plugin being registered right now, so `register` can say where a reward came from.
_loading: str | None = None
# One line per plugin whose registration raised in this process.
_FAILED: list[str] = []


def register(name: str | None = None, *, check: Check | None = None) -> Callable:
    """Decorator: register `fn(episode, **params)` under `name` (default: the function's name)."""

    def wrap(fn: Callable[..., float | None]) -> Callable[..., float | None]:
        key = name or fn.__name__
        if not NAME.match(key):
            raise ValueError(f"reward name {key!r} must be lower_snake_case (it becomes part of metric names)")
        if ">>>" not in (fn.__doc__ or ""):
            raise ValueError(f"reward {key!r} needs a docstring with an example (>>>)")
        params = _read_params(key, fn)
        if key in _REWARDS and _origin(_REWARDS[key].fn.__wrapped__) != _origin(fn):
            raise ValueError(f"reward {key!r} is already registered by {_REWARDS[key].fn.__module__}")
        guarded = _guard(key, fn)
        source = f"{_loading}: {fn.__module__}" if _loading else fn.__module__
        _REWARDS[key] = Reward(key, guarded, params, check, source)
        return guarded

    return wrap


def _load_plugins() -> None:
    global _plugins_loaded, _loading
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for entry in metadata.entry_points(group=PLUGIN_GROUP):
        before = set(_REWARDS)
        dist = f"{entry.dist.name} {entry.dist.version}" if entry.dist else "unknown distribution"
        _loading = f"plugin {entry.name!r} ({dist})"
        try:
            loaded = entry.load()
            # An entry point naming a module registered its rewards on import; one naming a function calls it.
            if callable(loaded):
                loaded()
        except Exception as err:  # a third party's bug must not take the built-in rewards down with it
            for name in set(_REWARDS) - before:
                del _REWARDS[name]
            reason = " ".join(f"{type(err).__name__}: {err}".split())
            _FAILED.append(f"reward plugin {entry.name!r} ({entry.value}) failed to register and is skipped: {reason}")
            log.warning(_FAILED[-1])
        finally:
            _loading = None


def failed_plugins() -> list[str]:
    """The one-line report of every reward plugin whose registration raised in this process."""
    _load_plugins()
    return list(_FAILED)


def get(name: str) -> Reward:
    """The reward registered as `name`; an unknown name raises ValueError suggesting close names."""
    _load_plugins()
    if name not in _REWARDS:
        raise ValueError(unknown_message(name))
    return _REWARDS[name]


def names() -> list[str]:
    """Every registered reward name (built-in and from plugins), sorted."""
    _load_plugins()
    return sorted(_REWARDS)


def unknown_message(name: str) -> str:
    """The error text for a reward name nobody registered, with the closest known names."""
    close = difflib.get_close_matches(name, names(), n=3)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}?" if close else f"known: {', '.join(names())}"
    return f"unknown reward {name!r} ({hint})"


def param_problems(name: str, params: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    """(parameter or None, message) per problem of `params` for reward `name` (empty if fine); unknown name raises."""
    reward = get(name)
    accepted = ", ".join(reward.params) or "none"
    problems: list[tuple[str | None, str]] = []
    for key, value in params.items():
        if key not in reward.params:
            problems.append((key, f"reward {name!r} has no parameter {key!r} (accepted: {accepted})"))
        elif not _type_ok(value, reward.params[key].annotation):
            expected = _type_name(reward.params[key].annotation)
            problems.append((key, f"reward {name!r}: parameter {key!r} must be {expected}, got {value!r}"))
    for param in reward.params.values():
        if param.required and param.name not in params:
            problems.append((None, f"reward {name!r} needs parameter {param.name!r}"))
    # Cross-parameter checks assume each value has the right type, so they run only on a clean signature.
    if not problems and reward.check is not None:
        problems += [(None, f"reward {name!r}: {message}") for message in reward.check(_with_defaults(reward, params))]
    return problems


def validate(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Check `params` for reward `name` and return them with defaults filled in; any problem raises ValueError."""
    problems = param_problems(name, params)
    if problems:
        raise ValueError("; ".join(message for _, message in problems))
    return _with_defaults(get(name), params)


def _with_defaults(reward: Reward, params: Mapping[str, Any]) -> dict[str, Any]:
    return {p.name: params.get(p.name, p.default) for p in reward.params.values()}


def _origin(fn: Callable) -> str:
    # By qualified name, so re-importing the defining module (a reload) is not a clash with itself.
    return f"{fn.__module__}.{fn.__qualname__}"


def _guard(name: str, fn: Callable[..., float | None]) -> Callable[..., float | None]:
    @functools.wraps(fn)
    def guarded(episode: Episode, **params: Any) -> float | None:
        # A failed episode says nothing about the policy; one check here means no reward can forget it.
        if episode.failed:
            return None
        value = fn(episode, **params)
        if value is None:
            return None
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"reward {name!r} gave {value} on {episode.env_id} seed {episode.seed}")
        return value

    return guarded


def _read_params(name: str, fn: Callable) -> dict[str, Param]:
    signature = inspect.signature(fn, eval_str=True)
    listed = list(signature.parameters.values())
    if not listed or listed[0].kind not in (listed[0].POSITIONAL_ONLY, listed[0].POSITIONAL_OR_KEYWORD):
        raise TypeError(f"reward {name!r} must take the episode as its first argument")
    params: dict[str, Param] = {}
    for p in listed[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"reward {name!r}: parameter {p.name!r} must be an ordinary keyword parameter")
        if not _supported(p.annotation):
            raise TypeError(f"reward {name!r}: parameter {p.name!r} has a type a recipe cannot give: {p.annotation!r}")
        params[p.name] = Param(p.name, p.annotation, p.default)
    return params


def _options(annotation: Any) -> tuple[Any, ...]:
    """The alternatives of a union annotation (`float | None` -> (float, NoneType)), else the annotation alone."""
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        return typing.get_args(annotation)
    return (annotation,)


def _supported(annotation: Any) -> bool:
    for option in _options(annotation):
        is_str_list = typing.get_origin(option) is list and typing.get_args(option) == (str,)
        if not (option in SIMPLE_TYPES or option is type(None) or is_str_list):
            return False
    return True


def _type_ok(value: Any, annotation: Any) -> bool:
    for option in _options(annotation):
        if option is type(None) and value is None:
            return True
        # bool is an int subclass, but `threshold: true` in a recipe is a mistake, not the number 1.
        if option is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return math.isfinite(value)
        if option is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if option in (bool, str) and isinstance(value, option):
            return True
        if typing.get_origin(option) is list and isinstance(value, (list, tuple)):
            return all(isinstance(item, str) for item in value)
    return False


def _type_name(annotation: Any) -> str:
    def one(option: Any) -> str:
        if option is type(None):
            return "null"
        if typing.get_origin(option) is list:
            return "a list of strings"
        return {float: "a finite number", int: "an integer", bool: "true or false", str: "a string"}[option]

    return " or ".join(one(option) for option in _options(annotation))
