"""Shared fixtures of the reward tests: a compact way to build episodes."""
import pytest

from jointrl.envs.episode import Episode


@pytest.fixture
def episode():
    """Factory: an Episode of `env_id` (domain, family and difficulty read from it) with any field overridden."""

    def make(env_id: str = "terminal/grep-v1:easy", **fields) -> Episode:
        domain, rest = env_id.split("/", 1)
        family, difficulty = rest.split("-v")[0], rest.split(":")[1]
        base = dict(env_id=env_id, domain=domain, family=family, difficulty=difficulty, seed=0, tier="low")
        return Episode(**(base | fields))

    return make
