"""cgroup v2 detection and the episode group's file protocol, on a fake cgroupfs in a temporary folder.

(The machine the tests run on may have no delegated cgroup v2: the real one is used only when detected.)
"""
import subprocess
from pathlib import Path

from jointrl.envs.sandbox.cgroup import CgroupRoot, EpisodeGroup, detect

MOUNTINFO = "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"


def fake_cgroupfs(tmp_path: Path, controllers: str, enabled: str = "") -> Path:
    own = tmp_path / "user.slice" / "job"
    own.mkdir(parents=True)
    (own / "cgroup.controllers").write_text(controllers + "\n")
    (own / "cgroup.subtree_control").write_text(enabled + "\n")
    return own


def test_detection_switches_on_missing_controllers_and_says_why_it_cannot(tmp_path):
    own = fake_cgroupfs(tmp_path, "cpuset cpu io memory pids", enabled="cpu")
    root, why = detect(MOUNTINFO, "0::/user.slice/job\n", root_override=tmp_path)
    assert root == CgroupRoot(own) and "memory, pids and cpu" in why
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids"  # cpu was already on

    assert detect("25 1 0:22 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", "4:memory:/x\n")[0] is None
    lacking = fake_cgroupfs(tmp_path / "other", "cpu io")
    root, why = detect(MOUNTINFO, "0::/user.slice/job\n", root_override=tmp_path / "other")
    assert root is None and "['memory', 'pids'] are not delegated" in why and lacking.exists()
    assert detect(MOUNTINFO, "1:name=systemd:/\n", root_override=tmp_path)[1].startswith("this process is in no")


def test_an_episode_group_caps_memory_and_processes_and_joins_before_exec(tmp_path):
    own = fake_cgroupfs(tmp_path, "memory pids cpu")
    group = EpisodeGroup(CgroupRoot(own), memory_bytes=3 << 30, processes=99)
    assert group.path.parent == own and group.path.name.startswith("jointrl-episode-")
    assert (group.path / "memory.max").read_text() == str(3 << 30) and (group.path / "pids.max").read_text() == "99"
    # The prefix writes its own pid to cgroup.procs, then becomes the command (same pid, so nothing escapes).
    run = subprocess.run(group.argv_prefix() + ["/bin/sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    assert (group.path / "cgroup.procs").read_text().strip() == run.stdout.strip()
    (group.path / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    assert group.cpu_seconds() == 2.5
    (group.path / "cgroup.procs").write_text("")
    for name in ("memory.max", "pids.max", "cpu.stat", "cgroup.procs"):
        (group.path / name).unlink()
    group.remove()
    assert not group.path.exists()
