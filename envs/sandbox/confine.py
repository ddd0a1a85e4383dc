"""How a sandboxed command is confined: one mount plan, rendered as a bwrap or an unshare command line.

The plan gives the sandbox a fresh, minimal root: the system's binaries and libraries (`/usr`, `/bin`,
`/lib*`, `/sbin`) read-only, a few files of `/etc` (users, name service, loader cache, alternatives), the
interpreter and packages of `runtime.py` read-only, a writable workspace at `/workspace` (also HOME),
size-capped private tmpfs at `/tmp` and `/dev/shm`, a minimal `/dev`, its own `/proc` and an empty `/run`.
Nothing else of the host is there: no home directories, no project checkout or virtual environment, no
host `/tmp` or `/run` (where host sockets live), no `/var`.

Both renderings then run `setpriv` (become the sandbox's uid, drop every capability, set no_new_privs)
and `prlimit` (the rlimits, set inside so they bind only the sandbox) before the command itself.
bwrap runs as root when we are root (so it can read every bind source) and in a user namespace when
we are not, and forbids nested user namespaces where it can (`--disable-userns`, bwrap >= 0.8). The
unshare fallback makes the same namespaces and runs this file as a script in them (`fallback_init`): it
mounts the plan, pivots into it, and stays as the pid namespace's init.
"""
from __future__ import annotations

import ctypes
import fcntl
import json
import os
import re
import socket
import struct
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jointrl.envs.sandbox.types import Limits

INSIDE = "/workspace"
SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
# What programs need of /etc: users and groups (ls -l, id), name service and hosts, the loader's cache,
# the alternatives behind /usr/bin links (awk, editor), shell start-up, time zone.
ETC = ("passwd", "group", "nsswitch.conf", "hosts", "host.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
       "alternatives", "bash.bashrc", "inputrc", "localtime", "timezone", "mime.types")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
HOST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _host_entry(host: str) -> tuple:
    """A symlink stays a symlink (merged-/usr systems link /bin to usr/bin); anything else is bound read-only."""
    return ("symlink", os.readlink(host), host) if os.path.islink(host) else ("ro", host, host)


def mount_plan(workspace: Path, limits: Limits, python: list[tuple]) -> list[tuple]:
    """The sandbox's filesystem as an ordered list of operations, shared by both backends.

    Operations: ("ro" | "rw", host, inside) binds, ("symlink", target, inside), ("tmpfs", inside, bytes,
    mode), ("dir", inside, mode), ("dev", inside), ("proc", inside), ("readonly", inside) remounts one
    mount read-only. `python` is runtime.python_mounts(): the interpreter and its packages.
    """
    plan: list[tuple] = [_host_entry(f"/{name}") for name in SYSTEM if os.path.lexists(f"/{name}")]
    plan.append(("tmpfs", "/etc", 1 << 20, 0o755))
    plan += [_host_entry(f"/etc/{name}") for name in ETC if os.path.lexists(f"/etc/{name}")]
    plan.append(("readonly", "/etc"))
    plan += python
    plan += [
        ("dev", "/dev"),
        ("tmpfs", "/dev/shm", limits.tmp_bytes, 0o1777),
        ("readonly", "/dev"),
        ("proc", "/proc"),
        ("tmpfs", "/tmp", limits.tmp_bytes, 0o1777),
        ("tmpfs", "/run", 1 << 16, 0o755),
        ("readonly", "/run"),
        ("rw", str(workspace), INSIDE),
        ("readonly", "/"),
    ]
    return plan


def sandbox_env(extra: dict[str, str] | None = None, python_env: dict[str, str] | None = None,
                python_bin: str | None = None) -> dict[str, str]:
    """The environment a sandboxed command starts with, `extra` on top."""
    path = f"{python_bin}:{HOST_PATH}" if python_bin else HOST_PATH
    env = {
        "HOME": INSIDE, "PATH": path, "LANG": "C.UTF-8", "TERM": "dumb", "TMPDIR": "/tmp", "USER": "sandbox",
        "SHELL": "/bin/bash", **(python_env or {}),
    }
    for key, value in (extra or {}).items():
        if not key or "=" in key or "\0" in key or "\0" in str(value):
            raise ValueError(f"bad environment variable {key!r}={value!r}")
        env[key] = str(value)
    return env


def _inner_argv(limits: Limits, uid: int | None) -> list[str]:
    """Become the sandbox's uid with no capabilities, now or after any exec, then set the rlimits."""
    ids = [] if uid is None else ["--reuid", str(uid), "--regid", str(uid), "--clear-groups"]
    return [
        "setpriv", *ids, "--no-new-privs", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--",
        "prlimit", f"--as={limits.memory_bytes}", f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}",
        f"--nproc={limits.processes}", f"--fsize={limits.file_bytes}", f"--nofile={limits.open_files}", "--",
    ]


@lru_cache(maxsize=None)
def bwrap_options() -> frozenset[str]:
    """The options this bwrap knows: releases before 0.7 lack --size, before 0.8 --disable-userns."""
    try:
        usage = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(re.findall(r"^\s+(--[a-z0-9-]+)", usage, re.MULTILINE))


def bwrap_argv(plan: list[tuple], env: dict[str, str], limits: Limits, command: list[str],
               uid: int | None, seccomp_fd: int | None = None) -> list[str]:
    """The bubblewrap command line for `command` under `plan`: as root when `uid` is set, else in a user namespace."""
    argv = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
    known = bwrap_options()
    if uid is None:
        argv += ["--unshare-user"] + (["--disable-userns"] if "--disable-userns" in known else [])
    else:
        # Root sets the sandbox up, then setpriv needs just these two to become the sandbox's uid.
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    for op, *args in plan:
        if op == "ro":
            argv += ["--ro-bind", args[0], args[1]]
        elif op == "rw":
            argv += ["--bind", args[0], args[1]]
        elif op == "symlink":
            argv += ["--symlink", args[0], args[1]]
        elif op == "tmpfs":
            # Without --size (old bwrap) a tmpfs is bounded only by the host's memory.
            size = ["--size", str(args[1])] if "--size" in known else []
            argv += size + ["--perms", f"{args[2]:o}", "--tmpfs", args[0]]
        elif op == "dir":
            argv += ["--perms", f"{args[1]:o}", "--dir", args[0]]
        elif op == "dev":
            argv += ["--dev", args[0]]
        elif op == "proc":
            argv += ["--proc", args[0]]
        elif op == "readonly":
            argv += ["--remount-ro", args[0]]
        else:
            raise AssertionError(f"unknown mount op {op}")
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    argv += ["--chdir", INSIDE, "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    return argv + ["--"] + _inner_argv(limits, uid) + command


def unshare_argv(plan: list[tuple], env: dict[str, str], limits: Limits, command: list[str], uid: int | None,
                 new_root: Path) -> list[str]:
    """The unshare command line for `command` under `plan`; `new_root` is an empty host directory.

    unshare makes the namespaces; this file, run as a script (`fallback_init`), builds the root in them.
    """
    spec = {"plan": plan, "root": str(new_root), "env": env, "argv": _inner_argv(limits, uid) + command}
    user = [] if uid is not None else ["--user", "--map-root-user"]
    return ["setpriv", "--pdeathsig", "KILL", "--", "unshare", *user, "--mount", "--propagation", "private",
            "--pid", "--kill-child=SIGKILL", "--net", "--ipc", "--uts", "--",
            sys.executable, "-I", "-S", os.path.abspath(__file__), json.dumps(spec)]


# The unshare fallback's init: runs as (namespace) root and pid 1, with the standard library only.
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC = 4096, 16384
# statvfs flag -> mount flag, for the flags a remount inside a user namespace must keep (Linux values:
# ST_NOSUID, ST_NODEV, ST_NOEXEC, ST_NOATIME, ST_NODIRATIME, ST_RELATIME).
KEPT_FLAGS = {2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC, 1024: 1024, 2048: 2048, 4096: 1 << 21}


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)

    def encode(text):
        return None if text is None else text.encode()

    if libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount {source} on {target}: {os.strerror(code)}")


def _build(op: str, args: list, root: str) -> None:
    """Carry out one plan operation under `root` (the plan's paths are absolute inside the sandbox)."""
    target = root + (args[1] if op in ("ro", "rw", "symlink") else args[0])
    if op in ("ro", "rw"):
        if os.path.isdir(args[0]):
            os.makedirs(target, exist_ok=True)
        else:
            open(target, "a").close()
        _mount(args[0], target, None, MS_BIND | (MS_REC if op == "ro" else 0))
    elif op == "symlink":
        os.symlink(args[0], target)
    elif op == "dir":
        os.makedirs(target, exist_ok=True)
        os.chmod(target, args[1])
    elif op == "tmpfs":
        os.makedirs(target, exist_ok=True)
        _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={args[2]:o},size={args[1]}")
    elif op == "dev":
        os.makedirs(target, exist_ok=True)
        _mount("dev", target, "tmpfs", MS_NOSUID, "mode=755,size=64k")
        for name in DEVICES:
            open(f"{target}/{name}", "w").close()
            _mount(f"/dev/{name}", f"{target}/{name}", None, MS_BIND)
        for name, link in {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
                           "stderr": "/proc/self/fd/2"}.items():
            os.symlink(link, f"{target}/{name}")
        os.mkdir(f"{target}/shm")
    elif op == "proc":
        os.makedirs(target, exist_ok=True)
        _mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    elif op != "readonly":
        raise AssertionError(f"unknown mount op {op}")


def _make_read_only(root: str, writable: set[str]) -> None:
    """Remount read-only every mount at or below `root` but the `writable` ones (binds keep their flags)."""
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for point in points:
        # mountinfo escapes space, tab, newline and backslash as octal.
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), point)
        if (point == root or point.startswith(root + "/")) and point not in writable:
            kept = os.statvfs(point).f_flag
            flags = sum(flag for st, flag in KEPT_FLAGS.items() if kept & st)
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)


def fallback_init(spec: dict) -> int:
    """Build the plan's root, pivot into it, run the command as a child and return its exit status."""
    root, plan = spec["root"], spec["plan"]
    # unshare leaves loopback down in a new network namespace (bwrap brings it up): SIOCSIFFLAGS, IFF_UP.
    fcntl.ioctl(socket.socket(), 0x8914, struct.pack("16sH22x", b"lo", 1))
    _mount("jointrl-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
    for op, *args in plan:
        _build(op, args, root)
    readonly = {args[0] for op, *args in plan if op == "readonly"}
    writable = {root + args[0] for op, *args in plan if op in ("tmpfs", "proc") and args[0] not in readonly}
    writable |= {root + args[1] for op, *args in plan if op == "rw"}
    _make_read_only(root, writable)
    # Swap roots and detach the old one, so nothing of the host is reachable but what the plan bound.
    os.chdir(root)
    subprocess.run(["pivot_root", ".", "."], check=True)
    if ctypes.CDLL(None, use_errno=True).umount2(b".", 2) != 0:  # MNT_DETACH
        raise OSError(ctypes.get_errno(), "cannot detach the old root")
    os.chdir(INSIDE)
    child = os.fork()
    if child == 0:
        try:
            os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
        except OSError as err:
            print(f"sandbox: cannot run {spec['argv'][0]}: {err}", file=sys.stderr)
        os._exit(127)
    # As the namespace's init, reap whatever is orphaned until the command itself ends.
    while True:
        pid, status = os.wait()
        if pid == child:
            return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(fallback_init(json.loads(sys.argv[1])))
