"""Smoke test: the real quickstart and sft commands on the shipped recipe, shrunk by overrides."""
from pathlib import Path

import pytest

from jointrl.model.checkpoint import from_pretrained
from jointrl.model.tokenizer import JointTokenizer
from jointrl.rl.cli import main
from jointrl.rl.evaluate import evaluate
from jointrl.rl.recipe import load_recipe

SHRINK = [
    "model.preset=debug", "tokenizer.n_samples=50", "trainer.sft.epochs=1", "trainer.sft.batch_size=4",
    "trainer.sft.demos_per_env=1", "trainer.sft.max_len=160", "rollout.max_turns=2",
    "rollout.max_new_tokens_per_turn=8", "rollout.max_new_tokens_per_episode=16",
]


def test_quickstart_runs_every_stage_and_leaves_a_loadable_checkpoint(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = main(["quickstart", "quickstart", *SHRINK, f"tracking.run_dir={run_dir}", "--eval-seeds", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "5 demonstrations from 5 environments" in out
    for stage in ("supervised cold start", "held-out evaluation", "pass rate", "all"):
        assert stage in out
    ckpt = Path(run_dir) / "checkpoints" / "sft"
    model = from_pretrained(ckpt)
    tokenizer = JointTokenizer.load(ckpt)
    assert model.cfg.name == "debug" and tokenizer.vocab_size == model.cfg.vocab_size == 512


def test_sft_command_writes_the_checkpoint_where_the_recipe_says(tmp_path, capsys):
    ckpt_dir = tmp_path / "ckpts"
    assert main(["sft", "quickstart", *SHRINK, f"checkpoint.dir={ckpt_dir}"]) == 0
    assert (ckpt_dir / "sft" / "model.safetensors").is_file()
    assert "loss" in capsys.readouterr().out


def test_evaluation_refuses_training_seeds(tmp_path):
    cfg = load_recipe("quickstart", SHRINK)
    with pytest.raises(ValueError, match="outside the held-out range"):
        evaluate(None, None, cfg, ["browse/lookup-v0:easy"], [cfg.envs.train_seeds.start])
