"""The sandbox's behaviour: commands, limits on CPU, memory, output and files, a persistent shell that keeps its state and survives timeouts; host-side file access that cannot be
steered out of the workspace; and nothing left behind after close. (What holds against attacks, host
files, network, fork bombs, endless loops and floods of output among them, is in test_red_team.py.)

Confinement tests run on the backend this machine uses and, where that is bwrap, on the unshare
fallback too, so both paths are exercised wherever the fallback can run.
"""
import gc
import os
import threading
import time

import pytest

from jointrl.envs.sandbox import BashSession, Limits, RunResult, Sandbox, confine, fresh_sandbox_from
from jointrl.envs.sandbox.cgroup import CGROUP_ROOT

from tests.envs.processes import DEFAULT, sleep_tag, started, tagged_pids


def test_backend_in_use_and_commands_run(box):
    assert DEFAULT in ("bwrap", "unshare")
    result = box.run("pwd; echo $HOME; id -u; echo out; echo err >&2; exit 3")
    # As root the sandbox runs as its own uid; otherwise bwrap keeps ours and unshare maps us to 0.
    inside_uid = box.uid if os.geteuid() == 0 or box.backend == "bwrap" else 0
    assert result.stdout.split() == ["/workspace", "/workspace", str(inside_uid), "out"]
    assert result.stderr == "err\n" and result.exit_code == 3 and not result.ok and not result.timed_out
    # An argv list runs without a shell; the sandbox's python and the tasks' packages are there.
    argv = ["python", "-c", "import numpy, openpyxl, sys; print(sys.argv[1])", "two words"]
    assert box.run(argv).stdout == "two words\n"


def test_a_sandbox_offers_only_the_distributions_it_names_and_its_copy_the_same():
    probe = ["python", "-c", "import json, sqlite3, importlib.util as u; print(u.find_spec('numpy') is None, "
             "u.find_spec('openpyxl') is None)"]
    with Sandbox(site=()) as bare, Sandbox(site=("numpy",)) as numeric:
        assert bare.run(probe).stdout == "True True\n"  # the standard library, no task packages
        assert numeric.run(probe).stdout == "False True\n"
        with fresh_sandbox_from(numeric) as copy:
            assert copy.run(probe).stdout == "False True\n"


def test_run_result_text_and_inputs():
    with Sandbox() as box:
        result = box.run("echo out; echo err >&2; exit 3")
        assert result.text() == "out\nerr\n[exit code 3]"
        assert box.run("cat", stdin="fed in\n").stdout == "fed in\n"
        assert box.run("cat; echo done").stdout == "done\n"  # no stdin given: EOF at once
        assert box.run("echo $GREETING", env={"GREETING": "hi"}).stdout == "hi\n"
        with pytest.raises(ValueError):
            box.run("true", env={"BAD=KEY": "x"})
        with pytest.raises(ValueError):
            box.run("echo " + "x" * 200_000)  # over what one argument may carry: write a script instead
        slow = box.run("sleep 5", timeout=0.5)
        assert slow.text() == "[timed out after 0.5s]" and slow.exit_code is None
        assert RunResult("", "", 0, False, True, 0.1).text() == "[exit code 0]\n[output truncated]"


def test_cpu_limit_kills_a_spinning_process():
    with Sandbox(Limits(cpu_seconds=1, wall_seconds=20)) as box:
        result = box.run("while :; do :; done")
    assert not result.timed_out and result.exit_code not in (0, None) and result.duration < 10, result.text()


def test_memory_hog_fails(box):
    hog = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))"
    result = box.run(["python", "-c", hog], limits=Limits(memory_bytes=256 << 20, wall_seconds=20))
    assert not result.timed_out and result.exit_code != 0 and "MemoryError" in result.stderr, result.text()
    assert box.run("echo alive").ok


def test_non_utf8_output_is_replaced():
    with Sandbox() as box:
        result = box.run("printf 'ok \\377\\376 end'")
    assert result.stdout == "ok \ufffd\ufffd end"


def test_file_size_limit(box):
    result = box.run("head -c 3000000 /dev/zero > big.bin", limits=Limits(file_bytes=1 << 20))
    assert result.exit_code != 0 and not result.timed_out, result.text()
    assert (box.workspace / "big.bin").stat().st_size <= 1 << 20


def test_each_run_is_a_fresh_process_tree(box):
    tag = sleep_tag()
    # The background sleep has exec'd before the command ends; the end of the command takes it down.
    started = box.run(f"sleep {tag} & until grep -qa -- {tag} /proc/$!/cmdline; do sleep 0.01; done; echo started")
    assert started.stdout == "started\n" and tagged_pids(tag) == []
    # Inside, only the namespace's init (bwrap's, or the fallback's python) and ps itself.
    processes = box.run("ps -e -o comm=").stdout.split()
    assert len(processes) == 2 and processes[-1] == "ps", processes


def test_shell_keeps_state():
    with Sandbox() as box:
        shell = box.shell(env={"GREETING": "hello"})
        assert shell.run("echo $GREETING; echo $HOME").stdout == "hello\n/workspace\n"
        assert shell.run("mkdir -p sub && cd sub && export FRUIT=apple && greet() { echo hi $1; }").ok
        result = shell.run("pwd; echo $FRUIT; greet you; false")
        assert result.stdout == "/workspace/sub\napple\nhi you\n" and result.exit_code == 1
        assert shell.run("exit_code_is() { return $1; }; exit_code_is 42").exit_code == 42
        assert shell.run("echo 'a b' \"$HOME\" $'tab\\there' \\\\").stdout == "a b /workspace tab\there \\\n"
        assert shell.run("cat <<'EOF'\nheredoc $FRUIT\nEOF").stdout == "heredoc $FRUIT\n"
        assert shell.run("if then").exit_code == 2  # a syntax error is the command's, not the session's
        assert shell.run("echo still here").stdout == "still here\n"


def test_shell_commands_reading_stdin_get_eof():
    with Sandbox() as box:
        shell = box.shell()
        started = time.monotonic()
        assert shell.run("cat; echo after-cat").stdout == "after-cat\n"
        assert shell.run("read line").exit_code == 1
        assert "EOFError" in shell.run("python -c 'input()'").stderr
        assert time.monotonic() - started < 8
        assert shell.run("echo next").stdout == "next\n"


def test_shell_restarts_after_timeout_and_exit():
    with Sandbox() as box:
        shell = box.shell()
        tag = sleep_tag()
        first = shell.run(f"cd /tmp; STATE=kept; sleep {tag} &")
        assert first.ok
        if CGROUP_ROOT is None:
            # Without a cgroup to count their CPU, background processes are stopped after each command.
            assert "background process(es) stopped" in first.note and tagged_pids(tag) == []
        else:
            assert len(started(tag)) == 1
        assert shell.run("echo $STATE").stdout == "kept\n"
        began = time.monotonic()
        result = shell.run("while :; do :; done", timeout=1.0)
        assert result.timed_out and result.exit_code is None and time.monotonic() - began < 4
        assert "restarted" in result.text() and tagged_pids(tag) == []
        fresh = shell.run("pwd; echo state=$STATE")
        assert fresh.stdout == "/workspace\nstate=\n" and fresh.ok
        gone = shell.run("echo bye; exit 7")
        assert gone.exit_code == 7 and gone.stdout == "bye\n" and "new one was started" in gone.text()
        back = shell.run("echo back")
        assert back.stdout == "back\n" and back.note == ""


def test_shell_output_is_bounded_per_command():
    with Sandbox(Limits(output_bytes=1000)) as box:
        shell = box.shell()
        result = shell.run("head -c 5000000 /dev/zero | tr '\\0' b; echo tail-line")
        assert result.truncated and result.stdout.startswith("b" * 1000) and result.ok
        assert shell.run("echo small").stdout == "small\n"
        # A command larger than a pipe's buffer goes through whole (the shell has no argument limit).
        long = shell.run("echo " + "y" * 200_000 + " | wc -c")
        assert long.stdout == "200001\n", long.text()


def test_shell_outlives_the_thread_that_made_it():
    # A parent-death signal follows the creating thread; tools run in threads that end after each call.
    with Sandbox() as box:
        made = {}

        def tool_call():
            made["shell"] = box.shell()
            made["shell"].run("cd /tmp && X=set-in-thread")

        worker = threading.Thread(target=tool_call)
        worker.start()
        worker.join()
        time.sleep(0.3)
        shell: BashSession = made["shell"]
        result = shell.run("pwd; echo $X")
        assert result.stdout == "/tmp\nset-in-thread\n" and result.note == "", result.text()


def _running(shell, tag: str) -> threading.Thread:
    """A call in flight: `sleep <tag>` running in the shell from another thread, once it has exec'd."""
    call = threading.Thread(target=lambda: shell.run(f"sleep {tag}; echo done", timeout=120), daemon=True)
    call.start()
    assert len(started(tag)) == 1
    return call


def test_close_leaves_nothing_behind_even_during_a_call():
    tag = sleep_tag()
    box = Sandbox()
    base = box.workspace.parent
    call = _running(box.shell(), tag)
    started = time.monotonic()
    box.close()
    box.close()  # idempotent
    call.join(10)
    assert not call.is_alive() and time.monotonic() - started < 10
    assert tagged_pids(tag) == [] and not base.exists() and box.closed
    with pytest.raises(RuntimeError):
        box.run("true")

    # Dropped without close: the finalizer does the same.
    tag = sleep_tag()
    box = Sandbox()
    base = box.workspace.parent
    call = _running(box.shell(), tag)
    del box
    gc.collect()
    call.join(10)
    assert not call.is_alive() and tagged_pids(tag) == [] and not base.exists()


def test_host_side_paths_stay_in_the_workspace(host_dir):
    (host_dir / "secret.txt").write_text("host secret\n")
    with Sandbox(files={"a/b.txt": "nested", "run.sh": "echo ran"}) as box:
        assert box.read("a/b.txt") == b"nested" and box.read("/workspace/a/b.txt") == b"nested"
        box.write("tool.sh", "#!/bin/sh\necho tool\n", mode=0o755)
        assert box.run("./tool.sh && bash run.sh && echo more >> a/b.txt").stdout == "tool\nran\n"
        assert box.read("a/b.txt") == b"nestedmore\n"
        for bad in ("../x", "a/../../x", "/etc/passwd", "/workspace/../etc/passwd"):
            with pytest.raises(ValueError):
                box.read(bad)
            with pytest.raises(ValueError):
                box.write(bad, "x")
        box.run(f"ln -s {host_dir}/secret.txt leak; ln -s {host_dir} dirlink; ln -s /workspace/a/b.txt inside;"
                " ln -s a/b.txt relative; mkfifo pipe")
        for bad in ("leak", "dirlink/secret.txt", "dirlink/new.txt"):
            with pytest.raises(ValueError):
                box.read(bad)
            with pytest.raises(ValueError):
                box.write(bad, "overwritten")
        assert (host_dir / "secret.txt").read_text() == "host secret\n" and not (host_dir / "new.txt").exists()
        assert box.read("inside") == b"nestedmore\n" and box.read("relative") == b"nestedmore\n"
        with pytest.raises(ValueError):
            box.read("pipe")  # would block forever if opened for a plain read
        assert box.exists("a/b.txt") and box.exists("a") and not box.exists("nope") and not box.exists("a/nope")
        with pytest.raises(ValueError):
            box.exists("../etc")


def test_fresh_sandbox_from_a_copy():
    with Sandbox(files={"src/app.py": "print('v1')"}) as box:
        box.run("ln -s src/app.py link.py; mkfifo pipe; echo generated > out.txt")
        with fresh_sandbox_from(box) as copy:
            assert copy.workspace != box.workspace
            copied = copy.run("python link.py; cat out.txt; test -p pipe || echo no-pipe")
            assert copied.stdout == "v1\ngenerated\nno-pipe\n"
            assert copy.run("echo v2 > src/app.py && echo changed").ok
            assert box.read("src/app.py") == b"print('v1')" and copy.read("src/app.py") == b"v2\n"
        dest = box.workspace.parent / "copied"
        box.copy_workspace(dest)
        assert (dest / "link.py").is_symlink() and (dest / "out.txt").read_text() == "generated\n"
        with fresh_sandbox_from(dest) as from_path:
            assert from_path.run("cat out.txt").stdout == "generated\n"


def test_bwrap_command_line_follows_what_the_installed_bwrap_knows(monkeypatch, tmp_path):
    plan = confine.mount_plan(tmp_path, Limits(tmp_bytes=1 << 20), python=[])
    env = confine.sandbox_env()
    monkeypatch.setattr(confine, "bwrap_options", lambda: frozenset({"--size", "--disable-userns", "--tmpfs"}))
    modern = confine.bwrap_argv(plan, env, Limits(), ["true"], uid=None)
    tmpfs = [i for i, arg in enumerate(modern) if arg == "--tmpfs"]
    assert [modern[i + 1] for i in tmpfs] == ["/etc", "/dev/shm", "/tmp", "/run"] and "--disable-userns" in modern
    assert all(modern[i - 4] == "--size" for i in tmpfs)  # every tmpfs is capped
    # bwrap 0.6 (Ubuntu 22.04) has neither option: leave them out rather than fail to start.
    monkeypatch.setattr(confine, "bwrap_options", lambda: frozenset({"--ro-bind", "--tmpfs", "--perms"}))
    old = confine.bwrap_argv(plan, env, Limits(), ["true"], uid=None)
    assert "--size" not in old and "--disable-userns" not in old and old.count("--tmpfs") == 4
    as_root = confine.bwrap_argv(plan, env, Limits(), ["true"], uid=123456789)
    assert "--unshare-user" not in as_root and as_root[as_root.index("--reuid") + 1] == "123456789"
