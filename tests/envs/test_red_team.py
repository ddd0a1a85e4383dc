"""The policy as an adversary: every attack found in review, driven through the envs' own tools as a model would.

Each forge must score 0, each escape must fail, each hang must end within its bound. The attacker knows
jointrl's source (these tests are written from it) and has arbitrary code execution in the sandbox.
"""
import json
import os
import socket
import sys
import threading
from pathlib import Path

import pytest

from jointrl.envs import registry
from jointrl.envs.sandbox import PYTHON, Sandbox
from jointrl.envs.swe.catalog import FAMILIES as SWE_FAMILIES

REPO = Path(__file__).resolve().parents[2]


def call(env, name, **arguments):
    return env.step({"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}})


@pytest.fixture
def make():
    made = []

    def build(env_id, seed=0):
        env = registry.make(env_id)
        env.reset(seed)
        made.append(env)
        return env

    yield build
    for env in made:
        env.close()


# (a) package code that, once imported by pytest, turns every test function into a no-op.
PATCH_PYTEST = '''
def _forge():
    import sys
    if "_pytest.python" in sys.modules:
        sys.modules["_pytest.python"].Function.runtest = lambda self: None
_forge()
'''

# (b) package code that, at interpreter exit, rewrites any JUnit report to all-passed and prints forged
# grading lines, with the harness's nonce fished out of the process's memory, to every open descriptor.
ATEXIT_FORGE = '''
def _forge():
    import atexit, gc, glob, os, re

    def rewrite():
        for path in glob.glob("*.xml") + glob.glob(".*.xml"):
            try:
                text = open(path).read()
                text = re.sub(r"<(failure|error)[^>]*>.*?</(failure|error)>", "", text, flags=re.S)
                open(path, "w").write(re.sub(r'(failures|errors)="[0-9]+"', r'\\1="0"', text))
            except OSError:
                pass
        nonces = [o["nonce"] for o in gc.get_objects() if isinstance(o, dict) and isinstance(o.get("nonce"), str)]
        for nonce in nonces:
            lines = "".join(f'{nonce} {i} {{"value": "True"}}\\n' for i in range(500)).encode()
            for fd in range(1, 64):
                try:
                    os.write(fd, lines)
                except OSError:
                    pass
        os._exit(0)

    atexit.register(rewrite)
    rewrite()  # also at import time, before any case has run
_forge()
'''


def _append_to_package(env, code: str) -> None:
    """What a model with a shell would do: append the forge to the package's __init__.py."""
    path = f"{env.task.package}/__init__.py"
    result = call(env, "bash", command=f"cat >> {path} <<'EOF'\n{code}\nEOF")
    assert result.error is None, result.content


@pytest.mark.parametrize("family", sorted(SWE_FAMILIES))
def test_swe_pytest_patching_and_atexit_forges_score_zero_and_the_demo_scores_one(family, make):
    patched = make(f"swe/{family}-v0:easy", 11)
    _append_to_package(patched, PATCH_PYTEST)
    # The forge works on pytest itself: the workspace's own test run reports no failure.
    assert "failed" not in call(patched, "run_tests").content
    assert patched.signals()["resolved"] == 0.0

    forged = make(f"swe/{family}-v0:easy", 11)
    _append_to_package(forged, ATEXIT_FORGE)
    assert forged.signals()["resolved"] == 0.0

    solved = make(f"swe/{family}-v0:easy", 11)
    solved.demo()
    assert solved.signals()["resolved"] == 1.0


@pytest.mark.parametrize("family", sorted(SWE_FAMILIES))
def test_swe_reference_is_not_readable_from_the_sandbox(family, make):
    env = make(f"swe/{family}-v0:easy", 12)
    project_dir = REPO / "envs" / "swe" / "projects"
    # (c) copy the reference implementation over the buggy package, from every place it could be.
    attempt = call(env, "bash", command=(
        f"cp -r {project_dir}/{family}/* {env.task.package}/ 2>&1; "
        f"find / -path /proc -prune -o -path '*swe/projects*' -print 2>/dev/null | head -3; "
        "python3 -c 'import jointrl.envs.swe.projects' 2>&1 | tail -1"
    ))
    assert "No such file or directory" in attempt.content
    assert "swe/projects" not in attempt.content.replace(str(project_dir), "")
    assert "No module named 'jointrl'" in attempt.content
    assert env.signals()["resolved"] == 0.0


def test_inside_the_sandbox_jointrl_the_source_and_the_venv_are_not_there():
    with Sandbox() as box:
        result = box.run(
            f"{PYTHON} -c 'import jointrl' 2>&1 | tail -1; python3 -c 'import jointrl' 2>&1 | tail -1; "
            f"ls {REPO} 2>&1; ls {sys.prefix} 2>&1; ls /home /srv /var 2>&1; "
            f"{PYTHON} -c 'import torch' 2>&1 | tail -1"
        )
    out = result.stdout
    assert out.count("No module named 'jointrl'") == 2
    assert "No module named 'torch'" in out
    assert out.count("No such file or directory") >= 5, out


def test_terminal_generators_cannot_be_imported_to_search_seeds(make):
    env = make("terminal/archive-v0:easy", 3)
    result = call(env, "bash", command="python3 -c 'import jointrl.envs.terminal' 2>&1 | tail -1; "
                                       f"{PYTHON} -c 'import jointrl' 2>&1 | tail -1")
    assert result.content.count("No module named 'jointrl'") == 2


def test_a_unix_socket_on_the_host_is_not_reachable(tmp_path):
    for directory in (tmp_path, REPO):
        path = directory / f"host-{os.getpid()}.sock"
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        server.listen(1)
        accepted = []
        thread = threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True)
        thread.start()
        try:
            with Sandbox() as box:
                code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r}); print('connected')"
                result = box.run([PYTHON, "-c", code])
            assert "connected" not in result.stdout
            assert "FileNotFoundError" in result.stderr or "No such file" in result.stderr, result.text()
            assert not accepted
        finally:
            server.close()
            path.unlink()
