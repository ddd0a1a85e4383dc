"""Measure reasoning-gym datasets against the domain's bar: reset cost, redraws, and the same task in every process.

`python -m jointrl.envs.reasoning.audit [--seeds N] [--knobs] [NAME ...]` prints one row per variant (default,
hard, and with --knobs the hard rule's full move and each of its knobs alone) with the CPU seconds per
reset (mean and max over the seeds, after one warm-up reset), how many seeds needed a redraw, any error, and whether a process with
another string-hash seed draws the same questions. Datasets named on the command line are audited even
when excluded, so the reasons in exclusions.py can be re-measured after an upgrade.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from reasoning_gym.factory import CURRICULA, DATASETS

from jointrl.envs.reasoning import build_catalog, entries, hardness
from jointrl.envs.reasoning.catalog import CATALOG
from jointrl.envs.reasoning.exclusions import EXCLUDED_DATASETS

# A reset slower than this (CPU seconds, mean over seeds) excludes a dataset or freezes a knob.
RESET_BUDGET_S = 0.2
# One reset may take at most this long (wall seconds) before the audit gives up on the variant.
RESET_TIMEOUT_S = 5


def variants(name: str, knobs: bool) -> dict[str, dict[str, Any]]:
    """The configs to audit for one dataset: label → config overrides."""
    out: dict[str, dict[str, Any]] = {"default": {}}
    moves = hardness.knob_moves(CURRICULA[name](), DATASETS[name][1]()) if name in CURRICULA else {}
    full_move = {field: value for fields in moves.values() for field, value in fields.items()}
    # An excluded dataset has no frozen knobs on record: its hard config is the rule's full move.
    hard = full_move if name in EXCLUDED_DATASETS else build_catalog.hard_config(name)
    if hard:
        out["hard"] = hard
    if knobs and moves:
        out["rule, no knob frozen"] = full_move
        out.update({f"knob {knob}": fields for knob, fields in moves.items()})
    return out


def digests(name: str, config: dict[str, Any], seeds: list[int]) -> list[str]:
    """A short hash of the drawn question for each seed (compared across processes).

    Only the question must match: where many answers are right (word_ladder), the shipped reference may be a
    different right answer in another process, which the verifier accepts all the same.
    """
    out = []
    for seed in seeds:
        drawn = entries.draw(name, config, seed)
        out.append(hashlib.sha256(drawn.entry["question"].encode()).hexdigest()[:12])
    return out


def digests_in_processes(jobs: list[tuple[str, dict[str, Any]]], seeds: list[int], hash_seeds: tuple[int, ...] = (1, 2)) -> list[list[list[str] | None]]:
    """`digests` of each (name, config), computed at once in one fresh interpreter per PYTHONHASHSEED (None on error)."""
    code = (
        "import json, sys\n"
        "from jointrl.envs.reasoning.audit import digests\n"
        "jobs, seeds = json.load(sys.stdin)\n"
        "out = []\n"
        "for name, config in jobs:\n"
        "    try:\n"
        "        out.append(digests(name, config, seeds))\n"
        "    except Exception:\n"
        "        out.append(None)\n"
        "print(json.dumps(out))\n"
    )
    children = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": str(hash_seed)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for hash_seed in hash_seeds
    ]
    results = []
    for child in children:
        out, err = child.communicate(json.dumps([jobs, seeds]))
        if child.returncode != 0:
            raise RuntimeError(f"digest process failed (exit {child.returncode}): {err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def _on_alarm(signum, frame):
    raise TimeoutError(f"a reset took over {RESET_TIMEOUT_S} s")


def measure(name: str, config: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    """CPU seconds per reset (mean, max), redraw count and first error for one variant over the seeds."""
    signal.signal(signal.SIGALRM, _on_alarm)
    times, redraws = [], 0
    try:
        signal.alarm(RESET_TIMEOUT_S)
        entries.draw(name, config, 10**6)  # warm-up: data files, lazy imports, caches
        for seed in seeds:
            signal.alarm(RESET_TIMEOUT_S)
            start = time.process_time()
            drawn = entries.draw(name, config, seed)
            times.append(time.process_time() - start)
            redraws += drawn.attempts > 0
        error = ""
    except Exception as err:
        error = f"{type(err).__name__}: {err}"[:200]
    finally:
        signal.alarm(0)
    mean = sum(times) / len(times) if times else float("nan")
    return {"mean": mean, "max": max(times, default=float("nan")), "done": len(times), "redraws": redraws, "error": error}


def main(argv: list[str] | None = None) -> None:
    """Print the audit table for the named datasets (default: every catalogued dataset)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="reasoning-gym dataset names (default: the catalog)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per variant (0..N-1)")
    parser.add_argument("--knobs", action="store_true", help="also audit each hard-rule knob alone")
    args = parser.parse_args(argv)
    seeds = list(range(args.seeds))
    jobs = [(name, label, config) for name in (args.names or list(CATALOG)) for label, config in variants(name, args.knobs).items()]
    here = [measure(name, config, seeds) for name, _, config in jobs]
    usable = [(name, config) for (name, _, config), row in zip(jobs, here) if not row["error"]]
    first, second = digests_in_processes(usable, seeds)
    same = {json.dumps(job): a is not None and a == b for job, a, b in zip(usable, first, second)}
    for (name, label, config), row in zip(jobs, here):
        stable = same.get(json.dumps((name, config)))
        verdict = "slow" if row["mean"] > RESET_BUDGET_S else ""
        print(
            f"{name:26s} {label:24s} cpu mean {row['mean']:.3f} s max {row['max']:.3f} s  seeds {row['done']}/{len(seeds)}  "
            f"redraws {row['redraws']}  same-across-processes {stable}  {verdict} {row['error']}"
        )


if __name__ == "__main__":
    main()
