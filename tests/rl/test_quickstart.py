"""Smoke test: the real quickstart command on the shipped recipe, shrunk by overrides."""
import json
from pathlib import Path

from jointrl.model.checkpoint import from_pretrained
from jointrl.model.tokenizer import JointTokenizer
from jointrl.rl.cli import main


def test_quickstart_runs_every_stage_and_leaves_a_loadable_checkpoint(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = main([
        "quickstart", "quickstart", "model.preset=debug", "tokenizer.n_samples=50", "trainer.sft.epochs=1",
        "trainer.sft.batch_size=4", "rollout.tiers.low=12", f"tracking.run_dir={run_dir}",
        "--conversations", "8", "--max-len", "48",
    ])
    out = capsys.readouterr().out
    assert code == 0, out
    for stage in ("tokenizer", "model", "supervised cold start", "checkpoint", "sample"):
        assert stage in out
    ckpt = Path(run_dir) / "checkpoints" / "sft"
    model = from_pretrained(ckpt)
    tokenizer = JointTokenizer.load(ckpt)
    assert model.cfg.name == "debug" and tokenizer.vocab_size == model.cfg.vocab_size == 512
    # The sampled reply is printed as the parsed message's JSON, which always has the assistant role.
    assert json.loads(out[out.index("{"):])["role"] == "assistant"
