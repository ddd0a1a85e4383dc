"""Played demonstrations kept on disk, keyed by the code that played them.

A cold start replays thousands of scripted solutions, each CAD one a sandboxed program: ~8 of the agents_cpu
cold start's minutes, the same for every trainer seed. A later run whose env code, Python and installed packages are
unchanged reads them back instead of playing them again.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import sys
from importlib import metadata
from pathlib import Path

from jointrl.envs import registry
from jointrl.rl.sft import Conversation

Job = tuple[str, int, str | None]  # (env id, seed, tier; None = the env's default tier)
Played = tuple[Conversation, bool]  # the conversation, and whether it solved its task


def _package_dir(module: str) -> Path:
    # The whole package an env comes from (jointrl.envs for the built-in ones, else a plugin's top-level package):
    # a demo depends on the env's helpers and shared code, not on its own module alone.
    parts = module.split(".")
    package = ".".join(parts[:2]) if parts[0] == "jointrl" else parts[0]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"cannot locate package {package!r} of env module {module!r} to fingerprint its code")
    return Path(next(iter(spec.submodule_search_locations)))


def tree_digest(root: Path) -> str:
    """A sha256 over every file under root, its path relative to root and its bytes (`__pycache__` left out)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


# An env package does not change under a running process: digest each once.
_tree_digest = functools.lru_cache(maxsize=None)(tree_digest)


@functools.lru_cache(maxsize=None)
def _interpreter_digest() -> str:
    # Sandboxed programs print what the installed packages make of them (a solid's triangle count, say).
    installed = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions())
    return hashlib.sha256("\n".join([sys.version, *installed]).encode()).hexdigest()


def fingerprint(env_id: str) -> str:
    """A digest of what an env id's demonstrations depend on: its spec, its package's files, the demo player,
    Python and the installed packages."""
    spec = registry.spec(env_id)
    player = Path(__file__).with_name("demos.py")
    parts = [json.dumps(dataclasses.asdict(spec), sort_keys=True, default=str),
             _tree_digest(_package_dir(spec.entry_point.partition(":")[0])),
             hashlib.sha256(player.read_bytes()).hexdigest(), _interpreter_digest()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def cache_file(cache: Path, env_id: str) -> Path:
    """Where an env id's played demonstrations live under `cache` for the current code."""
    return cache / f"{env_id.replace('/', '__').replace(':', '@')}-{fingerprint(env_id)}.jsonl"


def load(cache: Path, env_id: str) -> dict[Job, Played]:
    """The demonstrations of `env_id` played earlier with the current code; none if there are none."""
    path = cache_file(cache, env_id)
    if not path.is_file():
        return {}
    played: dict[Job, Played] = {}
    for line_no, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            record = json.loads(line)
            played[(env_id, record["seed"], record["tier"])] = (Conversation(**record["conversation"]),
                                                               record["solved"])
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(f"{path}:{line_no}: not a played demonstration ({err}); delete the file to play its "
                             "demonstrations again") from err
    return played


def store(cache: Path, env_id: str, played: dict[Job, Played]) -> None:
    """Add newly played demonstrations of `env_id` to its file, written whole so a reader never sees half of it."""
    path = cache_file(cache, env_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    merged = {**load(cache, env_id), **played}
    lines = [json.dumps({"seed": seed, "tier": tier, "solved": solved, "conversation": dataclasses.asdict(conv)})
             for (_, seed, tier), (conv, solved) in merged.items()]
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)
