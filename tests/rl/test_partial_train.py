"""The real `jointrl train` command with partial rollouts: the bound holds in every step's metrics, and a run resumes."""
import json

import pytest

from jointrl.rl.commands.cli import main
from jointrl.rl.recipe import load_recipe
from tests.rl.test_recipe_runs import GSPO_ASYNC_TINY


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gspo_async_with_partial_rollouts_trains_within_the_bound_and_resumes(tmp_path):
    # The gspo_async test's tiny overrides, with partial rollouts on.
    run = [*GSPO_ASYNC_TINY, "checkpoint.every=2", f"tracking.run_dir={tmp_path}", "rollout.partial=true"]
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
