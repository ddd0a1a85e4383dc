"""Run tracking: every step's metrics to wandb (offline by default), to run_dir/metrics.jsonl, and to the console.

Metric names are grouped with slashes (`reward/<domain>/mean`, `tier/<tier>/think_tokens`, `mismatch/kl`,
`perf/tokens_per_s`); the trainer names them and the tracker passes them through unchanged. Evaluation
metrics are logged under `eval/`.

metrics.jsonl holds one JSON object per line, `{"step": s, **metrics}`; a non-finite value (or None) is
written as null (JSON has no NaN), never dropped, so a diverging run is visible in the file. When a run resumes from
the checkpoint of step s, lines with a step past s were written by the run that crashed after that
checkpoint; they are moved to metrics.rolled_back.jsonl (appended, never deleted), so metrics.jsonl reads
as one consistent run.

SFT's per-step metrics (`sft/loss`, `sft/lr`, `sft/tokens_per_s`) go to run_dir/sft_metrics.jsonl (rewritten by each
SFT, which never resumes) and a wandb run of their own, job type `sft`, in the same group as the RL run.

Each RL step's episodes are written with `datasets` to run_dir/rollouts/step-NNNNNNNN.parquet, one row per
episode in a schema fixed by ROLLOUT_FEATURES, so every shard of a run loads as one dataset
(`load_dataset("parquet", data_files="RUN/rollouts/*.parquet")`). Every `tracking.samples_every` steps wandb
gets a table of sample completions: the best and worst episodes of each domain.

A run directory that already holds a run is refused unless the command was told to resume or overwrite it
(`claim_run_dir`); overwriting deletes the old run's outputs (metrics, checkpoints, rollouts), never wandb's
folder, whose old runs stay as runs of their own.

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
import shutil
import string
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TextIO

from rich.console import Console

from jointrl.rl.config.run import RunConfig
from jointrl.rl.progress import datasets_quiet
from jointrl.rl.step_metrics import pick_samples

METRICS_FILE = "metrics.jsonl"
SFT_METRICS_FILE = "sft_metrics.jsonl"
ROLLOUTS_DIR = "rollouts"
SAMPLES_PER_DOMAIN = 2  # best and worst episodes of each domain in a wandb samples table
ROLLED_BACK_FILE = "metrics.rolled_back.jsonl"
EVAL_PREFIX = "eval/"
_ID_ALPHABET = string.ascii_lowercase + string.digits
# The console line: (label, metric names tried in order, format); a label shows when one of its names exists.
PROGRESS_FIELDS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("reward", ("reward/mean",), "{:.3f}"),
    ("pass", ("pass_rate", "pass_rate/all"), "{:.2f}"),
    # KL to the reference is what the KL term holds down; the mismatch is the rollout engine's log-probs against
    # the learner's on the same tokens (near 0 unless the two disagree).
    ("kl_ref", ("policy/kl_ref",), "{:.4f}"),
    ("mismatch", ("mismatch/kl",), "{:.1e}"),
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


def claim_run_dir(run_dir: Path, outputs: Sequence[Path], *, stage: Literal["rl", "sft"], resume: bool = False,
                  overwrite: bool = False) -> None:
    """Refuse to start over a run's outputs unless resuming (RL) or overwriting; overwriting deletes them."""
    if resume and overwrite:
        raise ValueError("--resume and --overwrite exclude each other: resume continues the run, overwrite deletes it")
    if resume and stage == "sft":
        raise ValueError("SFT does not resume: pass --overwrite to run it again")
    found = [p for p in outputs if p.exists()]
    if not found or resume:
        return
    if not overwrite:
        names = ", ".join(str(p) for p in found)
        options = ("pass --resume to continue it, or --overwrite to delete its metrics, checkpoints and rollouts and start again"
                   if stage == "rl" else "pass --overwrite to delete its checkpoint and metrics and train again")
        raise ValueError(f"{run_dir} already holds an {stage.upper()} run ({names}): {options}; "
                         "or set tracking.run_dir=DIR for a new run")
    for path in found:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


def rl_outputs(run_dir: Path, checkpoints: Path) -> list[Path]:
    """What an RL run writes: its metrics files, rollouts and checkpoint folder."""
    return [run_dir / METRICS_FILE, run_dir / ROLLED_BACK_FILE, run_dir / ROLLOUTS_DIR, checkpoints]


def rollout_features():
    """The datasets schema of a rollouts shard (one row per episode); see step_metrics.episode_rows."""
    from datasets import Features, Value

    text, integer, number, flag = Value("string"), Value("int64"), Value("float64"), Value("bool")
    call = {"id": text, "type": text, "function": {"name": text, "arguments": text}}
    message = {"role": text, "content": text, "reasoning_content": text, "tool_calls": [call], "tool_call_id": text,
               "extra": text}
    pairs = [{"name": text, "value": number}]
    return Features({
        "step": integer, "env_id": text, "domain": text, "family": text, "difficulty": text, "seed": integer,
        "tier": text, "group_id": integer, "messages": [message], "tools": text, "final_answer": text,
        "reward": number, "reward_raw": number, "reward_components": pairs, "signals": pairs, "passed": flag,
        "think_tokens": integer, "answer_tokens": integer, "think_budget": integer, "tokens": integer,
        "sampled_tokens": integer, "policy_version_min": integer, "policy_version_max": integer, "turns": integer,
        "truncated": flag, "failed": flag, "error": text,
    })


def write_rollouts(run_dir: Path, step: int, rows: list[dict]) -> Path:
    """Write a step's episode rows as run_dir/rollouts/step-NNNNNNNN.parquet (replacing a crashed run's)."""
    import datasets

    folder = Path(run_dir) / ROLLOUTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step-{step:08d}.parquet"
    tmp = folder / f".{path.name}.tmp"
    with datasets_quiet():
        datasets.Dataset.from_list(rows, features=rollout_features()).to_parquet(str(tmp))
    # Renamed into place so a crash mid-write never leaves a shard that cannot be read.
    os.replace(tmp, path)
    return path


def transcript(messages: list[dict]) -> str:
    """The turns after the task prompt as text: reasoning, answers, tool calls and tool results, one per line."""
    first_answer = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))
    lines = []
    for m in messages[first_answer:]:
        if m.get("reasoning_content"):
            lines.append(f"[think] {m['reasoning_content']}")
        for call in m.get("tool_calls") or []:
            lines.append(f"[call] {call['function']['name']}({call['function']['arguments']})")
        if m.get("content"):
            lines.append(f"[{m.get('role')}] {m['content']}")
    return "\n".join(lines)


class Tracker:
    """Logs a run's metrics to wandb, metrics.jsonl and the console (see the module docstring)."""

    def __init__(
        self,
        cfg: RunConfig,
        run_dir: str | os.PathLike[str],
        *,
        stage: Literal["rl", "sft"] = "rl",
        resume_id: str | None = None,
        resume_step: int | None = None,
        console: Console | None = None,
        env_mix: Mapping[str, float] | None = None,
    ):
        """Open the stage's metrics file and wandb run; env_mix (env id -> probability) goes into the wandb config."""
        self.cfg = cfg
        self.stage = stage
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run_id = resume_id or new_run_id()
        self.console = console if console is not None else Console(soft_wrap=True)
        self.rolled_back = roll_back(self.run_dir, resume_step) if resume_step is not None else 0
        self.metrics_path = self.run_dir / (METRICS_FILE if stage == "rl" else SFT_METRICS_FILE)
        self.wandb_location: str | None = None  # the run's URL online, its local folder offline
        # An SFT never resumes, so its file holds one SFT's steps; RL appends to the lines a resume kept.
        self._file: TextIO | None = open(self.metrics_path, "a" if stage == "rl" else "w")
        self._wandb = None
        try:
            self._init_wandb(env_mix, resumed=resume_id is not None)
        except BaseException:
            self._file.close()
            raise

    def _init_wandb(self, env_mix: Mapping[str, float] | None, resumed: bool) -> None:
        tracking = self.cfg.tracking
        if tracking.wandb_mode == "disabled":
            return
        import wandb

        config = self.cfg.model_dump(mode="json")
        config["env_mix"] = dict(env_mix) if env_mix else {e.glob: e.weight for e in self.cfg.envs.mix}
        folder = self.run_dir.resolve().name
        name = tracking.run_name or f"{folder}-{time.strftime('%Y%m%d-%H%M%S')}"
        self._wandb = wandb.init(
            project=tracking.wandb_project,
            mode=tracking.wandb_mode,
            dir=str(self.run_dir),
            id=self.run_id,
            resume="allow",
            # A resumed run keeps the name it started with unless the recipe names it.
            name=None if resumed and not tracking.run_name else name + ("-sft" if self.stage == "sft" else ""),
            group=tracking.group or folder,
            job_type=self.stage,
            tags=list(tracking.tags) or None,
            notes=tracking.notes,
            config=config,
            # The console stays the trainer's own; no git state, code copy or system-stats sampling.
            settings=wandb.Settings(
                silent=True, console="off", disable_git=True, save_code=False, x_disable_stats=True,
                x_save_requirements=False,
            ),
        )
        self.wandb_location = self._wandb.url if tracking.wandb_mode == "online" else str(Path(self._wandb.dir).parent)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Record one step's metrics everywhere, and print the progress line when tracking.console is on."""
        self._write(step, metrics)
        # SFT's progress bar shows its loss; a line per SFT step would bury it.
        if self.cfg.tracking.console and self.stage == "rl":
            self.console.print(self.progress_line(step, metrics), highlight=False)

    def log_rollouts(self, step: int, rows: list[dict]) -> Path | None:
        """Write a step's episode rows as its rollouts shard, and a wandb samples table every samples_every steps."""
        tracking = self.cfg.tracking
        path = write_rollouts(self.run_dir, step, rows) if tracking.save_rollouts and rows else None
        if self._wandb is not None and tracking.samples_every and step % tracking.samples_every == 0:
            self._wandb.log({"samples": self.samples_table(rows)}, step=int(step))
        return path

    @staticmethod
    def samples_table(rows: list[dict]):
        """A wandb.Table of the best and worst scored episodes of each domain."""
        import wandb

        table = wandb.Table(columns=["step", "domain", "pick", "reward", "passed", "env_id", "seed", "tier", "prompt",
                                     "completion"])
        for pick, row in pick_samples(rows, SAMPLES_PER_DOMAIN):
            prompt = next((m["content"] for m in row["messages"] if m["role"] == "user"), "")
            table.add_data(row["step"], row["domain"], pick, row["reward_raw"], row["passed"], row["env_id"],
                           row["seed"], row["tier"], prompt, transcript(row["messages"]))
        return table

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

    def places(self) -> list[tuple[str, str]]:
        """(what, where) of the files this run wrote: metrics, rollouts, the wandb run (and how to upload it)."""
        found = [("metrics", str(self.metrics_path))]
        rollouts = self.run_dir / ROLLOUTS_DIR
        if self.stage == "rl" and rollouts.is_dir():
            shards = len(list(rollouts.glob("step-*.parquet")))
            found.append(("rollouts", f"{rollouts} ({shards} Parquet shards, one row per episode)"))
        mode = self.cfg.tracking.wandb_mode
        if self.wandb_location is None:
            found.append(("wandb", "disabled"))
        else:
            found.append(("wandb", self.wandb_location + (" (offline; `wandb sync` on it uploads it)" if mode == "offline" else "")))
        return found

    def finish(self) -> None:
        """Close metrics.jsonl and the wandb run; calling it again does nothing."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


def print_places(console: Console, title: str, places: Sequence[tuple[str, str]]) -> None:
    """The end-of-run summary: a title line, then one `what  where` line per place."""
    console.print(title, highlight=False)
    width = max(len(what) for what, _ in places)
    for what, where in places:
        console.print(f"  {what:<{width}}  {where}", highlight=False, markup=False)
