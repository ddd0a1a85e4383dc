"""Fetch the pinned sdists once with pip, check their sha256, unpack them into the local cache.

The cache is `$JOINTRL_CACHE/swe` (default `~/.cache/jointrl/swe`): `sdists/` holds the verified archives,
`src/<name>-<version>/` the unpacked trees. Episodes read only the cache, so they work offline; a family
whose tree is missing raises `MissingCache` naming the command that fills it.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from jointrl.envs.swe.realcode.sources import SOURCES, Source

PREPARE_COMMAND = "jointrl envs prepare swe"
MARKER = ".jointrl-verified"  # written last in an unpacked tree: its sdist's sha256
MAX_WORKSPACE_FILE = 1 << 20


class MissingCache(FileNotFoundError):
    """A real-code family's sources are not in the local cache."""


def cache_root() -> Path:
    """Where prepared sources live: $JOINTRL_CACHE/swe, else ~/.cache/jointrl/swe."""
    base = os.environ.get("JOINTRL_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "jointrl")
    return Path(base) / "swe"


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(pin: Source, archive: Path) -> None:
    """Raise ValueError unless `archive` has the pinned sha256."""
    got = sha256_of(archive)
    if got != pin.sha256:
        raise ValueError(f"sha256 mismatch for {pin.name}=={pin.version} ({archive.name}): expected {pin.sha256}, got {got}")


def tree(pin: Source, root: Path | None = None) -> Path:
    """The unpacked sdist of `pin`; raises MissingCache when it has not been prepared."""
    path = (root or cache_root()) / "src" / pin.stem
    marker = path / MARKER
    if not marker.is_file() or marker.read_text().strip() != pin.sha256:
        raise MissingCache(f"swe sources of {pin.name}=={pin.version} are not in the cache {path.parent.parent}; "
                           f"run `{PREPARE_COMMAND}` first")
    return path


def download(pin: Source, dest: Path) -> Path:
    """The sdist of `pin` fetched by pip into `dest` (not yet verified)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
         f"{pin.name}=={pin.version}", "-d", str(dest)], capture_output=True, text=True, check=False)
    found = sorted(p for p in dest.iterdir() if p.name.endswith((".tar.gz", ".zip")))
    if done.returncode != 0 or len(found) != 1:
        tail = (done.stderr.strip().splitlines() or ["no sdist was saved"])[-1]
        raise RuntimeError(f"pip could not download the sdist of {pin.name}=={pin.version}: {tail}")
    return found[0]


def unpack(pin: Source, archive: Path, root: Path) -> Path:
    """Unpack a verified sdist into root/src (replacing any partial tree), marking it complete last."""
    target = root / "src" / pin.stem
    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory(dir=root) as scratch, tarfile.open(archive) as tar:
        tar.extractall(scratch, filter="data")
        unpacked = Path(scratch) / pin.stem
        if not (unpacked / pin.package_dir).is_dir() or not (unpacked / pin.tests_dir).is_dir():
            raise ValueError(f"the sdist of {pin.name}=={pin.version} lacks {pin.package_dir}/ or {pin.tests_dir}/")
        target.parent.mkdir(parents=True, exist_ok=True)
        unpacked.rename(target)
    (target / MARKER).write_text(pin.sha256 + "\n")
    return target


def prepare_one(pin: Source, root: Path | None = None) -> Path:
    """Make sure `pin` is unpacked in the cache: reuse a verified archive, else download and verify it."""
    root = root or cache_root()
    try:
        return tree(pin, root)
    except MissingCache:
        pass
    sdists = root / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    kept = [p for p in sorted(sdists.glob(f"{pin.stem}.*")) if sha256_of(p) == pin.sha256]
    if kept:
        archive = kept[0]
    else:
        with tempfile.TemporaryDirectory(dir=root) as scratch:
            fetched = download(pin, Path(scratch))
            verify(pin, fetched)
            archive = sdists / fetched.name
            shutil.move(str(fetched), archive)
    return unpack(pin, archive, root)


def prepare(pins: tuple[Source, ...] = SOURCES, root: Path | None = None) -> list[Path]:
    """Prepare every pin; returns their unpacked trees."""
    return [prepare_one(pin, root) for pin in pins]


def cache_bytes(root: Path | None = None) -> int:
    """The size of the cache on disk."""
    root = root or cache_root()
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0


def workspace_files(pin: Source, root: Path | None = None) -> dict[str, str]:
    """The pristine repository an episode starts from: the package under its import name and its tests."""
    base = tree(pin, root)
    files: dict[str, str] = {}
    for folder, target in ((pin.package_dir, pin.package), (pin.tests_dir, pin.workspace_tests)):
        for path in sorted((base / folder).rglob("*")):
            relative = path.relative_to(base / folder).as_posix()
            if "__pycache__" in relative or not path.is_file() or path.stat().st_size > MAX_WORKSPACE_FILE:
                continue
            if folder == pin.tests_dir and relative in pin.drop:
                continue
            try:
                files[f"{target}/{relative}"] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue  # binary fixtures are not part of what a fix touches
    return files
