"""Host-side access to a workspace that the sandbox's symlinks cannot steer outside it.

Every path is resolved by name against the workspace, one O_NOFOLLOW openat per component; a symlink is
spliced in by name and the walk starts again, so no host path outside the workspace is ever opened.
"""
from __future__ import annotations

import errno
import os
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


class CopyTooLarge(OSError):
    """A workspace over the copy's bounds on files or bytes."""


def copy_tree(src: Path, dest: Path, max_files: int = 20_000, max_bytes: int = 256 << 20) -> None:
    """Copy a workspace without ever following a link: symlinks as links, FIFOs, sockets and devices skipped.

    Every directory and file is opened relative to its parent's descriptor with O_NOFOLLOW, so a link
    swapped in while the copy runs is refused rather than followed (no race can steer it to a host path),
    and a workspace over `max_files` entries or `max_bytes` of file data raises CopyTooLarge.
    """
    budget = {"files": max_files, "bytes": max_bytes}
    dest.mkdir(parents=True, exist_ok=True)
    top = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        _copy_dir(top, dest, budget)
    finally:
        os.close(top)


def _copy_dir(fd: int, dest: Path, budget: dict) -> None:
    for name in sorted(os.listdir(fd)):
        budget["files"] -= 1
        if budget["files"] < 0:
            raise CopyTooLarge("the workspace has more entries than a copy takes")
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        target = dest / name
        if stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(name, dir_fd=fd), target)
        elif stat.S_ISDIR(info.st_mode):
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError:
                continue  # replaced by a link or a file since it was listed: not copied
            try:
                target.mkdir(exist_ok=True)
                _copy_dir(child, target, budget)
            finally:
                os.close(child)
            # The mode last: a directory closed to writing must first receive its entries.
            os.chmod(target, stat.S_IMODE(info.st_mode))
        elif stat.S_ISREG(info.st_mode):
            _copy_file(fd, name, target, info, budget)
        else:
            continue
        # Times too, as a copy with shutil.copy2 would keep them (make and checks of freshness read them).
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)


def _copy_file(fd: int, name: str, target: Path, info: os.stat_result, budget: dict) -> None:
    # A file replaced by a link since it was listed fails here (ELOOP) rather than being followed.
    source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    try:
        if not stat.S_ISREG(os.fstat(source).st_mode):
            return
        with os.fdopen(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "wb") as out:
            while chunk := os.read(source, 1 << 20):
                budget["bytes"] -= len(chunk)
                if budget["bytes"] < 0:
                    raise CopyTooLarge("the workspace holds more data than a copy takes")
                out.write(chunk)
        os.chmod(target, stat.S_IMODE(info.st_mode))
    finally:
        os.close(source)
