"""The env registry: ids → specs, lazy entry points resolved in the process that makes the env, plugins.

Specs are plain data, so a worker process (a Ray actor) rebuilds the same registry by itself: built-in
domains (every sub-package of jointrl.envs) register on first use there, and third-party packages do
so through the entry-point group
`jointrl.envs` (each entry point is a function that calls `register`, or a module whose import does). A
plugin whose registration raises is skipped with one logged line and its partial registrations undone, so
one broken package never hides the other envs. Nothing downloads at import, registration or reset.
"""
from __future__ import annotations

import difflib
import fnmatch
import importlib
import logging
import pkgutil
import threading
from importlib import metadata

from jointrl.envs.base import Env, EnvSpec

PLUGIN_GROUP = "jointrl.envs"

_SPECS: dict[str, EnvSpec] = {}
_loaded = False  # every built-in and plugin has registered
_loading = False
# Threads that make envs at once (demo collection) wait here for the first one's loading: reentrant, since a plugin
# may list envs while it registers (it then sees what is registered so far).
_LOCK = threading.RLock()
# One line per plugin whose registration raised in this process (`jointrl envs list` and friends show them).
_FAILED: list[str] = []
log = logging.getLogger(__name__)


def register(spec: EnvSpec | None = None, /, **fields) -> EnvSpec:
    """Add an env spec (or build one from keyword fields); the same id twice is an error."""
    spec = spec if spec is not None else EnvSpec(**fields)
    if spec.id in _SPECS and _SPECS[spec.id] != spec:
        raise ValueError(f"env id {spec.id!r} is already registered with entry point {_SPECS[spec.id].entry_point}")
    _SPECS[spec.id] = spec
    return spec


def _load() -> None:
    global _loaded, _loading
    if _loaded:
        return
    with _LOCK:
        if _loaded or _loading:
            return
        _loading = True
        try:
            _register_all()
        finally:
            _loading, _loaded = False, True


def _register_all() -> None:
    for module in builtin_domains():
        importlib.import_module(module).register()
    for entry in metadata.entry_points(group=PLUGIN_GROUP):
        before = set(_SPECS)
        try:
            run_plugin(entry)
        except Exception as err:  # a third party's bug must not take the built-in envs down with it
            for env_id in set(_SPECS) - before:
                del _SPECS[env_id]
            _FAILED.append(plugin_failure("env", entry, err))
            log.warning(_FAILED[-1])


def run_plugin(entry: metadata.EntryPoint) -> None:
    """Register one plugin: call the function an entry point names, or just import the module it names."""
    loaded = entry.load()
    if callable(loaded):
        loaded()


def plugin_failure(kind: str, entry: metadata.EntryPoint, err: BaseException) -> str:
    """One line naming a plugin (entry point name and target) and why its registration failed."""
    reason = " ".join(f"{type(err).__name__}: {err}".split())
    return f"{kind} plugin {entry.name!r} ({entry.value}) failed to register and is skipped: {reason}"


def failed_plugins() -> list[str]:
    """The one-line report of every env plugin whose registration raised in this process."""
    _load()
    return list(_FAILED)


# Subpackages of jointrl.envs that serve every domain rather than being one.
INFRASTRUCTURE = ("sandbox",)


def builtin_domains() -> list[str]:
    """The domain packages under jointrl.envs (each exposes a cheap `register()` that only adds specs)."""
    import jointrl.envs

    packages = pkgutil.iter_modules(jointrl.envs.__path__)
    return [f"jointrl.envs.{m.name}" for m in packages if m.ispkg and m.name not in INFRASTRUCTURE]


def reload_plugins() -> None:
    """Forget every spec and register the built-ins and plugins again (after installing a plugin)."""
    global _loaded
    with _LOCK:
        _SPECS.clear()
        _FAILED.clear()
        _loaded = False
        _load()


def env_ids(pattern: str = "*") -> list[str]:
    """Registered ids matching a glob (`swe/*:hard`), sorted."""
    _load()
    return sorted(i for i in _SPECS if fnmatch.fnmatchcase(i, pattern))


def no_match_message(pattern: str) -> str:
    """Why a glob or id selects nothing, with the closest ids or globs (`sw/*:hard` -> `swe/*:hard`)."""
    _load()
    # Suggest globs a user would write as well as ids: domain/*, domain/*:difficulty, domain/family-vN:*.
    candidates = set(_SPECS)
    for env_id in _SPECS:
        domain, _, rest = env_id.partition("/")
        family, _, difficulty = rest.rpartition(":")
        candidates |= {f"{domain}/*", f"{domain}/*:{difficulty}", f"{domain}/{family}:*", f"*:{difficulty}"}
    close = difflib.get_close_matches(pattern, sorted(candidates), n=3)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    what = "no registered env id matches" if any(c in pattern for c in "*?[") else "unknown env id"
    return f"{what} {pattern!r}{hint}"


def spec(env_id: str) -> EnvSpec:
    """The spec of one id; an unknown id raises naming close matches."""
    _load()
    if env_id not in _SPECS:
        close = difflib.get_close_matches(env_id, list(_SPECS), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise KeyError(f"unknown env id {env_id!r}{hint}")
    return _SPECS[env_id]


def resolve(entry_point: str):
    """Import 'module:attr' and return the attribute."""
    module, _, attr = entry_point.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"entry point {entry_point!r} cannot be loaded: {err}") from err


def make(env_id: str) -> Env:
    """A fresh env instance for one episode (call reset(seed) next)."""
    env_spec = spec(env_id)
    cls = resolve(env_spec.entry_point)
    env = cls(difficulty=env_spec.difficulty, **env_spec.kwargs)
    if not isinstance(env, Env):
        raise TypeError(f"{env_spec.entry_point} made a {type(env).__name__}, not a jointrl Env")
    env.spec = env_spec
    return env
