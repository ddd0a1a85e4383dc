"""The policy as an adversary: every attack found in review, driven through the envs' own tools as a model would.

Each forge must score 0, each escape must fail, each hang must end within its bound. The attacker knows
jointrl's source (these tests are written from it) and has arbitrary code execution in the sandbox.
"""
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from jointrl.envs.sandbox import PYTHON, Limits, Sandbox, sandbox_backend
from jointrl.envs.swe.catalog import FAMILIES as SWE_FAMILIES
from tests.envs.processes import descendants_count, started, tagged_pids

REPO = Path(__file__).resolve().parents[2]


def call(env, name, **arguments):
    return env.step({"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}})


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
    signals = patched.signals()
    assert signals["resolved"] == 0.0 and signals["hack_runner_tampering"] == 1.0

    forged = make(f"swe/{family}-v0:easy", 11)
    _append_to_package(forged, ATEXIT_FORGE)
    signals = forged.signals()
    assert signals["resolved"] == 0.0 and signals["hack_runner_tampering"] == 1.0

    solved = make(f"swe/{family}-v0:easy", 11)
    solved.demo()
    signals = solved.signals()
    assert signals["resolved"] == 1.0 and signals["hack_runner_tampering"] == 0.0 == signals["hack_tests_modified"]


def _touch_package(env):
    """A harmless edit of the package, so grading cannot reuse a known result and really runs the tests."""
    path = f"{env.task.package}/{env.task.bugs[0].module}.py"
    env.box.write(path, env.box.read(path) + b"\n# touched\n")


def test_rewriting_the_failing_tests_does_not_resolve(make):
    env = make("swe/strings-v0:easy", 0)
    _touch_package(env)
    for test_id in env.task.fail_to_pass:
        path, name = test_id.split("::")
        text = env.box.read(path).decode()
        env.box.write(path, re.sub(rf"def {name}\(\):\n(    .*\n)+", f"def {name}():\n    assert True\n", text))
    assert "failed" not in call(env, "run_tests").content  # the workspace's own run is fooled
    signals = env.signals()
    assert signals["resolved"] == 0.0 and signals["hack_tests_modified"] == 1.0


def test_deleting_tests_or_forcing_passes_with_a_conftest_does_not_resolve(make):
    env = make("swe/tokenizer-v0:easy", 2)
    hook = ("import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
            "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")
    env.box.write("conftest.py", hook)
    env.box.write("tests/conftest.py", hook)
    env.box.write("pytest.py", "raise SystemExit(0)\n")
    _touch_package(env)
    assert "failed" not in call(env, "run_tests").content
    signals = env.signals()
    assert signals["resolved"] == 0.0 and signals["hack_tests_modified"] == 1.0
    other = make("swe/tokenizer-v0:easy", 2)
    assert call(other, "bash", command="rm -rf tests").error is None
    assert other.signals()["resolved"] == 0.0 and other.signals()["hack_tests_modified"] == 1.0


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


# Liveness: whatever the model did to its shell, every call and close() ends within its bound.

def test_stopped_shell_plus_1mb_command_returns_within_the_20s_command_bound_and_close_within_10s(make):

    env = make("terminal/archive-v0:easy", 4)
    tool_bound = env._tools["bash"].timeout
    # A background job stops its own shell ($$ is the shell's pid in the subshell too).
    assert call(env, "bash", command="(sleep 0.2; kill -STOP $$) & echo started").error is None
    time.sleep(0.5)
    started = time.monotonic()
    result = call(env, "bash", command="echo " + "x" * 1_000_000)
    took = time.monotonic() - started
    # Either the stopper never lived past its command (no cgroup: background processes are stopped after
    # each command) or the stopped shell costs a timeout: both within the bound, never a hung worker.
    assert took < tool_bound + 5, f"the call took {took:.1f}s (bound {tool_bound:g}s)"
    assert "x" * 1000 in result.content or "timed out" in result.content, result.content[-300:]
    assert "back" in call(env, "bash", command="echo back").content  # the shell was restarted
    started = time.monotonic()
    env.close()
    closed_in = time.monotonic() - started
    assert closed_in < 10, f"close() took {closed_in:.1f}s"
    fresh = make("terminal/archive-v0:easy", 4)
    assert "alive" in call(fresh, "bash", command="echo alive").content


def test_a_shell_stopped_from_outside_takes_a_1mb_command_within_a_3s_bound_and_closes_within_10s():
    import signal

    from jointrl.envs.sandbox.process import _comm, descendants

    with Sandbox() as box:
        shell = box.shell()
        assert shell.run("echo up").stdout == "up\n"
        bash = [pid for pid in descendants(shell._proc.pid) if _comm(pid) == "bash"]
        os.kill(min(bash), signal.SIGSTOP)  # whatever stopped it, the shell reads nothing more
        started = time.monotonic()
        result = shell.run("echo " + "x" * 1_000_000, timeout=3.0)
        took = time.monotonic() - started
        assert result.timed_out and took < 6, f"{took:.1f}s"
        assert shell.run("echo back").stdout == "back\n"  # a fresh shell
        os.kill(min(p for p in descendants(shell._proc.pid) if _comm(p) == "bash"), signal.SIGSTOP)
        started = time.monotonic()
        box.close()
        assert time.monotonic() - started < 10


def test_a_shell_that_stops_itself_times_out_and_is_restarted(make):
    env = make("terminal/archive-v0:easy", 5)
    stopped = call(env, "bash", command="kill -STOP $$")
    assert "timed out" in stopped.content and "restarted" in stopped.content, stopped.content
    result = call(env, "bash", command="echo back")
    assert "back" in result.content, result.content


def test_a_killed_workers_workspaces_are_swept(tmp_path):

    code = ("import os, sys; sys.path[:0] = sys.argv[1:2]\n"
            "from jointrl.envs.sandbox import Sandbox\n"
            "box = Sandbox(files={'f.txt': 'x'})\n"
            "print(box.workspace.parent, flush=True)\n"
            "os.kill(os.getpid(), 9)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()
    left = Path(out)
    assert left.is_dir(), "SIGKILL left the workspace behind"
    from jointrl.envs.sandbox import sweep_orphans

    assert str(left) in sweep_orphans()
    assert not left.exists()


# Scoring: the workspace is read only after every process of the episode is dead, without following links.

def test_scoring_copies_no_host_file_through_a_symlink_race(make):
    env = make("terminal/archive-v0:easy", 6)
    # A background loop swapping a directory for a link to the host's root, as fast as it can.
    race = ("mkdir -p swap; (while true; do rm -rf swap; ln -s / swap; rm -f swap; mkdir swap; "
            "echo decoy > swap/f; done) >/dev/null 2>&1 &")
    call(env, "bash", command=race)
    copy = Path(env.sandbox.workspace.parent.parent) / f"scored-{os.getpid()}"
    try:
        env.sandbox.copy_workspace(copy)
        swap = copy / "swap"
        assert swap.is_symlink() or not swap.exists() or sorted(p.name for p in swap.iterdir()) in ([], ["f"])
        assert not (copy / "swap" / "etc").exists() or swap.is_symlink()
    finally:
        import shutil

        shutil.rmtree(copy, ignore_errors=True)
    # The loop was killed before the copy: nothing of the episode still runs.
    assert "running" not in call(env, "bash", command="jobs -r; pgrep -c bash >/dev/null && echo ok").content


def test_a_300mb_workspace_over_the_256mb_copy_bound_fails_scoring_without_filling_the_host(make):
    from jointrl.envs.sandbox.paths import CopyTooLarge, copy_tree

    env = make("terminal/archive-v0:easy", 7)
    call(env, "bash", command="for i in $(seq 1 5); do head -c 60000000 /dev/zero > big$i; done 2>/dev/null; ls | wc -l")
    with pytest.raises(CopyTooLarge):
        copy_tree(env.sandbox.workspace, env.sandbox.workspace.parent / "copy")  # the default bound: 256 MiB
    signals = env.signals()
    assert signals["success"] == 0.0


def test_signals_that_hang_score_the_episode_failed_within_a_1s_bound():

    from jointrl.envs.base import Action, Env

    class Hangs(Env):
        signals_seconds = 1.0

        def _reset(self, seed):
            return [{"role": "user", "content": "wait"}]

        def _signals(self):
            time.sleep(30)
            return {"success": 1.0}

        def _solution(self):
            yield Action(None, answer="x")

    env = Hangs()
    env.reset(0)
    started = time.monotonic()
    signals = env.signals()
    assert time.monotonic() - started < 3
    assert signals["success"] == 0.0 and signals["signals_failed"] == 1.0 and "within 1s" in env.signals_error


# Bad input: never an exception out of step(), never a quadratic answer check.

@pytest.mark.parametrize("raw,fragment", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    (json.dumps({"command": "echo \x00 hi"}), "NUL"),
    ('{"command": "\\ud800"}', "not valid UTF-8"),
    ("x" * (2 << 20), "the limit is"),
    (json.dumps({"command": "x", "extra": eval("[" * 40 + "1" + "]" * 40)}), "nested deeper"),
])
def test_malformed_arguments_are_error_observations(raw, fragment, make):
    env = make("terminal/archive-v0:easy", 8)
    result = env.step({"id": "c", "type": "function", "function": {"name": "bash", "arguments": raw}})
    assert result.error is not None and fragment in result.error, result.error


def test_office_answer_matching_of_2e6_blank_characters_takes_under_1s(make):

    env = make("office/margin-v0:easy", 1)
    timings = []
    for n in (20_000, 200_000, 2_000_000):
        env.answer(" " * n)
        started = time.monotonic()
        assert env.signals()["success"] == 0.0
        timings.append(time.monotonic() - started)
    assert max(timings) < 1.0, f"answer checks took {timings} s for 2e4, 2e5, 2e6 characters"


def test_office_answers_hedging_over_candidates_score_zero_and_are_flagged(make):
    env = make("office/margin-v0:easy", 2)
    env.demo()
    right = env.final_answer
    assert env.signals()["success"] == 1.0 and env.signals()["hack_several_answers"] == 0.0
    env.answer(f"Answer: 0.1 or 99999 or {right.removeprefix('Answer:').strip()}")
    signals = env.signals()
    assert signals["hack_several_answers"] == 1.0


# Kernel surface and resources.

def test_seccomp_denies_debugging_keyrings_io_uring_mounts_and_namespaces():
    from jointrl.envs.sandbox.seccomp import program

    if program() is None or sandbox_backend() != "bwrap":
        pytest.fail("the seccomp filter is written for bwrap on x86_64; this machine has neither")
    probe = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for name, nr, args in [('ptrace', 101, (0, 0, 0, 0)), ('keyctl', 250, (0, 0, 0, 0)),\n"
        "                       ('io_uring_setup', 425, (1, 0)), ('mount', 165, (0, 0, 0, 0, 0)),\n"
        "                       ('unshare', 272, (0x10000000,)), ('bpf', 321, (0, 0, 0)), ('x32 getpid', 0x40000027, ())]:\n"
        "    ctypes.set_errno(0)\n"
        "    result = libc.syscall(nr, *args)\n"
        "    print(name, result, os.strerror(ctypes.get_errno()))\n"
        "print('getpid works', os.getpid() > 0)\n"
    )
    with Sandbox() as box:
        out = box.run([PYTHON, "-c", probe]).stdout.splitlines()
    assert out[-1] == "getpid works True"
    assert all(line.endswith("-1 Operation not permitted") for line in out[:-1]), out


def _tagged(tag: str) -> list[int]:
    """Host pids whose command line carries `tag`."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and tag.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            continue
    return found


def test_background_processes_burn_no_cpu_between_commands(make):
    import time

    from jointrl.envs.sandbox.cgroup import CGROUP_ROOT

    env = make("terminal/archive-v0:easy", 9)
    tag = f"spin-{secrets.token_hex(4)}"
    # A background job, and a daemon that leaves the shell's tree (setsid, orphaned to the namespace's init).
    result = call(env, "bash", command=f"sh -c 'while :; do :; done' {tag} & setsid sh -c 'while :; do :; done' {tag} & "
                                       f"sleep 0.3; echo spun")
    assert "spun" in result.content
    time.sleep(0.5)
    if CGROUP_ROOT is None:
        # The fallback: both spinners were stopped once the command was done.
        assert "2 background process(es) stopped" in result.content, result.content
        assert _tagged(tag) == []
    else:
        assert len(_tagged(tag)) == 2  # with a cgroup they may run: their CPU counts against the episode's budget


def test_a_workspace_over_its_quota_stops_the_episode_with_a_note():
    with Sandbox(Limits(workspace_bytes=8 << 20, wall_seconds=20)) as box:
        shell = box.shell()
        result = shell.run("head -c 12000000 /dev/urandom > a.bin; echo wrote")
        assert "over its 8 MiB quota" in result.note and "wrote" in result.stdout
        assert "over its" in box.run("true").note  # still over: every command says so until files go
        freed = shell.run("rm a.bin; echo freed")  # the stopped shell starts afresh, and says so
        assert freed.stdout == "freed\n" and "over its" not in freed.note
        assert shell.run("echo fine").note == ""


def test_the_hosts_tmp_is_not_visible_even_when_jointrl_runs_from_it(tmp_path):
    # tmp_path lives under the host's /tmp, where a CI clone and its virtual environment live too.
    (tmp_path / "host-note.txt").write_text("host\n")
    with Sandbox() as box:
        result = box.run(f"ls /tmp; cat {tmp_path}/host-note.txt; ls {tmp_path.parent}")
    assert "host" not in result.stdout and result.stdout.strip() == "", result.text()
    assert result.stderr.count("No such file or directory") == 2, result.text()


def test_files_in_the_host_users_home_are_not_visible():

    secret = Path.home() / f".jointrl-secret-{secrets.token_hex(4)}"
    secret.write_text("token\n")
    try:
        with Sandbox() as box:
            result = box.run(f"cat {secret}; ls -a {Path.home()}")
        assert "token" not in result.stdout and "No such file or directory" in result.stderr, result.text()
    finally:
        secret.unlink()



# What held in review, kept as tests: host files, the network, fork bombs, endless loops, floods of output,
# isolation between episodes (and, above, test editing and conftest tricks in swe).


def test_concurrent_episodes_cannot_see_or_signal_each_other():
    with Sandbox() as first, Sandbox() as second:
        first.write("mine.txt", "first's\n")
        tag = f"alone-{secrets.token_hex(4)}"
        shell = first.shell()
        busy = threading.Thread(target=lambda: first.run(f"sh -c 'sleep 30' {tag}", timeout=60), daemon=True)
        busy.start()
        mine = set(started(tag))
        assert mine
        # [a]lone-... matches the tag but not grep's own command line.
        probe = second.run(f"ls /workspace; cat {first.workspace}/mine.txt; ps -e -o args= | grep -c '[{tag[0]}]{tag[1:]}'")
        assert "mine.txt" not in probe.stdout and "first's" not in probe.stdout
        assert probe.stdout.splitlines()[-1] == "0", probe.text()  # no process of the other episode is visible
        second.run("kill -9 -1")  # every process this episode may signal
        assert mine <= set(tagged_pids(tag)) and shell.run("echo alive").stdout == "alive\n"  # none of ours died

def test_host_is_out_of_reach(box, host_dir):
    victim = host_dir / "victim.txt"
    victim.write_text("original\n")
    victim.chmod(0o644)
    tag = f"escape-{secrets.token_hex(4)}"
    home = Path(os.path.expanduser("~"))
    targets = [Path("/etc") / tag, REPO / tag, home / tag, host_dir / tag, Path("/usr/local") / tag]
    script = [f"cat {victim}", f"echo pwned > {victim}", f"rm -f {victim}", f"chmod 777 {victim}", f"touch {victim}"]
    script += [f"echo pwned > {target}" for target in targets]
    # /tmp inside is private: the write succeeds there but must not reach the host's /tmp.
    script += [f"echo private > /tmp/{tag} && cat /tmp/{tag}"]
    result = box.run("; ".join(script))
    # The host directory is not in the sandbox at all; the system directories that are, are read-only.
    assert result.stdout == "private\n", result.text()
    assert result.stderr.count(f"{host_dir}/") >= 5, result.text()
    assert result.stderr.count("Read-only file system") >= 3, result.text()
    assert victim.read_text() == "original\n" and victim.stat().st_mode & 0o777 == 0o644
    for target in targets + [Path("/tmp") / tag]:
        assert not target.exists(), target
    # The workspace is the one writable place, and the host sees what was written there.
    assert box.run("echo made > made.txt && mkdir -p d/e && echo deep > d/e/f").ok
    assert box.read("made.txt") == b"made\n" and (box.workspace / "d/e/f").read_text() == "deep\n"


def test_no_network(box):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # reachable from the host
        probe = (
            "import socket\n"
            "for host, port in [('1.1.1.1', 80), ('127.0.0.1', %d)]:\n"
            "    try:\n"
            "        socket.create_connection((host, port), timeout=3).close(); print(host, 'connected')\n"
            "    except OSError as err:\n"
            "        print(host, 'failed', type(err).__name__)\n"
            "own = socket.create_server(('127.0.0.1', 0))\n"
            "socket.create_connection(own.getsockname(), timeout=3).close(); print('own loopback works')\n" % port
        )
        result = box.run(["python", "-c", probe])
    finally:
        server.close()
    expected = ["1.1.1.1 failed OSError", "127.0.0.1 failed ConnectionRefusedError", "own loopback works"]
    assert result.stdout.splitlines() == expected, result.text()
    interfaces = box.run("tail -n +3 /proc/net/dev | cut -d: -f1").stdout.split()
    assert interfaces == ["lo"]


def test_fork_bomb_is_contained(box):
    limits = Limits(wall_seconds=2, processes=16)
    peak, done = [0], threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], descendants_count(os.getpid()))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    # Each call starts two more that do the same: unbounded, this doubles until the host runs out of pids.
    result = box.run("bomb() { bomb & bomb & wait; }; bomb", limits=limits)
    elapsed = time.monotonic() - started
    done.set()
    watcher.join()
    assert result.timed_out and elapsed < limits.wall_seconds + 5, result.text()[-500:]
    assert "Resource temporarily unavailable" in result.stderr  # the limit was reached, not just the clock
    # The sandbox's own processes plus its launcher and the namespace's init (bwrap's, or unshare's + ours).
    assert peak[0] <= limits.processes + 4, peak[0]
    assert subprocess.run(["true"]).returncode == 0
    assert box.run("echo alive").stdout == "alive\n"


def test_infinite_loop_times_out(box):
    result = box.run("while :; do :; done", timeout=1.0)
    assert result.timed_out and result.exit_code is None and not result.ok
    assert 1.0 <= result.duration < 3.0, result.duration


def test_huge_output_is_truncated_quickly(box):
    cap = 64 << 10
    tracemalloc.start()
    try:
        result = box.run("head -c 100000000 /dev/zero | tr '\\0' a; head -c 30000000 /dev/zero >&2",
                         limits=Limits(output_bytes=cap, wall_seconds=30))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.ok and result.truncated and result.duration < 15, result.duration
    kept, marker = result.stdout[:cap], result.stdout[cap:]
    assert kept == "a" * cap and str(100_000_000 - cap) in marker
    assert result.stderr.startswith("\0" * cap) and str(30_000_000 - cap) in result.stderr[cap:]
    assert result.text().endswith("[exit code 0]\n[output truncated]")
    assert peak < 8 << 20, peak  # the dropped bytes were never held
