"""The real `jointrl sft` and `jointrl train` on a run directory: refuse a second run, --overwrite, --resume,
rollouts shards, SFT metrics, plain progress lines and the final summary (captured output is not a terminal)."""
import json

import datasets
import pytest

from jointrl.rl.commands.cli import main

TINY = [
    "model.preset=debug", "tokenizer.n_samples=200", "rollout.workers=1", "rollout.group_size=2", "rollout.max_rows=8",
    "rollout.max_turns=1", "rollout.max_new_tokens_per_turn=16", "rollout.max_new_tokens_per_episode=16",
    "rollout.tiers.low=8", "rollout.tier_selection.mode=fixed", "rollout.tier_selection.fixed={'*': low}",
    "learner.ranks=1", "learner.ep_size=1", "learner.micro_batch_tokens=1024",
    "trainer.steps=2", "trainer.prompts_per_step=2", "trainer.sft.max_len=256", "trainer.sft.batch_size=2",
    "tracking.wandb_mode=disabled", "checkpoint.every=1", "checkpoint.keep_last=3",
]
EPISODES_PER_STEP = 2 * 2  # prompts_per_step x group_size
# A conversation file in the format of the quickstart's arithmetic tasks, the SFT's only data here.
CHATS = [{"messages": [{"role": "user", "content": f"What is {a} + {b}?"}, {"role": "assistant", "content": str(a + b)}]}
         for a in range(3) for b in range(2)]


def steps_in(path) -> list[int]:
    return [json.loads(line)["step"] for line in path.read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sft_then_train_refuse_a_second_run_and_overwrite_and_resume(tmp_path, capsys):
    run_dir = tmp_path / "run"
    data = tmp_path / "chats.parquet"
    datasets.Dataset.from_list(CHATS).to_parquet(str(data))
    sft = ["sft", "ep2_cpu", *TINY, f"tracking.run_dir={run_dir}", "trainer.sft.demos_per_env=0",
           f"trainer.sft.jsonl=[{data}]"]

    assert main(sft) == 0
    out = capsys.readouterr().out
    sft_lines = [json.loads(line) for line in (run_dir / "sft_metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in sft_lines] == [1, 2, 3]  # 6 conversations, batches of 2, one epoch
    assert all(m["sft/loss"] > 0 and m["sft/lr"] > 0 and m["sft/tokens_per_s"] > 0 for m in sft_lines)
    assert "SFT 1/3 (33%)" in out and "SFT 3/3 (100%)" in out and "ETA" in out
    assert "SFT finished:" in out and str(run_dir / "checkpoints" / "sft") in out

    assert main(sft) == 1
    err = capsys.readouterr().err
    assert "already holds an SFT run" in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    assert main([*sft, "--overwrite"]) == 0
    assert steps_in(run_dir / "sft_metrics.jsonl") == [1, 2, 3]
    capsys.readouterr()

    train = ["train", "ep2_cpu", *TINY, f"tracking.run_dir={run_dir}"]
    assert main(train) == 0
    out = capsys.readouterr().out
    assert steps_in(run_dir / "metrics.jsonl") == [1, 2]
    assert "RL 1/2 (50%)" in out and "RL 2/2 (100%)" in out
    for place in ("RL finished at step 2:", "checkpoints", "metrics", "rollouts", "wandb"):
        assert place in out
    rows = datasets.load_dataset("parquet", data_files=str(run_dir / "rollouts" / "*.parquet"), split="train",
                                 cache_dir=str(tmp_path / "hf"))
    assert rows.num_rows == 2 * EPISODES_PER_STEP
    assert sorted(rows["step"]) == [1] * EPISODES_PER_STEP + [2] * EPISODES_PER_STEP
    assert set(rows["domain"]) <= {"reasoning"} and set(rows["tier"]) == {"low"}
    for row in rows:
        assert row["messages"][0]["role"] in ("system", "user") and row["messages"][-1]["role"] == "assistant"
        assert [c["name"] for c in row["reward_components"]] == ["correctness"] and row["reward_raw"] is not None
        assert any(s["name"] == "success" for s in row["signals"])
        # Synchronous mode: step s is played by the weights of version s - 1.
        assert row["sampled_tokens"] == 0 or row["policy_version_max"] == row["step"] - 1

    assert main(train) == 1
    err = capsys.readouterr().err
    assert "already holds an RL run" in err and "--resume" in err and "--overwrite" in err
    assert steps_in(run_dir / "metrics.jsonl") == [1, 2]

    assert main([*train, "--overwrite"]) == 0
    assert steps_in(run_dir / "metrics.jsonl") == [1, 2]
    assert sorted(p.name for p in (run_dir / "rollouts").iterdir()) == ["step-00000001.parquet", "step-00000002.parquet"]

    assert main([*train, "trainer.steps=3", "--resume"]) == 0
    out = capsys.readouterr().out
    assert "resumed from" in out and "RL 3/3 (100%)" in out and "RL 1/3" not in out
    assert steps_in(run_dir / "metrics.jsonl") == [1, 2, 3]
    assert len(list((run_dir / "rollouts").glob("step-*.parquet"))) == 3
