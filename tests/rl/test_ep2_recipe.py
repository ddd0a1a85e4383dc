"""The shipped ep2_cpu recipe end to end: cold start, then RL steps with 2 expert-parallel learner ranks and 2 workers."""
import json

import pytest

from jointrl.model.checkpoint import from_pretrained
from jointrl.rl.cli import main
from jointrl.rl.recipe import load_recipe


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ep2_cpu_recipe_trains_with_two_expert_parallel_ranks_and_two_workers(tmp_path):
    run = [f"tracking.run_dir={tmp_path}", "trainer.steps=2", "checkpoint.every=2", "tracking.wandb_mode=disabled"]
    cfg = load_recipe("ep2_cpu", run)
    assert (cfg.learner.ranks, cfg.learner.ep_size, cfg.rollout.workers) == (2, 2, 2)
    assert main(["sft", "ep2_cpu", *run]) == 0
    assert main(["train", "ep2_cpu", *run]) == 0

    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2]
    for m in lines:
        assert m["learner/skipped"] == 0.0 and m["learner/tokens"] > 0 and m["episode/failed"] == 0.0
        # The learner recomputed the rollout's log-probs: same weights, so the mismatch is rounding only.
        assert m["mismatch/abs_logdiff"] < 1e-3
    step = tmp_path / "checkpoints" / "rl" / "step-00000002"
    assert sorted(p.name for p in (step / "learner").iterdir()) == ["learner_rank000.pt", "learner_rank001.pt"]
    # The checkpoint's model holds every expert again, gathered from the two ranks' shards.
    model = from_pretrained(step / "model")
    assert model.layers[model.moe_layers[0]].ffn.experts.gate_proj.shape[0] == cfg.model.n_experts
