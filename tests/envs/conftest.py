"""Fixtures of the env tests that touch the sandbox: one per backend, and a host folder outside the sandbox."""
import secrets
import subprocess
from pathlib import Path

import pytest

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
