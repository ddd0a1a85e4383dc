"""The committed bug manifest: per package, its graded cases with reference outcomes, its validated bugs
and its held-out files. `jointrl envs prepare swe --mine` regenerates it; episodes only read it.
"""
from __future__ import annotations

import json
import time
from functools import lru_cache
from pathlib import Path

from jointrl.envs.swe.realcode import mine
from jointrl.envs.swe.realcode.cases import Case
from jointrl.envs.swe.realcode.sources import SOURCES, Source

PATH = Path(__file__).parent / "bugs.json"


def entry(pin: Source, mined: mine.Mined, seconds: float) -> dict:
    """The manifest entry of one mined package."""
    return {"version": pin.version, "sha256": pin.sha256, "passing_tests": mined.passed, "tried": mined.tried,
            "seconds": round(seconds, 1),
            "cases": [[c.module, c.name, c.args, c.visible, outcome] for c, outcome in mined.cases],
            "held_out_files": mine.split(pin, mined.bugs), "bugs": mined.bugs}


def mine_all(pins: tuple[Source, ...] = SOURCES, path: Path = PATH, root=None, log=print) -> dict:
    """Mine every pin and write the manifest; returns it."""
    packages = {}
    for pin in pins:
        started = time.perf_counter()
        packages[pin.family] = entry(pin, mine.mine(pin, root, log=log), time.perf_counter() - started)
    write({"packages": packages}, path)
    return {"packages": packages}


def write(data: dict, path: Path = PATH) -> None:
    """Write the manifest: one line per case and per bug, so diffs stay readable."""
    lines = ["{\"packages\": {"]
    families = sorted(data["packages"])
    for n, family in enumerate(families):
        package = data["packages"][family]
        head = {k: v for k, v in package.items() if k not in ("cases", "bugs")}
        lines.append(f"{json.dumps(family)}: {{")
        lines += [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
        for key in ("cases", "bugs"):
            items = package[key]
            lines.append(f"  {json.dumps(key)}: [")
            lines += [f"    {json.dumps(item, sort_keys=True)}{',' if i < len(items) - 1 else ''}" for i, item in enumerate(items)]
            lines.append("  ]" + ("," if key == "cases" else ""))
        lines.append("}" + ("," if n < len(families) - 1 else ""))
    lines.append("}}")
    # Written aside and renamed, so a process reading the manifest never sees half of it.
    partial = path.with_suffix(".json.partial")
    partial.write_text("\n".join(lines) + "\n")
    partial.replace(path)


@lru_cache(maxsize=1)
def load(path: Path = PATH) -> dict:
    """The manifest's packages by family; raises naming the command that writes it when it is missing."""
    if not path.is_file():
        raise FileNotFoundError(f"the swe bug manifest {path} is missing; run `jointrl envs prepare swe --mine`")
    return json.loads(path.read_text())["packages"]


def graded_cases(family: str) -> list[tuple[Case, dict]]:
    """A package's graded cases with their reference outcomes."""
    return [(Case(m, n, a, v), outcome) for m, n, a, v, outcome in load()[family]["cases"]]
