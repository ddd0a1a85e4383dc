"""The real `jointrl train` command with partial rollouts: the bound holds in every step's metrics, and a run resumes."""
import json

import pytest

from jointrl.rl.commands.cli import main
from jointrl.rl.recipe import load_recipe


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gspo_async_with_partial_rollouts_trains_within_the_bound_and_resumes(tmp_path):
    # The gspo_async test's tiny overrides (debug model, short reasoning tasks), with partial rollouts on.
    run = [
        "model.preset=debug", "tokenizer.n_samples=200", "trainer.sft.demos_per_env=2", "trainer.sft.max_len=256",
        "envs.mix=[{glob: 'reasoning/chain_sum-v0:default'}, {glob: 'reasoning/lcm-v0:default'}]",
        "envs.domain_shares={reasoning: 1.0}", "rollout.max_new_tokens_per_turn=32",
        "rollout.max_new_tokens_per_episode=64", "rollout.max_turns=1", "trainer.prompts_per_step=2",
        "trainer.eval_every=0", "algorithm.entropy_coef=0.01", "learner.lr=1e-3", "checkpoint.every=2",
        "tracking.wandb_mode=disabled", f"tracking.run_dir={tmp_path}", "rollout.partial=true",
    ]
    cfg = load_recipe("gspo_async", [*run, "trainer.steps=3"])
    assert (cfg.rollout.partial, cfg.rollout.max_staleness, cfg.rollout.partial_spare_prompts) == (True, 2, 1)
    assert main(["sft", "gspo_async", *run, "trainer.steps=3"]) == 0
    assert main(["train", "gspo_async", *run, "trainer.steps=3"]) == 0
    # Resumed from its last checkpoint (step 3: the final step is always saved), on to step 5.
    assert main(["train", "gspo_async", *run, "trainer.steps=5", "--resume"]) == 0
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2, 3, 4, 5]
    for m in lines:
        assert m["staleness/max"] <= 2.0 and m["episode/failed"] == 0.0 and m["learner/tokens"] > 0
