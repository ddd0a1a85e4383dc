"""Run files: refusing an existing run dir, rollouts shards with datasets, sample picks, SFT metrics, wandb names."""
import json

import datasets
import pytest
import torch

from jointrl.envs.episode import Episode
from jointrl.rl.config.run import RunConfig
from jointrl.rl.step_metrics import episode_rows, pick_samples
from jointrl.rl.tracking import (
    METRICS_FILE, SFT_METRICS_FILE, Tracker, claim_run_dir, rl_outputs, transcript, write_rollouts,
)
from jointrl.rl.trajectory import Trajectory

MESSAGES = [
    {"role": "user", "content": "How many lines?"},
    {"role": "assistant", "content": None, "reasoning_content": "count them",
     "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "shell", "arguments": {"cmd": "wc -l f"}}}],
     "parse_errors": [{"kind": "trailing_text", "detail": "x"}]},
    {"role": "tool", "content": "3 f", "tool_call_id": "c0"},
    {"role": "assistant", "content": "3"},
]


def _cfg(**tracking):
    return RunConfig(model={"preset": "debug"}, tracking={"wandb_mode": "disabled", "console": False, **tracking})


def _trajectory(domain, seed, success, reward, versions=(3, 4)):
    episode = Episode(env_id=f"{domain}/x-v0:easy", domain=domain, family="x", difficulty="easy", seed=seed, tier="low",
                      group_id=seed // 2, messages=MESSAGES, signals={"success": success, "tool_errors": 0.0},
                      think_tokens=2, answer_tokens=5, think_budget=32, turns=2)
    n = 6
    mask = torch.tensor([0.0] * (n - len(versions)) + [1.0] * len(versions))
    version = torch.tensor([-1] * (n - len(versions)) + list(versions))
    t = Trajectory(episode, torch.arange(n), mask, torch.zeros(n), version)
    t.reward, t.rewards = reward, {"correctness": success}
    return t


# --- the run directory -------------------------------------------------------------------------------------


def test_an_rl_run_dir_with_outputs_is_refused_naming_both_flags(tmp_path):
    (tmp_path / METRICS_FILE).write_text('{"step": 1}\n')
    outputs = rl_outputs(tmp_path, tmp_path / "checkpoints" / "rl")
    with pytest.raises(ValueError) as err:
        claim_run_dir(tmp_path, outputs, stage="rl")
    message = str(err.value)
    assert "\n" not in message and "already holds an RL run" in message and METRICS_FILE in message
    assert "--resume" in message and "--overwrite" in message and "tracking.run_dir" in message
    claim_run_dir(tmp_path, outputs, stage="rl", resume=True)  # resuming keeps everything
    assert (tmp_path / METRICS_FILE).is_file()


def test_overwrite_deletes_only_the_stage_outputs(tmp_path):
    ckpt = tmp_path / "checkpoints"
    (ckpt / "rl" / "step-00000002").mkdir(parents=True)
    (ckpt / "sft").mkdir()
    (tmp_path / "rollouts").mkdir()
    (tmp_path / "rollouts" / "step-00000001.parquet").write_bytes(b"x")
    (tmp_path / METRICS_FILE).write_text('{"step": 1}\n')
    (tmp_path / SFT_METRICS_FILE).write_text('{"step": 1}\n')
    claim_run_dir(tmp_path, rl_outputs(tmp_path, ckpt / "rl"), stage="rl", overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints", SFT_METRICS_FILE]
    assert [p.name for p in ckpt.iterdir()] == ["sft"]


def test_sft_offers_only_overwrite_and_flags_exclude_each_other(tmp_path):
    (tmp_path / "sft").mkdir()
    with pytest.raises(ValueError, match="already holds an SFT run .*pass --overwrite") as err:
        claim_run_dir(tmp_path, [tmp_path / "sft"], stage="sft")
    assert "--resume" not in str(err.value)
    with pytest.raises(ValueError, match="SFT does not resume"):
        claim_run_dir(tmp_path, [tmp_path / "sft"], stage="sft", resume=True)
    with pytest.raises(ValueError, match="exclude each other"):
        claim_run_dir(tmp_path, [], stage="rl", resume=True, overwrite=True)
    claim_run_dir(tmp_path / "fresh", [tmp_path / "fresh" / "sft"], stage="sft")  # nothing there: no complaint


# --- rollouts as data --------------------------------------------------------------------------------------


def test_rollouts_shard_loads_with_datasets_one_row_per_episode(tmp_path):
    batch = [_trajectory("reasoning", 0, 1.0, 0.7), _trajectory("terminal", 1, 0.0, -0.7, versions=())]
    path = write_rollouts(tmp_path, 3, episode_rows(3, batch, [1.0, None]))
    assert path == tmp_path / "rollouts" / "step-00000003.parquet"
    rows = datasets.load_dataset("parquet", data_files=str(tmp_path / "rollouts" / "*.parquet"), split="train",
                                 cache_dir=str(tmp_path / "cache"))
    assert rows.num_rows == 2
    first, second = rows[0], rows[1]
    assert (first["step"], first["env_id"], first["domain"], first["seed"], first["tier"]) == (3, "reasoning/x-v0:easy",
                                                                                            "reasoning", 0, "low")
    assert (first["reward"], first["reward_raw"], second["reward_raw"]) == (0.7, 1.0, None)
    assert first["reward_components"] == [{"name": "correctness", "value": 1.0}]
    assert first["signals"] == [{"name": "success", "value": 1.0}, {"name": "tool_errors", "value": 0.0}]
    assert (first["passed"], second["passed"]) == (True, False)
    assert (first["tokens"], first["sampled_tokens"], first["think_tokens"], first["answer_tokens"]) == (6, 2, 2, 5)
    assert (first["policy_version_min"], first["policy_version_max"]) == (3, 4)
    assert (second["sampled_tokens"], second["policy_version_min"]) == (0, None)
    call = first["messages"][1]["tool_calls"][0]
    # Arguments given as an object are stored as the JSON text the format specifies; unknown keys go to extra.
    assert json.loads(call["function"]["arguments"]) == {"cmd": "wc -l f"}
    assert json.loads(first["messages"][1]["extra"]) == {"parse_errors": [{"kind": "trailing_text", "detail": "x"}]}
    assert [m["role"] for m in first["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert first["messages"][2]["tool_call_id"] == "c0" and first["messages"][3]["content"] == "3"


def test_sample_picks_are_the_best_and_worst_scored_of_each_domain():
    rows = [{"domain": d, "reward_raw": r, "id": i} for i, (d, r) in enumerate(
        [("a", 0.1), ("a", 0.9), ("a", 0.5), ("a", 0.3), ("a", 0.7), ("a", None), ("b", 1.0), ("b", 0.0)])]
    picked = [(pick, row["id"]) for pick, row in pick_samples(rows, 2)]
    assert picked == [("best", 1), ("best", 4), ("worst", 0), ("worst", 3), ("best", 6), ("best", 7)]


def test_transcript_starts_at_the_first_answer():
    assert transcript(MESSAGES).splitlines() == [
        "[think] count them", "[call] shell({'cmd': 'wc -l f'})", "[tool] 3 f", "[assistant] 3"]


# --- SFT metrics and wandb names ---------------------------------------------------------------------------


def test_sft_metrics_file_holds_one_sft_run(tmp_path):
    for losses in ([3.0, 2.0, 1.5], [2.5, 2.0]):
        tracker = Tracker(_cfg(), tmp_path, stage="sft")
        for step, loss in enumerate(losses, start=1):
            tracker.log(step, {"sft/loss": loss, "sft/lr": 1e-3, "sft/tokens_per_s": 100.0})
        tracker.finish()
    lines = [json.loads(line) for line in (tmp_path / SFT_METRICS_FILE).read_text().splitlines()]
    assert [(m["step"], m["sft/loss"]) for m in lines] == [(1, 2.5), (2, 2.0)]
    assert not (tmp_path / METRICS_FILE).exists()


def test_offline_wandb_runs_take_name_group_tags_notes_and_a_samples_table(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    cfg = _cfg(wandb_mode="offline", run_name="probe", tags=["cpu", "t"], notes="a note", samples_every=2)
    tracker = Tracker(cfg, tmp_path / "run")
    run = tracker._wandb
    assert (run.name, run.group, tuple(run.tags), run.notes, run.job_type) == ("probe", "run", ("cpu", "t"), "a note", "rl")
    rows = episode_rows(2, [_trajectory("reasoning", 0, 1.0, 0.5)], [1.0])
    tracker.log_rollouts(1, rows)
    tracker.log_rollouts(2, rows)
    tracker.finish()
    tables = list((tmp_path / "run" / "wandb").rglob("samples_*.table.json"))
    assert len(tables) == 1  # step 2 only
    data = json.loads(tables[0].read_text())
    assert data["columns"][:3] == ["step", "domain", "pick"] and data["data"][0][:3] == [2, "reasoning", "best"]
    where = dict(tracker.places())
    assert where["wandb"].startswith(str(tmp_path / "run" / "wandb" / "offline-run-")) and "wandb sync" in where["wandb"]
    assert "2 Parquet shards" in where["rollouts"]

    sft = Tracker(_cfg(wandb_mode="offline", group="g"), tmp_path / "run", stage="sft")
    assert sft._wandb.name.startswith("run-") and sft._wandb.name.endswith("-sft") and sft._wandb.group == "g"
    assert sft._wandb.job_type == "sft"
    sft.finish()
