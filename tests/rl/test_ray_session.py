"""The job's Ray session: a local one starts without a line of Ray output and logs into the run directory; a
cluster started with `ray start --head` is joined by address. Each runs in a fresh process (one Ray session
per process), and the head is this test's own process group, stopped by its id."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from jointrl.rl.actor_group import MAX_RAY_TEMP_DIR, ray_temp_dir
from jointrl.rl.recipe import load_recipe

SESSION = textwrap.dedent("""
    import sys
    import ray
    from jointrl.rl.actor_group import ActorGroup, Placement, start_ray

    address, run_dir = (None if a == "-" else a for a in sys.argv[1:3])
    start_ray(1, 1, False, address=address, run_dir=run_dir)

    class Echo:
        def pid(self):
            import os
            return os.getpid()

        def niceness(self):
            import os
            return os.nice(0)

    group = ActorGroup(Echo, 2, placement=Placement(num_cpus=1))
    pids = ray.get(group.call("pid"))
    import os
    print(ray.get_runtime_context().gcs_address, len(set(pids)), os.nice(0), *ray.get(group.call("niceness")))
    group.shutdown()
    ray.shutdown()
""")


def session(address: str | None, run_dir: str | None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SESSION, address or "-", run_dir or "-"], capture_output=True,
                          text=True, timeout=240, env={**os.environ, **env})


def test_the_temp_dir_is_the_run_directory_only_where_ray_sockets_fit(tmp_path):
    assert ray_temp_dir(None) is None
    short = Path("/tmp/r")
    assert ray_temp_dir(short) == "/tmp/r/ray"
    deep = tmp_path / ("d" * MAX_RAY_TEMP_DIR)
    assert ray_temp_dir(deep) is None


def test_the_recipe_names_a_cluster_address(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("model: {preset: tiny}\nray: {address: auto}\n")
    assert load_recipe(path).ray.address == "auto"
    assert load_recipe(path, ["ray.address=10.0.0.1:6379"]).ray.address == "10.0.0.1:6379"
    assert load_recipe(path, ["ray.address=null"]).ray.address is None


def test_a_local_session_prints_nothing_and_logs_into_the_run_directory():
    # A short folder of our own: pytest's tmp_path is too deep for Ray's socket paths.
    run_dir = tempfile.mkdtemp(prefix="jrl-", dir="/tmp")
    try:
        done = session(None, run_dir)
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        assert len(done.stdout.splitlines()) == 1 and done.stdout.split()[1] == "2"
        # The actors run at the driver's priority, not below it (Ray's default adds 15 to its workers' niceness).
        driver, *actors = done.stdout.split()[2:]
        assert actors == [driver, driver]
        logs = Path(run_dir) / "ray" / "session_latest" / "logs"
        assert (logs / "raylet.out").is_file()
    finally:
        subprocess.run(["rm", "-rf", run_dir], check=True)


def test_a_stale_cluster_address_file_does_not_capture_a_local_session():
    # `ray start --head` leaves ray_current_cluster behind; Ray's own default would try to join that address.
    run_dir = tempfile.mkdtemp(prefix="jrl-", dir="/tmp")
    try:
        (Path(run_dir) / "ray").mkdir()
        (Path(run_dir) / "ray" / "ray_current_cluster").write_text("192.0.2.1:6390")
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        done = subprocess.run([sys.executable, "-c", SESSION, "-", run_dir], capture_output=True, text=True,
                              timeout=240, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        assert not done.stdout.startswith("192.0.2.1") and done.stdout.split()[1] == "2"
    finally:
        subprocess.run(["rm", "-rf", run_dir], check=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(port: int, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"the Ray head did not listen on port {port} within {seconds:g} s")


@pytest.mark.slow
def test_a_run_joins_a_cluster_started_with_ray_start_head():
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="jrl-head-", dir="/tmp")
    ray = str(Path(sys.executable).with_name("ray"))
    # --block keeps the head's processes under this one process group, which the test stops by its id.
    head = subprocess.Popen([ray, "start", "--head", "--block", "--num-cpus", "2", "--port", str(port),
                             "--temp-dir", temp, "--include-dashboard=false", "--disable-usage-stats"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        # Joining by host:port needs token authentication named before Ray is imported (Ray's default is on).
        _wait_for(port)
        done = session(f"127.0.0.1:{port}", None, RAY_AUTH_MODE="token")
        assert done.returncode == 0, done.stderr[-2000:]
        gcs, members = done.stdout.split()[:2]
        assert gcs.endswith(f":{port}") and members == "2"
        assert done.stderr == ""
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        subprocess.run(["rm", "-rf", temp], check=False)
