"""The tracker: metrics.jsonl content (NaN as null), roll-back on resume, offline wandb files, disabled mode."""
import io
import json
import math

import pytest
from rich.console import Console

from jointrl.rl.config.run import RunConfig
from jointrl.rl.tracking import METRICS_FILE, ROLLED_BACK_FILE, Tracker


def _cfg(mode="disabled", console=False, steps=100):
    return RunConfig(
        model={"preset": "debug"},
        tracking={"wandb_mode": mode, "console": console, "wandb_project": "jointrl-test"},
        trainer={"steps": steps},
    )


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_log_appends_one_json_line_with_nan_as_null(tmp_path):
    tracker = Tracker(_cfg(), tmp_path)
    tracker.log(1, {"reward/mean": 0.5, "mismatch/kl": float("nan")})
    tracker.log(2, {"reward/mean": 0.75, "perf/tokens_per_s": float("inf")})
    tracker.log_eval(2, {"pass_rate/all": 0.25, "eval/reward/swe": 1.0})
    # Flushed per line: readable before finish().
    assert _lines(tmp_path / METRICS_FILE) == [
        {"step": 1, "reward/mean": 0.5, "mismatch/kl": None},
        {"step": 2, "reward/mean": 0.75, "perf/tokens_per_s": None},
        {"step": 2, "eval/pass_rate/all": 0.25, "eval/reward/swe": 1.0},
    ]
    tracker.finish()
    tracker.finish()
    with pytest.raises(ValueError, match="finished"):
        tracker.log(3, {"loss": 1.0})


def test_console_line_shows_the_summary_metrics_that_exist(tmp_path):
    out = io.StringIO()
    tracker = Tracker(_cfg(console=True, steps=20), tmp_path, console=Console(file=out, width=200))
    tracker.log(3, {"reward/mean": 0.4123, "loss": 0.5, "perf/tokens_per_s": 12345.6, "other": 1.0})
    tracker.finish()
    assert out.getvalue().strip() == "step 3/20 | reward 0.412 | loss 0.5000 | tok/s 12,346"


def test_console_line_names_the_reference_kl_apart_from_the_engine_mismatch(tmp_path):
    # The KL term's drift and the rollout-vs-learner mismatch differ by orders of magnitude; one label hid the first.
    out = io.StringIO()
    tracker = Tracker(_cfg(console=True, steps=20), tmp_path, console=Console(file=out, width=200))
    tracker.log(4, {"policy/kl_ref": 0.01234, "mismatch/kl": -2.0e-9, "loss": 0.25})
    tracker.finish()
    assert out.getvalue().strip() == "step 4/20 | kl_ref 0.0123 | mismatch -2.0e-09 | loss 0.2500"


def test_resume_moves_lines_past_the_checkpoint_to_the_rolled_back_file(tmp_path):
    first = Tracker(_cfg(), tmp_path)
    for step in range(1, 6):
        first.log(step, {"loss": float(step)})
    first.finish()
    # The crashed run also left half a line behind.
    with open(tmp_path / METRICS_FILE, "a") as f:
        f.write('{"step": 6, "lo')

    resumed = Tracker(_cfg(), tmp_path, resume_id=first.run_id, resume_step=3)
    assert resumed.run_id == first.run_id
    assert resumed.rolled_back == 3
    resumed.log(4, {"loss": 40.0})
    resumed.finish()
    assert [r["step"] for r in _lines(tmp_path / METRICS_FILE)] == [1, 2, 3, 4]
    assert _lines(tmp_path / METRICS_FILE)[-1]["loss"] == 40.0
    rolled = (tmp_path / ROLLED_BACK_FILE).read_text().splitlines()
    assert [json.loads(x)["step"] for x in rolled[:2]] == [4, 5] and rolled[2] == '{"step": 6, "lo'

    # A second resume appends to the rolled-back file instead of replacing it.
    again = Tracker(_cfg(), tmp_path, resume_id=first.run_id, resume_step=2)
    again.finish()
    assert len((tmp_path / ROLLED_BACK_FILE).read_text().splitlines()) == 5
    assert [r["step"] for r in _lines(tmp_path / METRICS_FILE)] == [1, 2]


def test_offline_wandb_writes_a_local_run_and_disabled_writes_none(tmp_path, monkeypatch):
    # No network: wandb must not need an API key or a server in offline mode.
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    offline = tmp_path / "offline"
    tracker = Tracker(_cfg(mode="offline"), offline)
    tracker.log(1, {"reward/mean": 1.0, "mismatch/kl": math.nan})
    tracker.finish()
    runs = list((offline / "wandb").glob(f"offline-run-*-{tracker.run_id}"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))

    disabled = tmp_path / "disabled"
    Tracker(_cfg(mode="disabled"), disabled).finish()
    assert not (disabled / "wandb").exists()
    assert (disabled / METRICS_FILE).is_file()


def test_step_cannot_be_a_metric_name(tmp_path):
    tracker = Tracker(_cfg(), tmp_path)
    with pytest.raises(ValueError, match="'step'"):
        tracker.log(1, {"step": 1.0})
    tracker.finish()
