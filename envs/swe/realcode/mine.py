"""Mine validated bugs from a pinned package: mutate covered functions, keep the mutants its tests catch.

For each package: trace the pristine suite (tracing.py), fix the graded cases and their reference
outcomes (cases.py), then try AST mutants (envs/swe/mutation.py) of the functions passing tests call, in a
seeded order with a cap per function, of functions that some graded case reaches (reach.py). A mutant is
kept when, in a sandbox,
  - some graded case changes outcome, at least one of them a case no visible test makes, at most half of
    all cases change, and not only into TypeErrors (a crash, not a bug people write); and
  - rerunning the passing tests that call the function under pytest, at least one now fails
    (FAIL_TO_PASS); tests that never call it cannot change.
Results go to the committed manifest (manifest.py), so preparing a machine only downloads and unpacks.
"""
from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

from jointrl.envs.sandbox import Limits, Sandbox
from jointrl.envs.swe.mutation import Mutation, mutations
from jointrl.envs.swe.realcode import cases as case_lib
from jointrl.envs.swe.realcode import tracing
from jointrl.envs.swe.realcode.prepare import workspace_files
from jointrl.envs.swe.realcode.sources import Source

PER_FUNCTION = 12  # mutants tried per function, so bugs spread over the package
MAX_TRIED = 450  # mutants tried per package
MAX_TESTS = 60  # covering tests rerun per mutant
HELD_OUT_SHARE = 0.4  # at most this share of a package's bugs sits in held-out files
CASE_TIMEOUT = 2.0
MINE_LIMITS = Limits(wall_seconds=120.0, cpu_seconds=120, output_bytes=4 << 20)
FAILED = re.compile(r"^FAILED (\S+?)(?: - (.*))?$")


@dataclass(frozen=True)
class Mined:
    """A package's graded cases with reference outcomes and its validated bugs."""

    cases: list  # [(Case, outcome dict)]
    bugs: list  # [dict], see `_record`
    passed: int  # tests passing on the pristine package
    tried: int  # mutants tried


def source_files(files: dict[str, str], pin: Source) -> list[str]:
    """The package's own modules (not its tests), ASCII only: mutation offsets are character offsets."""
    tests = pin.workspace_tests + "/"
    return [p for p in sorted(files) if p.startswith(pin.package + "/") and p.endswith(".py")
            and not p.startswith(tests) and files[p].isascii()]


def _order(found: list[Mutation], rng: random.Random) -> list[Mutation]:
    """At most PER_FUNCTION mutants per function, kinds taken in turn, functions interleaved."""
    by_function: dict[str, list[Mutation]] = {}
    for mutation in found:
        by_function.setdefault(mutation.function, []).append(mutation)
    queues = []
    for function in sorted(by_function):
        sites = by_function[function]
        rng.shuffle(sites)
        kinds: dict[str, list[Mutation]] = {}
        for site in sites:
            kinds.setdefault(site.kind, []).append(site)
        picked = []
        while len(picked) < PER_FUNCTION and any(kinds.values()):
            picked += [kinds[k].pop() for k in sorted(kinds) if kinds[k]][: PER_FUNCTION - len(picked)]
        queues.append(picked)
    rng.shuffle(queues)
    ordered = []
    while any(queues):
        ordered += [q.pop(0) for q in queues if q]
    return ordered


def failures(output: str) -> dict[str, str]:
    """Failed test ids of a `pytest -q -rf` run and their one-line reasons."""
    found = {}
    for line in output.splitlines():
        match = FAILED.match(line.strip())
        if match:
            found[match.group(1)] = (match.group(2) or "").strip()
    return found


def error_lines(output: str, limit: int = 8) -> list[str]:
    """The `E ` lines pytest printed for the first failing test (the assertion and what it compared)."""
    lines = []
    for line in output.splitlines():
        if line.startswith("E "):
            lines.append(line[2:].rstrip()[:200])
        elif lines and line.startswith("___"):
            break
    return lines[:limit]


def mine(pin: Source, root=None, max_tried: int = MAX_TRIED, log=print) -> Mined:
    """Trace, fix cases, try mutants and validate them for one pinned package (deterministic per pin)."""
    files = workspace_files(pin, root)
    trace = tracing.trace(files, pin.package, pin.workspace_tests)
    passed = set(trace.passed)
    graded = case_lib.reference(files, case_lib.candidates(trace.calls, pin.name), pin.package)
    with Sandbox(MINE_LIMITS, files=files) as box:
        reached = case_lib.reached(box, [c for c, _ in graded], pin.package)
    hidden_count = sum(not c.visible for c, _ in graded)
    log(f"{pin.name}: {len(passed)} passing tests, {len(graded)} graded cases ({hidden_count} never in the tests)")
    # Only a function some case reaches can change a case; only the cases reaching it are rerun.
    reaching: dict[tuple[str, str], list[int]] = {}
    for index, functions in enumerate(reached):
        for key in functions:
            reaching.setdefault(key, []).append(index)
    found = []
    for path in source_files(files, pin):
        covered = {name: sorted(passed.intersection(tests)) for name, tests in trace.coverage.get(path, {}).items()}
        found += [(path, m) for m in mutations(files[path]) if covered.get(m.function) and (path, m.function) in reaching]
    rng = random.Random(f"realcode/{pin.name}/{pin.version}")
    ordered = _order([m for _, m in found], rng)
    path_of = {id(m): p for p, m in found}
    bugs = []
    tried = 0
    with Sandbox(MINE_LIMITS, files=files) as box:
        for mutation in ordered[:max_tried]:
            tried += 1
            path = path_of[id(mutation)]
            tests = sorted(passed.intersection(trace.coverage[path][mutation.function]))
            record = _validate(box, pin, files, graded, reaching[(path, mutation.function)], path, mutation, tests)
            if record is not None:
                bugs.append(record)
    log(f"{pin.name}: {len(bugs)} bugs from {tried} mutants ({len(ordered)} candidates)")
    return Mined(graded, bugs, len(passed), tried)


def _validate(box: Sandbox, pin: Source, files: dict[str, str], graded: list, reaching: list[int], path: str,
              mutation: Mutation, tests: list[str]) -> dict | None:
    """The bug record of `mutation` when the cases and the package's tests both catch it, else None."""
    box.write(path, mutation.apply(files[path]))
    try:
        got = case_lib.outcomes(box, [graded[i][0] for i in reaching], pin.package, timeout=CASE_TIMEOUT)
        changed = [i for i, out in zip(reaching, got) if out != graded[i][1]]
        if not changed or len(changed) > len(graded) // 2 or all(graded[i][0].visible for i in changed):
            return None
        if all(out is not None and out.get("error") == "TypeError" for i, out in zip(reaching, got) if i in changed):
            return None
        chosen = tests[:MAX_TESTS]
        run = box.run(tracing.pytest_argv("-q", "-rf", "--tb=short", "--timeout=10", *chosen),
                      env=tracing.PYTEST_ENV)
        failed = failures(run.stdout)
        failing = [t for t in chosen if t in failed]
        if not failing:
            return None
        return _record(path, mutation, changed, failing, failed[failing[0]], error_lines(run.stdout))
    finally:
        box.write(path, files[path])


def _record(path: str, mutation: Mutation, changed: list[int], failing: list[str], reason: str,
            errors: list[str]) -> dict:
    return {"file": path, "function": mutation.function, "kind": mutation.kind, "start": mutation.start,
            "end": mutation.end, "replacement": mutation.replacement, "line": mutation.line, "what": mutation.what,
            "f2p_cases": changed, "f2p_tests": failing[:30], "reason": reason[:300], "errors": errors}


def split(pin: Source, bugs: list[dict]) -> list[str]:
    """The files whose bugs are held out: files taken in a hash order while held-out bugs stay <= the share.

    A held-out bug never sits in a file any training bug mutates, so memorising training fixes gives nothing.
    """
    counts: dict[str, int] = {}
    for bug in bugs:
        counts[bug["file"]] = counts.get(bug["file"], 0) + 1
    if len(counts) < 2:
        raise ValueError(f"{pin.name}: bugs in {len(counts)} file(s); a file split needs two")
    order = sorted(counts, key=lambda p: hashlib.sha256(f"{pin.name}/{p}".encode()).hexdigest())
    held: list[str] = []
    total = sum(counts.values())
    for path in order:
        if sum(counts[p] for p in held) + counts[path] <= HELD_OUT_SHARE * total:
            held.append(path)
    if not held:
        held.append(min(order, key=lambda p: (counts[p], order.index(p))))
    return sorted(held)
