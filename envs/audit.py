"""The env audit: how much of an env's reward the shortcuts a policy would find first can earn.

For each env id, N train seeds (0..N-1) and N held-out seeds (HELD_OUT_START..) are played as a policy
without the skill would play them; every column but `demo` is a shortcut and should be near 0:

  demo        the scripted solution's pass rate (held-out): the env can be solved at all
  no_op       no tool call and an empty answer
  no_tools    no tool call, answering held-out seed i with train seed i's demo answer (a memorised answer)
  constant    the best constant answer: chosen on the train seeds among generic constants and the most
              frequent train answers, scored on the held-out seeds (`constant_answer` says which)
  common      the most frequent train answer, on the held-out seeds
  replay      held-out seed i played with train seed i's tool calls and answer (a memorised trajectory)
  multi       an answer listing the most frequent train answers at once
  prompts     distinct opening prompts among the N held-out seeds, as a fraction
  answers     distinct demo answers among the N held-out seeds, as a fraction
  overlap     held-out seeds whose task (`Env.task_key()`, by default the opening messages) also occurs
              among the train seeds
  seconds     median wall seconds of one reset + demo + signals
  deterministic  prompts and demo answers of a few seeds are the same in two fresh processes with other
              string-hash seeds

`violations(row)` applies the thresholds every registered id must meet (the conformance suite enforces them):
demo 1.0; each shortcut and the overlap at most 5% (a shortcut at most 1/k + 5% where the task is an
explicit k-way choice, `Env.answer_choices`); deterministic.

`jointrl envs audit GLOB [--seeds N] [--json FILE]` prints the table; plugin authors run it on their own ids.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

from jointrl.envs import registry
from jointrl.envs.base import HELD_OUT_START
GENERIC_CONSTANTS = ("0", "1", "2", "3", "yes", "no", "true", "false", "none", "a", "b")
TOP_ANSWERS = 8  # train answers tried as constants
MULTI_ANSWERS = 5  # answers listed at once by the multi-candidate shortcut
DETERMINISM_SEEDS = 3
SHORTCUTS = ("no_op", "no_tools", "constant", "common", "replay", "multi")
MAX_SHORTCUT = 0.05  # pass rate a shortcut may reach on held-out seeds (above chance, for a k-way choice)
MAX_OVERLAP = 0.05  # held-out tasks that may also occur among the train seeds


@dataclass
class DemoRun:
    """One seed played by the scripted solution: what it saw, did and answered, and whether it passed."""

    task_key: str
    prompt: str
    calls: list[dict]
    answer: str
    success: float
    seconds: float
    choices: int | None = None


@dataclass
class AuditRow:
    """The audit of one env id (see the module docstring for each column)."""

    env_id: str
    seeds: int
    demo: float
    no_op: float
    no_tools: float
    constant: float
    constant_answer: str
    common: float
    replay: float
    multi: float
    prompts: float
    answers: float
    overlap: float
    seconds: float
    choices: int | None = None
    deterministic: bool | None = None
    errors: list[str] = field(default_factory=list)

    def worst_shortcut(self) -> tuple[str, float]:
        """The shortcut column with the highest pass rate."""
        return max(((name, getattr(self, name)) for name in SHORTCUTS), key=lambda item: item[1])


def _prompt(messages: list[dict]) -> str:
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)


def play_demo(env_id: str, seed: int) -> DemoRun:
    """Reset, play the demo and score it; the tool calls and answer are kept for replay."""
    started = time.perf_counter()
    env = registry.make(env_id)
    try:
        observation = env.reset(seed)
        transcript = env.demo()
        success = env.signals()["success"]
        calls = [call for m in transcript if m.get("role") == "assistant" for call in m.get("tool_calls") or []]
        return DemoRun(env.task_key(), _prompt(observation.messages), calls, env.final_answer or "", success,
                       time.perf_counter() - started, env.answer_choices)
    finally:
        env.close()


def play(env_id: str, seed: int, calls: list[dict], answer: str) -> float:
    """The success of seed's episode when `calls` are made and `answer` is given, whatever they do."""
    env = registry.make(env_id)
    try:
        env.reset(seed)
        for call in calls:
            env.step(call)
        env.answer(answer)
        return env.signals()["success"]
    finally:
        env.close()


def _rate(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def audit_env(env_id: str, seeds: int = 20) -> AuditRow:
    """Measure every column of one env id over `seeds` train and `seeds` held-out seeds."""
    train_seeds = list(range(seeds))
    held_seeds = list(range(HELD_OUT_START, HELD_OUT_START + seeds))
    train = [play_demo(env_id, s) for s in train_seeds]
    held = [play_demo(env_id, s) for s in held_seeds]
    by_frequency = [a for a, _ in Counter(r.answer for r in train).most_common()]
    candidates = list(dict.fromkeys(list(GENERIC_CONSTANTS) + by_frequency[:TOP_ANSWERS]))
    on_train = {c: _rate([play(env_id, s, [], c) for s in train_seeds]) for c in candidates}
    best = max(candidates, key=lambda c: (on_train[c], -candidates.index(c)))
    common = by_frequency[0] if by_frequency else ""
    multi = "\n".join(by_frequency[:MULTI_ANSWERS])
    train_keys = {r.task_key for r in train} | {r.prompt for r in train}
    return AuditRow(
        env_id=env_id,
        seeds=seeds,
        demo=_rate([r.success for r in held]),
        no_op=_rate([play(env_id, s, [], "") for s in held_seeds]),
        no_tools=_rate([play(env_id, s, [], t.answer) for s, t in zip(held_seeds, train)]),
        constant=_rate([play(env_id, s, [], best) for s in held_seeds]),
        constant_answer=best,
        common=_rate([play(env_id, s, [], common) for s in held_seeds]),
        replay=_rate([play(env_id, s, t.calls, t.answer) for s, t in zip(held_seeds, train)]),
        multi=_rate([play(env_id, s, [], multi) for s in held_seeds]),
        prompts=len({r.prompt for r in held}) / seeds,
        answers=len({r.answer for r in held}) / seeds,
        overlap=_rate([float(r.task_key in train_keys or r.prompt in train_keys) for r in held]),
        seconds=statistics.median(r.seconds for r in train + held),
        choices=max((r.choices or 0 for r in held), default=0) or None,
    )


def violations(row: AuditRow) -> list[str]:
    """The thresholds a row breaks, each as "column value > limit"; empty when the id measures its skill."""
    problems = [f"error {e}" for e in row.errors]
    if row.demo < 1.0:
        problems.append(f"demo {row.demo:.2f} < 1.00")
    limit = MAX_SHORTCUT + (1 / row.choices if row.choices else 0.0)
    problems += [f"{name} {getattr(row, name):.2f} > {limit:.2f}" for name in SHORTCUTS if getattr(row, name) > limit]
    if row.overlap > MAX_OVERLAP:
        problems.append(f"overlap {row.overlap:.2f} > {MAX_OVERLAP:.2f}")
    if row.deterministic is False:
        problems.append("not deterministic across PYTHONHASHSEEDs")
    return problems


DIGEST_PROGRAM = """
import hashlib, json, sys
from jointrl.envs.audit import play_demo
from jointrl.envs.registry import resolve
setup, ids, seeds = json.loads(sys.argv[1])
for entry in setup:
    resolve(entry)()
out = {}
for env_id in ids:
    runs = [play_demo(env_id, s) for s in seeds]
    text = json.dumps([[r.prompt, r.answer] for r in runs], sort_keys=True)
    out[env_id] = hashlib.sha256(text.encode()).hexdigest()
print(json.dumps(out))
"""


def determinism(env_ids: list[str], setup: tuple[str, ...] = (), hash_seeds: tuple[int, ...] = (1, 2),
                per_split: int = DETERMINISM_SEEDS) -> dict[str, bool]:
    """Whether each id's prompts and demo answers match across fresh processes with other PYTHONHASHSEEDs.

    `setup` names "module:function" entries that register plugin envs in those processes; `per_split` train
    and as many held-out seeds are compared.
    """
    seeds = list(range(per_split)) + list(range(HELD_OUT_START, HELD_OUT_START + per_split))
    argument = json.dumps([list(setup), env_ids, seeds])
    digests = []
    for hash_seed in hash_seeds:
        env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
        done = subprocess.run([sys.executable, "-c", DIGEST_PROGRAM, argument], capture_output=True, text=True,
                              env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the determinism check failed to run: {done.stderr.strip().splitlines()[-1:]}")
        digests.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {env_id: all(d[env_id] == digests[0][env_id] for d in digests) for env_id in env_ids}


def audit(pattern: str, seeds: int = 20, setup: tuple[str, ...] = (), check_determinism: bool = True) -> list[AuditRow]:
    """Audit every registered id matching the glob; an id whose audit raises gets a row of zeros and the error."""
    ids = registry.env_ids(pattern)
    if not ids:
        raise ValueError(f"no registered env id matches {pattern!r}")
    rows = []
    for env_id in ids:
        try:
            rows.append(audit_env(env_id, seeds))
        except Exception as err:  # one broken env must not hide the others' figures
            zeros = dict.fromkeys(("demo", "no_op", "no_tools", "constant", "common", "replay", "multi", "prompts",
                                   "answers", "overlap", "seconds"), 0.0)
            rows.append(AuditRow(env_id=env_id, seeds=seeds, constant_answer="", errors=[f"{type(err).__name__}: {err}"],
                                 **zeros))
    if check_determinism:
        same = determinism(ids, setup)
        for row in rows:
            row.deterministic = same[row.env_id]
    return rows


def to_json(rows: list[AuditRow]) -> list[dict]:
    """The rows as plain dicts (the --json file)."""
    return [asdict(row) for row in rows]
