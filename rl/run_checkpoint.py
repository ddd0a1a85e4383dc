"""Run checkpoints that are complete or absent: staged in a `.partial` folder, sealed by a marker, renamed.

Layout under the checkpoint root:

    step-00000100/            a complete checkpoint: what `write` put there, then COMPLETE last
    step-00000150.partial/    a save in progress, or the remains of one a crash interrupted

The COMPLETE marker lists every file with its size, so a checkpoint whose files were later truncated or
removed is skipped as well. A crash at any point of `save_checkpoint` leaves the previous complete
checkpoint in place and `latest_checkpoint` returning it: nothing complete is touched until the new one
has been renamed into place, and only then are the oldest ones beyond `keep_last` removed.

Inside a step folder the trainer decides the files; the layout the other commands read is `model/` (a
`save_pretrained` directory: `jointrl eval` and `jointrl export` accept the step folder for it) and
`recipe.yaml` (the resolved recipe, which `jointrl eval` uses by default).
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

MARKER = "COMPLETE"
PARTIAL_SUFFIX = ".partial"
# A complete checkpoint being replaced by a new save of the same step, removed once the new one is in place.
REPLACED_SUFFIX = ".replaced"
MODEL_DIR = "model"
RECIPE_FILE = "recipe.yaml"
_STEP_DIR = re.compile(r"^step-(\d{8,})$")


def step_dir_name(step: int) -> str:
    """The folder name of a step's checkpoint: step-00000100."""
    return f"step-{step:08d}"


def _fsync_path(path: Path) -> None:
    """Flush a file's or a folder's data (a folder's entries: renames and new names) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _files(folder: Path) -> dict[str, int]:
    """Every file under folder (relative POSIX path -> size in bytes), sorted."""
    return {p.relative_to(folder).as_posix(): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}


def _sync_tree(folder: Path) -> None:
    for path in sorted(folder.rglob("*"), reverse=True):
        if path.is_file() or path.is_dir():
            _fsync_path(path)
    _fsync_path(folder)


def save_checkpoint(root: str | os.PathLike[str], step: int, write: Callable[[Path], None], keep_last: int) -> Path:
    """Write a step's checkpoint atomically via write(folder); keep the newest keep_last; return its folder."""
    if keep_last < 1:
        raise ValueError(f"checkpoint.keep_last must be >= 1, got {keep_last}")
    if step < 0:
        raise ValueError(f"checkpoint step must be >= 0, got {step}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / step_dir_name(step)
    partial = final.with_name(final.name + PARTIAL_SUFFIX)
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir()
    try:
        write(partial)
        _sync_tree(partial)
        # The marker is written last and synced before the rename: a folder that has it is whole.
        write_json(partial / MARKER, {"step": step, "files": _files(partial)})
        _fsync_path(partial)
        if final.exists():
            replaced = final.with_name(final.name + REPLACED_SUFFIX)
            if replaced.exists():
                shutil.rmtree(replaced)
            os.replace(final, replaced)
        os.replace(partial, final)
        _fsync_path(root)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    _prune(root, keep_last)
    return final


def _prune(root: Path, keep_last: int) -> None:
    """Remove complete checkpoints beyond the newest keep_last, and leftovers of interrupted saves."""
    for path in list_checkpoints(root)[:-keep_last]:
        shutil.rmtree(path)
    for path in root.iterdir():
        if path.is_dir() and path.name.endswith((PARTIAL_SUFFIX, REPLACED_SUFFIX)):
            shutil.rmtree(path, ignore_errors=True)


def checkpoint_step(path: str | os.PathLike[str]) -> int:
    """The step of a checkpoint folder named step-NNNNNNNN."""
    match = _STEP_DIR.match(Path(path).name)
    if match is None:
        raise ValueError(f"{path}: not a checkpoint folder (expected a name like {step_dir_name(0)})")
    return int(match.group(1))


def is_complete(path: str | os.PathLike[str]) -> bool:
    """Whether a step folder holds its marker, and every file the marker lists with its size."""
    path = Path(path)
    try:
        marker = read_json(path / MARKER)
        files = marker["files"]
        if marker["step"] != checkpoint_step(path):
            return False
        return all((path / name).is_file() and (path / name).stat().st_size == size for name, size in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def list_checkpoints(root: str | os.PathLike[str]) -> list[Path]:
    """The complete checkpoints under root, oldest step first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and _STEP_DIR.match(p.name) and is_complete(p)]
    return sorted(found, key=checkpoint_step)


def latest_checkpoint(root: str | os.PathLike[str]) -> Path | None:
    """The newest complete checkpoint under root; partial or damaged ones are ignored; None when there is none."""
    found = list_checkpoints(root)
    return found[-1] if found else None


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write JSON atomically: a synced temporary file in the same folder, renamed over path."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file; a file that is not valid JSON raises ValueError naming it."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: invalid JSON: {err}") from None


def rng_state() -> dict[str, Any]:
    """The Python, NumPy, torch CPU (and CUDA) generator states, made of tuples, ints, floats and tensors.

    Only types `torch.load(..., weights_only=True)` accepts, so a checkpoint's RNG file loads without
    unpickling arbitrary objects.
    """
    algorithm, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "algorithm": str(algorithm), "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
            "has_gauss": int(has_gauss), "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what rng_state() returned; CUDA states are restored when saved and CUDA is present."""
    version, internal, gauss = state["python"]
    # A torch.load round trip may turn the inner tuple into a list; random.setstate wants tuples.
    random.setstate((version, tuple(internal), gauss))
    numpy_state = state["numpy"]
    np.random.set_state((
        numpy_state["algorithm"], numpy_state["keys"].numpy().astype(np.uint32), numpy_state["pos"],
        numpy_state["has_gauss"], numpy_state["cached_gaussian"],
    ))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def model_dir(path: str | os.PathLike[str]) -> Path:
    """The model directory behind a path: itself (a save_pretrained folder), its `model/`, or the newest
    complete checkpoint's `model/` when path is a checkpoint root."""
    path = Path(path)
    if (path / "config.json").is_file():
        return path
    if (path / MODEL_DIR / "config.json").is_file():
        return path / MODEL_DIR
    latest = latest_checkpoint(path)
    if latest is not None and (latest / MODEL_DIR / "config.json").is_file():
        return latest / MODEL_DIR
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    raise ValueError(
        f"{path} is not a checkpoint: expected config.json (a model directory), {MODEL_DIR}/config.json "
        f"(a run checkpoint) or complete step-* checkpoints"
    )


def stored_recipe(path: str | os.PathLike[str]) -> Path | None:
    """The recipe.yaml stored with a checkpoint: in the folder given, in its model directory, or in the run
    checkpoint a `model/` directory belongs to."""
    path = Path(path)
    model = model_dir(path)
    candidates = [path / RECIPE_FILE, model / RECIPE_FILE]
    if model.name == MODEL_DIR:
        candidates.append(model.parent / RECIPE_FILE)
    return next((c for c in candidates if c.is_file()), None)
