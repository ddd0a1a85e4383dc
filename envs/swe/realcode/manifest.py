"""The committed bug manifest: per package, its graded cases with reference outcomes, its validated bugs
and its held-out files. `jointrl envs prepare swe --mine` regenerates it; episodes only read it.
"""
from __future__ import annotations

import json
import time
from concurrent.futures import ProcessPoolExecutor
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


def _mine_one(pin: Source, root) -> tuple[str, dict]:
    started = time.perf_counter()
    mined = mine.mine(pin, root, log=lambda line: print(line, flush=True))
    return pin.family, entry(pin, mined, time.perf_counter() - started)


def mine_all(pins: tuple[Source, ...] = SOURCES, path: Path = PATH, root=None, jobs: int = 1) -> dict:
    """Mine every pin (`jobs` packages at once, each in its own process) and write the manifest; returns it."""
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            mined = list(pool.map(_mine_one, pins, [root] * len(pins)))
    else:
        mined = [_mine_one(pin, root) for pin in pins]
    # Re-mining some packages keeps the others' entries (pins no longer in SOURCES are dropped).
    known = {pin.family for pin in SOURCES}
    kept = json.loads(path.read_text())["packages"] if path.is_file() else {}
    packages = dict(sorted({**{f: p for f, p in kept.items() if f in known}, **dict(mined)}.items()))
    write({"packages": packages}, path)
    load.cache_clear()
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
