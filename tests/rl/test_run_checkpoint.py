"""Run checkpoints: complete-or-absent saves (exception and SIGKILL mid-save), keep_last, JSON and RNG round trips."""
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from jointrl.rl.run_checkpoint import (
    MARKER, latest_checkpoint, list_checkpoints, model_dir, read_json, rng_state, save_checkpoint, set_rng_state,
    write_json,
)


def _writer(text):
    def write(folder: Path) -> None:
        (folder / "state.txt").write_text(text)
        (folder / "sub").mkdir()
        (folder / "sub" / "weights.bin").write_bytes(text.encode() * 10)

    return write


def test_save_latest_and_keep_last(tmp_path):
    assert latest_checkpoint(tmp_path / "missing") is None
    for step in (10, 20, 30, 40):
        path = save_checkpoint(tmp_path, step, _writer(f"s{step}"), keep_last=2)
        assert path == tmp_path / f"step-{step:08d}"
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000030", "step-00000040"]
    latest = latest_checkpoint(tmp_path)
    assert (latest / "state.txt").read_text() == "s40"
    assert (latest / "sub" / "weights.bin").read_bytes() == b"s40" * 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000030", "step-00000040"]


def test_a_save_of_the_same_step_replaces_it(tmp_path):
    save_checkpoint(tmp_path, 5, _writer("old"), keep_last=3)
    save_checkpoint(tmp_path, 5, _writer("new"), keep_last=3)
    assert (latest_checkpoint(tmp_path) / "state.txt").read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["step-00000005"]


def test_a_write_that_raises_leaves_the_previous_checkpoint_latest(tmp_path):
    save_checkpoint(tmp_path, 1, _writer("good"), keep_last=3)

    def crash(folder: Path) -> None:
        (folder / "state.txt").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        save_checkpoint(tmp_path, 2, crash, keep_last=3)
    assert latest_checkpoint(tmp_path) == tmp_path / "step-00000001"
    assert not (tmp_path / "step-00000002").exists()
    assert not (tmp_path / "step-00000002.partial" / MARKER).exists()


def test_damaged_or_unsealed_folders_are_ignored(tmp_path):
    save_checkpoint(tmp_path, 1, _writer("one"), keep_last=5)
    save_checkpoint(tmp_path, 2, _writer("two"), keep_last=5)
    save_checkpoint(tmp_path, 3, _writer("three"), keep_last=5)
    # Step 3 loses a byte after the save; step 4 was copied in without a marker.
    (tmp_path / "step-00000003" / "state.txt").write_text("thre")
    (tmp_path / "step-00000004").mkdir()
    (tmp_path / "step-00000004" / "state.txt").write_text("four")
    assert latest_checkpoint(tmp_path) == tmp_path / "step-00000002"
    (tmp_path / "step-00000002" / MARKER).write_text("{not json")
    assert latest_checkpoint(tmp_path) == tmp_path / "step-00000001"


SAVER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from jointrl.rl.run_checkpoint import save_checkpoint

    def write(folder: Path) -> None:
        (folder / "a.bin").write_bytes(b"a" * 1000)
        (folder / "started").write_text("")
        print("half written", flush=True)
        time.sleep(60)
        (folder / "b.bin").write_bytes(b"b" * 1000)

    save_checkpoint(Path(sys.argv[1]), 2, write, keep_last=3)
""")


def test_sigkill_in_the_middle_of_a_save_leaves_the_previous_checkpoint(tmp_path):
    save_checkpoint(tmp_path, 1, _writer("before"), keep_last=3)
    proc = subprocess.Popen([sys.executable, "-c", SAVER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "half written"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    partial = tmp_path / "step-00000002.partial"
    assert (partial / "a.bin").is_file() and not (partial / MARKER).exists()
    assert latest_checkpoint(tmp_path) == tmp_path / "step-00000001"
    # The next save clears what the killed one left.
    save_checkpoint(tmp_path, 3, _writer("after"), keep_last=3)
    assert not partial.exists()
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000001", "step-00000003"]


def test_json_round_trip_and_bad_json(tmp_path):
    obj = {"step": 3, "nested": {"a": [1, 2.5, None, "x"]}}
    write_json(tmp_path / "s.json", obj)
    assert read_json(tmp_path / "s.json") == obj
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no temporary left behind
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="bad.json"):
        read_json(tmp_path / "bad.json")


def _draws():
    return [random.random() for _ in range(3)], np.random.standard_normal(3).tolist(), torch.rand(3).tolist()


def test_rng_state_reproduces_the_next_numbers_of_every_generator(tmp_path):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    np.random.standard_normal(1)  # leaves a cached gaussian in NumPy's state
    torch.save(rng_state(), tmp_path / "rng.pt")
    expected = _draws()
    random.seed(9)
    np.random.seed(9)
    torch.manual_seed(9)
    assert _draws() != expected
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert _draws() == expected


def test_model_dir_accepts_a_model_a_run_checkpoint_or_a_root(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    assert model_dir(model) == model

    def write(folder: Path) -> None:
        (folder / "model").mkdir()
        (folder / "model" / "config.json").write_text("{}")

    step = save_checkpoint(tmp_path / "ckpts", 7, write, keep_last=1)
    assert model_dir(step) == step / "model"
    assert model_dir(tmp_path / "ckpts") == step / "model"
    with pytest.raises(ValueError, match="not a checkpoint"):
        model_dir(tmp_path)
    with pytest.raises(FileNotFoundError):
        model_dir(tmp_path / "nope")
