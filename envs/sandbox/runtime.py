"""The Python that sandboxed programs run: this installation's base interpreter without its virtual
environment, and a site of just the distributions the tasks use (no jointrl, no torch, no ray).

Inside the sandbox the interpreter keeps its host path (only its own prefix is bound, read-only, so no
sibling of it is visible), its own site-packages is hidden under an empty tmpfs, and the files of the
chosen distributions, with everything they require, are bound one top-level entry at a time under SITE,
which PYTHONPATH names. An env may add a folder of its own as an importable package (the CAD domain's
`cadkit`). A distribution that is not installed here is left out: its tasks' tools then report the
missing module to the model like any other error.
"""
from __future__ import annotations

import os
import re
import sys
import sysconfig
from functools import lru_cache
from importlib import metadata
from pathlib import Path

SITE = "/opt/python-site"
# What the tasks' programs import: pytest for the swe test tool, numpy and manifold3d for CAD programs,
# the office readers for document questions.
DISTRIBUTIONS = ("pytest", "pytest-timeout", "numpy", "manifold3d", "openpyxl", "python-docx", "pypdf")


def _base_executable() -> str:
    """The interpreter a virtual environment was made from (this one when there is none)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


PYTHON = _base_executable()


def _requirement_names(dist: metadata.Distribution) -> list[str]:
    """Names of what a distribution requires outside any extra (markers otherwise ignored: absent means skipped)."""
    names = []
    for text in dist.requires or []:
        requirement, _, marker = text.partition(";")
        if "extra" in marker:
            continue
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if match:
            names.append(match.group(1))
    return names


def _closure(names: tuple[str, ...]) -> list[metadata.Distribution]:
    """The installed distributions among `names` and everything they require, each once."""
    found: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found[key] = dist
        todo += _requirement_names(dist)
    return [found[k] for k in sorted(found)]


@lru_cache(maxsize=None)
def site_entries(names: tuple[str, ...] = DISTRIBUTIONS) -> tuple[tuple[str, str], ...]:
    """(host path, name under SITE) of every top-level file or folder the distributions install."""
    entries: dict[str, str] = {}
    for dist in _closure(names):
        for path in dist.files or []:
            top = path.parts[0]
            if top in ("..", "__pycache__") or top.endswith(".pth"):
                continue  # scripts outside site-packages, bytecode, path hooks
            host = Path(dist.locate_file(top))
            if host.exists():
                entries.setdefault(top, str(host))
    return tuple(sorted((host, name) for name, host in entries.items()))


@lru_cache(maxsize=None)
def _interpreter_mounts() -> tuple[tuple, ...]:
    """The interpreter's prefix, its hidden site-packages and an empty SITE: the same for every command of a process."""
    prefix = os.path.realpath(sys.base_prefix)
    plan: list[tuple] = []
    if not any(prefix == f"/{top}" or prefix.startswith(f"/{top}/") for top in ("usr", "bin", "lib")):
        # Its ancestors are made fresh and open (on the host one may be closed to others, like /root).
        plan += [("dir", str(parent), 0o755) for parent in reversed(Path(prefix).parents) if str(parent) != "/"]
        plan.append(("ro", prefix, prefix))
    # The base interpreter's own site-packages may hold whatever was installed system-wide: hide it.
    purelib = os.path.realpath(sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})["purelib"])
    if os.path.isdir(purelib) and purelib.startswith(prefix + "/"):
        plan += [("tmpfs", purelib, 1 << 16, 0o755), ("readonly", purelib)]
    plan += [("tmpfs", "/opt", 1 << 16, 0o755), ("dir", SITE, 0o755)]
    return tuple(plan)


def python_mounts(site: tuple[str, ...], packages: dict[str, Path] | None = None) -> list[tuple]:
    """Mount-plan operations (see confine.mount_plan) that give the sandbox its interpreter and SITE.

    site: the distributions SITE offers (each with what it requires); () leaves just the standard library.
    """
    plan = list(_interpreter_mounts())
    plan += [("ro", host, f"{SITE}/{name}") for host, name in site_entries(tuple(sorted(site)))]
    for name, folder in sorted((packages or {}).items()):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"sandbox package name {name!r} is not a Python identifier")
        plan.append(("ro", str(Path(folder).resolve()), f"{SITE}/{name}"))
    plan.append(("readonly", "/opt"))
    return plan


def python_env() -> dict[str, str]:
    """Environment variables that point the sandbox's interpreter at SITE and nowhere else."""
    return {"PYTHONPATH": SITE, "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
