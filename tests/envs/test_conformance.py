"""Every registered env id honours the contract (determinism, demo solves, no-op fails, bad calls, cleanup) and
measures its skill (the audit's thresholds: no shortcut, no memorisable held-out set, the same task in every
process)."""
import os
import tempfile

import pytest

from jointrl.envs import registry
from jointrl.envs.base import Action, Env, EnvSpec
from jointrl.envs.audit import audit_env, determinism, violations
from jointrl.envs.base import parse_env_id
from jointrl.envs.conformance import episode_problems
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


def _play(env_id: str, seed: int) -> None:
    assert episode_problems(env_id, seed) == []


def test_registry_is_populated():
    assert IDS, "no environments registered"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("env_id", IDS)
def test_env_conformance(env_id, seed):
    _play(env_id, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
@pytest.mark.parametrize("env_id", IDS)
def test_env_conformance_more_seeds(env_id, seed):
    _play(env_id, seed)


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


class Sloppy(Env):
    """Breaks the contract on purpose: the demo's answer scores 0, an empty answer scores 1, reset leaves a file."""

    def _reset(self, seed):
        handle, _ = tempfile.mkstemp(prefix="sloppy-")
        os.close(handle)
        return [{"role": "user", "content": f"Say anything about {seed}."}]

    def _signals(self):
        return {"success": float(not self.final_answer)}

    def _solution(self):
        yield Action(None, answer="something")


@pytest.fixture
def sloppy():
    spec = registry.register(EnvSpec(id="test/sloppy-v0:easy", entry_point=f"{__name__}:Sloppy"))
    yield spec.id
    registry._SPECS.pop(spec.id)


def test_the_conformance_check_names_every_broken_rule(sloppy):
    problems = episode_problems(sloppy, 4)
    assert problems[:2] == [
        "seed 4: the demo scores success 0.0, expected 1.0",
        "seed 4: an empty answer without tool calls scores success 1.0, expected 0.0",
    ]
    # Both instances reset, so two files were left; their names are random past the prefix.
    assert len(problems) == 3 and problems[2].startswith("seed 4: left ['sloppy-") and problems[2].count("sloppy-") == 2
