"""Build an episode's starting workspace: the task's files and modes, then its setup script, replayed from a cache.

A setup script (building a git repository, say) is a pure function of the task, and GRPO-style sampling
resets the same task many times in one worker; so its resulting files are kept in memory per script and
written back directly on later resets instead of running the script again.
"""
from __future__ import annotations

import os
import stat
from collections import OrderedDict

from jointrl.envs.terminal.task import Task

SETUP_SECONDS = 30.0
CACHED_SETUPS = 64  # scripts whose results are kept, least recently used dropped first

_results: OrderedDict[str, tuple[dict[str, tuple[bytes, int]], dict[str, str]]] = OrderedDict()


def prepare(sandbox, task: Task, env: dict[str, str]) -> dict[str, str]:
    """Lay out `task`'s starting state in `sandbox`; return the `name=value` pairs its setup printed."""
    for path, mode in task.modes.items():
        (sandbox.workspace / path).chmod(mode)
    if not task.setup:
        return {}
    if task.setup in _results:
        _results.move_to_end(task.setup)
        files, recorded = _results[task.setup]
        for path, (data, mode) in files.items():
            sandbox.write(path, data, mode=mode)
        return dict(recorded)
    result = sandbox.run(task.setup, env=env, timeout=SETUP_SECONDS)
    if not result.ok:
        raise RuntimeError(f"a terminal task's setup failed: {result.text()}")
    recorded = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    _results[task.setup] = (_snapshot(sandbox.workspace), recorded)
    if len(_results) > CACHED_SETUPS:
        _results.popitem(last=False)
    return dict(recorded)


def _snapshot(root) -> dict[str, tuple[bytes, int]]:
    """Every regular file under `root` (only our own setup has run there) with its permission bits."""
    files = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode):
                with open(path, "rb") as f:
                    files[os.path.relpath(path, root)] = (f.read(), stat.S_IMODE(info.st_mode))
    return files
