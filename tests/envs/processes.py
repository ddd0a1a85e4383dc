"""Finding a sandbox's processes from the host, for the sandbox and red-team tests: by tag, by descent."""
import os
import secrets
import time

from jointrl.envs.sandbox import sandbox_backend

DEFAULT = sandbox_backend()
# Confinement tests run on this machine's backend and, where that is bwrap, on the unshare fallback too.
BACKENDS = [DEFAULT] + (["unshare"] if DEFAULT == "bwrap" else [])


def tagged_pids(tag: str) -> list[int]:
    """Pids of live processes whose command line contains `tag` (read straight from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if tag.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def started(tag: str) -> list[int]:
    """Wait (briefly) until a background `sleep <tag>` has exec'd, and return its pids."""
    deadline = time.monotonic() + 5
    while not tagged_pids(tag) and time.monotonic() < deadline:
        time.sleep(0.01)
    return tagged_pids(tag)


def descendants_count(root: int) -> int:
    """How many live processes descend from `root`, from the parent links in /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    below, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - below
        below |= frontier
    return len(below)


def sleep_tag() -> str:
    """A sleep length no other process on the machine is likely to use, to find ours in /proc."""
    return f"{secrets.randbelow(10**6) + 10**6}.{secrets.randbelow(10**6):06d}"
