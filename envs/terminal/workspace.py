"""Read a workspace directory from the host without ever following a symlink the sandbox may have planted."""
from __future__ import annotations

import os
import stat
from pathlib import Path

READ_CAP = 4 << 20  # bytes read from any one file; a bigger file counts as unreadable


class Workspace:
    """Read-only, symlink-proof access to a workspace directory on the host."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _parent_fd(self, rel: str) -> tuple[int, str]:
        """An fd of the directory holding `rel` (no symlinks followed on the way) and the last name."""
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if not parts or ".." in parts:
            raise FileNotFoundError(rel)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts[:-1]:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except OSError:
            os.close(fd)
            raise
        return fd, parts[-1]

    def lstat(self, rel: str) -> os.stat_result | None:
        """lstat of `rel`, or None when it (or a real directory on its path) is missing."""
        try:
            fd, name = self._parent_fd(rel)
        except OSError:
            return None
        try:
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return None
        finally:
            os.close(fd)

    def read(self, rel: str, cap: int = READ_CAP) -> bytes | None:
        """The bytes of the regular file `rel`, or None if it is missing, not a plain file, or too big."""
        try:
            parent, name = self._parent_fd(rel)
        except OSError:
            return None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
        except OSError:
            return None
        finally:
            os.close(parent)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            data = f.read(cap + 1)
        return data if len(data) <= cap else None

    def walk(self, rel: str) -> tuple[set[str], set[str]] | None:
        """(non-directory entries, directories) under `rel`, as workspace-relative paths; None if no such dir."""
        info = self.lstat(rel)
        if info is None or not stat.S_ISDIR(info.st_mode):
            return None
        parent, name = self._parent_fd(rel)
        try:
            top = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
        finally:
            os.close(parent)
        files: set[str] = set()
        dirs: set[str] = set()
        base = rel.strip("/")
        try:
            for path, subdirs, names, _ in os.fwalk(".", dir_fd=top):
                prefix = base if path == "." else f"{base}/{path[2:]}"
                files.update(f"{prefix}/{n}" for n in names)
                dirs.update(f"{prefix}/{d}" for d in subdirs)
        finally:
            os.close(top)
        # fwalk lists a symlink to a directory among the directories without entering it: it is not one.
        links = {d for d in dirs if (s := self.lstat(d)) is not None and stat.S_ISLNK(s.st_mode)}
        return files | links, dirs - links
