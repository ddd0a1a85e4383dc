"""The env contract as a check a plugin author can run on an installed env (`jointrl envs check ID`).

`episode_problems(env_id, seed)` plays one seed the way the contract demands: two instances reset to the
same prompt and tools, the scripted demo scores full marks, an empty answer scores zero, a malformed call is
an error observation that is counted, and closing leaves no file in the temp dir and no process behind.
`check(env_id, ...)` adds the audit's thresholds on a few seeds (shortcuts, overlap, determinism across
string-hash seeds). Each returns the broken rules as one line each; empty means the env conforms. The test
suite (tests/envs/test_conformance.py) runs the same functions over every registered id.
"""
from __future__ import annotations

import json
import os
import tempfile

from jointrl.envs import registry
from jointrl.envs.audit import audit_env, determinism, violations


def _children() -> set[int]:
    """Pids of live children of any of this process's threads (sandboxes start from a launcher thread)."""
    pids: set[int] = set()
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            with open(f"/proc/{os.getpid()}/task/{task}/children") as f:
                pids |= {int(p) for p in f.read().split()}
        except FileNotFoundError:
            continue
    return pids


def _call(name: str, arguments: str) -> dict:
    return {"id": "check", "type": "function", "function": {"name": name, "arguments": arguments}}


def _play(first, second, seed: int) -> list[str]:
    """The contract's rules on two fresh instances of one env; stops at the first rule that cannot go on."""
    problems = []
    obs_a, obs_b = first.reset(seed), second.reset(seed)
    if json.dumps(obs_a.messages, sort_keys=True) != json.dumps(obs_b.messages, sort_keys=True):
        problems.append("reset is not deterministic: two instances gave different prompts for one seed")
    if obs_a.tools != obs_b.tools:
        problems.append("reset is not deterministic: two instances offered different tools for one seed")
    if not obs_a.messages or obs_a.messages[-1].get("role") != "user":
        problems.append("the prompt does not end with a user message")

    transcript = first.demo()
    last = transcript[-1] if transcript else {}
    if last.get("role") != "assistant" or last.get("tool_calls"):
        problems.append("the demo does not end with a final assistant answer (no tool call)")
    demo_success = first.signals().get("success")
    if demo_success != 1.0:
        problems.append(f"the demo scores success {demo_success!r}, expected 1.0")

    second.answer("")
    no_op = second.signals().get("success")
    if no_op != 0.0:
        problems.append(f"an empty answer without tool calls scores success {no_op!r}, expected 0.0")

    # An env without tools sees the call as naming an unknown tool: still an error observation.
    name = obs_b.tools[0]["function"]["name"] if obs_b.tools else "no_such_tool"
    result = second.step(_call(name, "{not json"))
    if result.error is None or not result.content.startswith("error:"):
        problems.append(f"a malformed call to {name!r} is not an error observation: {result.content[:80]!r}")
    errors = second.signals().get("tool_errors", 0)
    if not errors >= 1:
        problems.append(f"a malformed call is not counted in signals['tool_errors'] (got {errors!r})")
    return problems


def episode_problems(env_id: str, seed: int = 0) -> list[str]:
    """The contract rules one seed of `env_id` breaks, one line each (prefixed with the seed); empty = conforms."""
    problems: list[str] = []
    children_before = _children()
    previous = tempfile.tempdir
    with tempfile.TemporaryDirectory(prefix="jointrl-check-") as temp:
        # A private temp dir: what is left in it can only be this env's, whatever else runs on the machine.
        tempfile.tempdir = temp
        made = []
        try:
            made = [registry.make(env_id), registry.make(env_id)]
            problems += _play(made[0], made[1], seed)
        except Exception as err:  # the env's own bug, reported as a broken rule rather than a crash of the check
            problems.append(f"raised {type(err).__name__}: {' '.join(str(err).split())}")
        finally:
            for env in made:
                try:
                    env.close()
                except Exception as err:
                    problems.append(f"close raised {type(err).__name__}: {err}")
            tempfile.tempdir = previous
        leaked = sorted(os.listdir(temp))
    if leaked:
        problems.append(f"left {leaked} in its temp dir")
    if not _children() <= children_before:
        problems.append("left processes behind")
    return [f"seed {seed}: {p}" for p in problems]


def check(env_id: str, seeds: int = 3, audit: bool = True, same_tasks: bool = True) -> list[str]:
    """Every rule `env_id` breaks: the contract on seeds 0..seeds-1, then (if asked) the audit's thresholds on
    `seeds` train and held-out seeds and the same tasks under other string-hash seeds."""
    registry.spec(env_id)  # an unknown id is a KeyError naming close ids, not a list of failed rules
    problems = [p for seed in range(seeds) for p in episode_problems(env_id, seed)]
    try:
        if audit:
            problems += [f"audit: {p}" for p in violations(audit_env(env_id, seeds))]
        # Fresh processes find an installed plugin through its entry point, as a Ray worker does.
        if same_tasks and not determinism([env_id], per_split=1)[env_id]:
            problems.append("audit: prompts or demo answers change with PYTHONHASHSEED")
    except Exception as err:  # the rules above already name what broke; the audit's crash is one more line
        problems.append(f"audit: raised {type(err).__name__}: {' '.join(str(err).split())}")
    return problems
