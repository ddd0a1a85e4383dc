"""Run tracking: every step's metrics to wandb (offline by default), to run_dir/metrics.jsonl, and to the console.

Metric names are grouped with slashes (`reward/<domain>/mean`, `tier/<tier>/think_tokens`, `mismatch/kl`,
`perf/tokens_per_s`); the trainer names them and the tracker passes them through unchanged. Evaluation
metrics are logged under `eval/`.

metrics.jsonl holds one JSON object per line, `{"step": s, **metrics}`; a non-finite value (or None) is
written as null (JSON has no NaN), never dropped, so a diverging run is visible in the file. When a run resumes from
the checkpoint of step s, lines with a step past s were written by the run that crashed after that
checkpoint; they are moved to metrics.rolled_back.jsonl (appended, never deleted), so metrics.jsonl reads
as one consistent run.

wandb: `tracking.wandb_mode` offline (the default) writes under run_dir/wandb and never touches the network
(`wandb sync` uploads it later); disabled does not import wandb at all. On resume the saved run id is
passed with resume="allow"; wandb may warn about, or drop, points of steps it already recorded before the
crash (the rolled-back steps the resumed run logs again), which the JSONL keeps exactly once.
"""
from __future__ import annotations

import json
import math
import os
import secrets
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console

from jointrl.rl.config import RunConfig

METRICS_FILE = "metrics.jsonl"
ROLLED_BACK_FILE = "metrics.rolled_back.jsonl"
EVAL_PREFIX = "eval/"
_ID_ALPHABET = string.ascii_lowercase + string.digits
# The console line: (label, metric names tried in order, format); a label shows when one of its names exists.
PROGRESS_FIELDS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("reward", ("reward/mean",), "{:.3f}"),
    ("pass", ("pass_rate", "pass_rate/all"), "{:.2f}"),
    ("kl", ("mismatch/kl",), "{:.2e}"),
    ("loss", ("loss", "loss/total"), "{:.4f}"),
    ("s/step", ("perf/step_s",), "{:.1f}"),
    ("tok/s", ("perf/tokens_per_s",), "{:,.0f}"),
)


def new_run_id() -> str:
    """A random 8-character run id of the kind wandb generates."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(8))


def _json_value(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _step_of(line: str) -> int | None:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    step = record.get("step") if isinstance(record, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def roll_back(run_dir: Path, resume_step: int) -> int:
    """Move metrics.jsonl lines past resume_step (and unreadable ones) to metrics.rolled_back.jsonl; return how many."""
    path = run_dir / METRICS_FILE
    if not path.is_file():
        return 0
    keep, moved = [], []
    for line in path.read_text().splitlines(keepends=True):
        if not line.strip():
            continue
        step = _step_of(line)
        line = line if line.endswith("\n") else line + "\n"
        # A line cut short by the crash cannot be read; it belongs to the rolled-back part too.
        (keep if step is not None and step <= resume_step else moved).append(line)
    if not moved:
        return 0
    with open(run_dir / ROLLED_BACK_FILE, "a") as f:
        f.writelines(moved)
        f.flush()
        os.fsync(f.fileno())
    tmp = path.with_name(f".{METRICS_FILE}.tmp")
    with open(tmp, "w") as f:
        f.writelines(keep)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return len(moved)


class Tracker:
    """Logs a run's metrics to wandb, metrics.jsonl and the console (see the module docstring)."""

    def __init__(
        self,
        cfg: RunConfig,
        run_dir: str | os.PathLike[str],
        *,
        resume_id: str | None = None,
        resume_step: int | None = None,
        console: Console | None = None,
        env_mix: Mapping[str, float] | None = None,
    ):
        """Open the run's files and wandb run; env_mix (env id -> probability) is stored in the wandb config."""
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run_id = resume_id or new_run_id()
        self.console = console if console is not None else Console(soft_wrap=True)
        self.rolled_back = roll_back(self.run_dir, resume_step) if resume_step is not None else 0
        self._file: TextIO | None = open(self.run_dir / METRICS_FILE, "a")
        self._wandb = None
        try:
            self._init_wandb(env_mix)
        except BaseException:
            self._file.close()
            raise

    def _init_wandb(self, env_mix: Mapping[str, float] | None) -> None:
        tracking = self.cfg.tracking
        if tracking.wandb_mode == "disabled":
            return
        import wandb

        config = self.cfg.model_dump(mode="json")
        config["env_mix"] = dict(env_mix) if env_mix else {e.glob: e.weight for e in self.cfg.envs.mix}
        self._wandb = wandb.init(
            project=tracking.wandb_project,
            mode=tracking.wandb_mode,
            dir=str(self.run_dir),
            id=self.run_id,
            resume="allow",
            config=config,
            # The console stays the trainer's own; no git state, code copy or system-stats sampling.
            settings=wandb.Settings(
                silent=True, console="off", disable_git=True, save_code=False, x_disable_stats=True,
                x_save_requirements=False,
            ),
        )

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Record one step's metrics everywhere, and print the progress line when tracking.console is on."""
        self._write(step, metrics)
        if self.cfg.tracking.console:
            self.console.print(self.progress_line(step, metrics), highlight=False)

    def log_eval(self, step: int, summary_metrics: Mapping[str, float]) -> None:
        """Record an evaluation's metrics under eval/ names."""
        named = {k if k.startswith(EVAL_PREFIX) else EVAL_PREFIX + k: v for k, v in summary_metrics.items()}
        self._write(step, named)
        if self.cfg.tracking.console:
            shown = {k.removeprefix(EVAL_PREFIX): v for k, v in named.items()}
            self.console.print(f"eval @ step {step}: " + self._fields(shown), highlight=False)

    def progress_line(self, step: int, metrics: Mapping[str, float]) -> str:
        """`step 12/100 | reward 0.412 | pass 0.38 | ...` with whichever summary metrics are present."""
        head = f"step {step}/{self.cfg.trainer.steps}"
        fields = self._fields(metrics)
        return f"{head} | {fields}" if fields else head

    @staticmethod
    def _fields(metrics: Mapping[str, float]) -> str:
        parts = []
        for label, names, fmt in PROGRESS_FIELDS:
            name = next((n for n in names if n in metrics), None)
            if name is not None:
                value = float(metrics[name])
                parts.append(f"{label} {fmt.format(value) if math.isfinite(value) else value}")
        return " | ".join(parts)

    def _write(self, step: int, metrics: Mapping[str, float]) -> None:
        if self._file is None:
            raise ValueError("the tracker is finished; it logs nothing more")
        if "step" in metrics:
            raise ValueError("'step' is the line's own key and cannot be a metric name")
        record = {"step": int(step), **{name: _json_value(value) for name, value in metrics.items()}}
        self._file.write(json.dumps(record, allow_nan=False) + "\n")
        self._file.flush()
        if self._wandb is not None:
            self._wandb.log({k: float(v) for k, v in metrics.items() if v is not None}, step=int(step))

    def finish(self) -> None:
        """Close metrics.jsonl and the wandb run; calling it again does nothing."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None
