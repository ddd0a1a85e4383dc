"""Every registered env id honours the contract (determinism, demo solves, no-op fails, bad calls, cleanup) and
measures its skill (the audit's thresholds: no shortcut, no memorisable held-out set, the same task in every
process)."""
import json
import os
import tempfile

import pytest

from jointrl.envs import registry
from jointrl.envs.audit import audit_env, determinism, violations
from jointrl.envs.base import parse_env_id
from tests.envs import planted_envs

IDS = registry.env_ids()
# The main suite plays one seed per id; the slow suite plays more.
SEEDS = [0]
SLOW_SEEDS = [1, 2, 3]
# The main suite audits one id per family on a few seeds; the slow suite audits every id as `jointrl envs
# audit` does by default.
SAMPLE_SEEDS = 3
FULL_SEEDS = 20


def _one_per_family(ids: list[str]) -> list[str]:
    """One id per family, the difficulty cycling with the family's position so every difficulty is sampled."""
    families: dict[str, list[str]] = {}
    for env_id in ids:
        parts = parse_env_id(env_id)
        families.setdefault(f"{parts['domain']}/{parts['family']}", []).append(env_id)
    return [members[i % len(members)] for i, (_, members) in enumerate(sorted(families.items()))]


SAMPLE = _one_per_family(IDS)


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


def _play(env_id: str, seed: int, temp: str) -> None:
    # A private temp dir: what is left in it can only be this env's, whatever else runs on the machine.
    tempfile.tempdir, previous = temp, tempfile.tempdir
    children_before = _children()

    first, second = registry.make(env_id), registry.make(env_id)
    try:
        obs_a, obs_b = first.reset(seed), second.reset(seed)
        assert json.dumps(obs_a.messages, sort_keys=True) == json.dumps(obs_b.messages, sort_keys=True)
        assert obs_a.tools == obs_b.tools
        assert obs_a.messages and obs_a.messages[-1]["role"] == "user"

        # The scripted solution scores full marks.
        transcript = first.demo()
        assert transcript[-1]["role"] == "assistant" and not transcript[-1].get("tool_calls")
        signals = first.signals()
        assert signals["success"] == 1.0, (env_id, seed, signals)

        # Doing nothing and answering nothing scores zero.
        second.answer("")
        assert second.signals()["success"] == 0.0, (env_id, seed)

        # A malformed call is an error observation, counted, and the episode goes on (an env without
        # tools sees the call as naming an unknown tool).
        name = obs_b.tools[0]["function"]["name"] if obs_b.tools else "no_such_tool"
        result = second.step({"id": "c", "type": "function", "function": {"name": name, "arguments": "{not json"}})
        assert result.error is not None and result.content.startswith("error:")
        assert second.signals()["tool_errors"] >= 1
    finally:
        first.close()
        second.close()
        tempfile.tempdir = previous
    leaked = os.listdir(temp)
    assert not leaked, f"{env_id} left {sorted(leaked)} in its temp dir"
    assert _children() <= children_before, f"{env_id} left processes behind"


def test_registry_is_populated():
    assert IDS, "no environments registered"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("env_id", IDS)
def test_env_conformance(env_id, seed, tmp_path):
    _play(env_id, seed, str(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
@pytest.mark.parametrize("env_id", IDS)
def test_env_conformance_more_seeds(env_id, seed, tmp_path):
    _play(env_id, seed, str(tmp_path))


def _audit_problems(env_id: str, seeds: int) -> list[str]:
    return violations(audit_env(env_id, seeds))


@pytest.mark.parametrize("env_id", SAMPLE)
def test_sampled_ids_meet_the_audit_thresholds(env_id):
    assert _audit_problems(env_id, SAMPLE_SEEDS) == []


def test_sampled_ids_draw_the_same_tasks_under_any_string_hash_seed():
    same = determinism(SAMPLE, per_split=1)
    assert [env_id for env_id, ok in same.items() if not ok] == []


@pytest.mark.slow
@pytest.mark.parametrize("env_id", IDS)
def test_every_id_meets_the_audit_thresholds(env_id):
    assert _audit_problems(env_id, FULL_SEEDS) == []


@pytest.mark.slow
def test_every_id_draws_the_same_tasks_under_any_string_hash_seed():
    same = determinism(IDS)
    assert [env_id for env_id, ok in same.items() if not ok] == []


@pytest.fixture
def planted():
    planted_envs.register()
    yield
    planted_envs.unregister()


def test_the_thresholds_fail_planted_envs_and_pass_an_honest_one(planted):
    """The checks above would catch a constant answer, a memorised held-out set and a hash-seed dependent task."""
    assert any(p.startswith("constant ") for p in _audit_problems("test/constant-v0:easy", SAMPLE_SEEDS))
    assert any(p.startswith("overlap ") for p in _audit_problems("test/memorised-v0:easy", SAMPLE_SEEDS))
    assert _audit_problems("test/honest-v0:easy", SAMPLE_SEEDS) == []
    same = determinism(["test/unstable-v0:easy", "test/honest-v0:easy"], ("tests.envs.planted_envs:register",),
                       per_split=1)
    assert same == {"test/unstable-v0:easy": False, "test/honest-v0:easy": True}
