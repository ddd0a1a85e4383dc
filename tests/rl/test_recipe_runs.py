"""Shipped recipes end to end through the real commands: ep2_cpu (expert parallel), gspo_async (bounded staleness),
blackbox_agent and kimi_linear_import (an imported checkpoint)."""
import json
from pathlib import Path

import pytest

from jointrl.model.checkpoint import from_pretrained
from jointrl.rl.commands.cli import main
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


# The gspo_async recipe shrunk: the debug model and short reasoning tasks; the async machinery is the recipe's own.
GSPO_ASYNC_TINY = [
    "model.preset=debug", "tokenizer.n_samples=200", "trainer.sft.demos_per_env=2", "trainer.sft.max_len=256",
    "envs.mix=[{glob: 'reasoning/chain_sum-v0:default'}, {glob: 'reasoning/lcm-v0:default'}]",
    "envs.domain_shares={reasoning: 1.0}", "rollout.max_new_tokens_per_turn=32",
    "rollout.max_new_tokens_per_episode=64", "rollout.max_turns=1", "trainer.prompts_per_step=2",
    "trainer.eval_every=0",
    # An entropy bonus moves the weights even when every reward is 0, so a stale batch really is stale.
    "algorithm.entropy_coef=0.01", "learner.lr=1e-3", "tracking.wandb_mode=disabled",
]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gspo_async_recipe_trains_on_batches_up_to_two_versions_stale(tmp_path):
    # The debug model and short reasoning tasks keep it quick; the async machinery is the recipe's own.
    run = [*GSPO_ASYNC_TINY, "trainer.steps=4", "checkpoint.every=0", f"tracking.run_dir={tmp_path}"]
    cfg = load_recipe("gspo_async", run)
    assert (cfg.algorithm.name, cfg.rollout.max_staleness) == ("gspo", 2)
    assert main(["sft", "gspo_async", *run]) == 0
    assert main(["train", "gspo_async", *run]) == 0
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2, 3, 4]
    # Step 1's batch is played while the learner trains step 0, by the starting weights: one version stale.
    assert lines[1]["staleness/max"] >= 1.0
    assert all(m["staleness/max"] <= 2.0 for m in lines)
    # The learner's importance weights saw the lag: pi_old differs from the behaviour policy there.
    assert max(m["mismatch/abs_logdiff"] for m in lines) > 1e-4


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_blackbox_agent_recipe_trains_on_the_tokens_the_server_recorded(tmp_path):
    """Terminal episodes played by an OpenAI-client agent through each worker's server, 2 RL steps."""
    run = [
        "model.preset=debug", "model.max_seq_len=2048", "tokenizer.n_samples=200", "trainer.sft.demos_per_env=2",
        "trainer.steps=2", "rollout.group_size=2", "trainer.prompts_per_step=2", "checkpoint.every=0",
        "tracking.wandb_mode=disabled", f"tracking.run_dir={tmp_path}",
    ]
    cfg = load_recipe("blackbox_agent", run)
    assert cfg.envs.mix[0].agent == "jointrl.rl.serve.blackbox:openai_agent"
    assert main(["sft", "blackbox_agent", *run]) == 0
    assert main(["train", "blackbox_agent", *run]) == 0
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2]
    for m in lines:
        assert m["episode/failed"] == 0.0 and m["learner/tokens"] > 0
        # The learner recomputed the log-probs the server sampled with: the same tokens, so rounding only.
        assert m["mismatch/abs_logdiff"] < 1e-3


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_kimi_linear_import_recipe_trains_an_imported_checkpoint_with_its_own_tokenizer(tmp_path, prepared_recipe):
    """SFT and 2 RL steps from a transformers kimi_linear checkpoint, its Kimi-style chat template in the agent loop."""
    prepared_recipe("kimi_linear_import.yaml")  # the recipe's prepare step: python -m jointrl.model.hf_sample
    run = [f"tracking.run_dir={tmp_path}", "trainer.steps=2", "checkpoint.every=2", "tracking.wandb_mode=disabled"]
    cfg = load_recipe("kimi_linear_import", run)
    assert cfg.pretrained == "runs/kimi_linear_import/hf" and cfg.model.name == "kimi_linear"
    assert main(["sft", "kimi_linear_import", *run]) == 0
    assert main(["train", "kimi_linear_import", *run]) == 0
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2]
    for m in lines:
        assert m["episode/failed"] == 0.0 and m["learner/tokens"] > 0
        assert m["mismatch/abs_logdiff"] < 1e-3
    step = tmp_path / "checkpoints" / "rl" / "step-00000002"
    assert (step / "model" / "tokenizer.json").read_bytes() == (
        Path("runs/kimi_linear_import/hf/tokenizer.json").read_bytes())
    assert main(["eval", str(step), "--envs", "terminal/text-count-v0:easy", "--seeds", "1000000", *run[:1]]) == 0
