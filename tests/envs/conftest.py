"""Fixtures of the env tests: a sandbox per backend, a host folder outside the sandbox, and envs made and reset."""
import secrets
import subprocess
from pathlib import Path

import pytest

from jointrl.envs import registry
from jointrl.envs.sandbox import Limits, Sandbox
from tests.envs.processes import BACKENDS


@pytest.fixture(params=BACKENDS)
def box(request):
    with Sandbox(Limits(wall_seconds=20), backend=request.param) as sandbox:
        yield sandbox


@pytest.fixture
def host_dir():
    """A host directory outside the sandbox (and outside /tmp, which the sandbox replaces with its own)."""
    base = Path("/var/tmp") / f"jointrl-sandbox-test-{secrets.token_hex(4)}"
    base.mkdir()
    yield base
    subprocess.run(["rm", "-rf", str(base)], check=True)


@pytest.fixture
def make():
    """make(env_id, seed=0) -> a reset env, closed after the test."""
    made = []

    def build(env_id, seed=0):
        env = registry.make(env_id)
        env.reset(seed)
        made.append(env)
        return env

    yield build
    for env in made:
        env.close()
