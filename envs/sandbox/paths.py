"""Host-side access to a workspace that the sandbox's symlinks cannot steer outside it.

Every path is resolved by name against the workspace, one O_NOFOLLOW openat per component; a symlink is
spliced in by name and the walk starts again, so no host path outside the workspace is ever opened.
"""
from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from jointrl.envs.sandbox.confine import INSIDE

if TYPE_CHECKING:
    from jointrl.envs.sandbox.process import Confinement


def open_up(directory: Path) -> None:
    os.chmod(directory, 0o700)
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            open_up(Path(entry.path))


def _lexical(path: str, base: list[str], original: str) -> list[str]:
    """Components of `path` resolved by name against `base`; escaping the workspace raises ValueError."""
    if path.startswith("/"):
        if path != INSIDE and not path.startswith(INSIDE + "/"):
            raise ValueError(f"path {original!r} is outside the workspace ({INSIDE})")
        path, base = path[len(INSIDE):], []
    parts = list(base)
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise ValueError(f"path {original!r} escapes the workspace")
            parts.pop()
        else:
            parts.append(part)
    return parts


def open_in(root: Path, path: str, flags: int, mode: int = 0o644, box: Confinement | None = None) -> int:
    """Open `path` under `root` following symlinks only within it (each step is an O_NOFOLLOW openat).

    With `box`, missing parent directories are created and handed to the sandbox's uid.
    """
    parts = _lexical(path, [], path)
    if not parts:
        raise ValueError(f"path {path!r} names the workspace itself, not a file in it")
    for _ in range(40):
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for i, part in enumerate(parts):
                last = i == len(parts) - 1
                try:
                    if last:
                        return os.open(part, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
                    child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except FileNotFoundError:
                    if last or box is None:
                        raise
                    os.mkdir(part, 0o755, dir_fd=fd)
                    box.own(part, dir_fd=fd)
                    child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError as err:
                    if err.errno not in (errno.ELOOP, errno.ENOTDIR) or not stat.S_ISLNK(
                            os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
                        raise
                    # A symlink: splice its target in by name and walk again from the workspace root.
                    parts = _lexical(os.readlink(part, dir_fd=fd), parts[:i], path) + parts[i + 1:]
                    break
                os.close(fd)
                fd = child
        finally:
            os.close(fd)
    raise ValueError(f"path {path!r}: too many levels of symbolic links")


def regular(fd: int, path: str) -> None:
    # A FIFO or device planted by the sandbox would block or mislead a host-side read or write.
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"path {path!r} is not a regular file")


def copy_tree(src: Path, dest: Path) -> None:
    """Copy a workspace: symlinks as links, never followed; FIFOs, sockets and devices skipped."""
    def special(directory: str, names: list[str]) -> set[str]:
        kept = (stat.S_ISREG, stat.S_ISDIR, stat.S_ISLNK)
        return {n for n in names if not any(k(os.lstat(os.path.join(directory, n)).st_mode) for k in kept)}

    shutil.copytree(src, dest, symlinks=True, ignore=special, dirs_exist_ok=True)
