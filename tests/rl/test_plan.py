"""`jointrl plan`: per-GPU memory against hand-computed numbers for the debug preset, and the full-scale recipe."""
from dataclasses import replace

import pytest

from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer
from jointrl.rl.commands.cli import main
from jointrl.rl.config.run import RunConfig
from jointrl.rl.plan import make_plan
from jointrl.rl.recipe import load_recipe

GIB = 1024**3
# debug: 3 MoE layers x 8 experts x (gate, up, down) of 64 x 32.
DEBUG_ROUTED = 3 * 8 * 3 * 64 * 32
DEBUG_TOTAL = 308_676
DEBUG_DENSE = DEBUG_TOTAL - DEBUG_ROUTED
# Activation elements per token of the debug layers K (dense FFN), S, K, L (MoE FFNs):
#   4*64 residual/norms; K 6*2*16 + 2*16 = 224; L 32 + 32 + 8 + 2*(2*24 + 3*16) = 264; S = L + 2*16 + 16 + 2 = 314;
#   dense FFN 3*128 = 384; MoE FFN 8 + 2*64 + 3*32*(2 + 1) = 424.
DEBUG_WIDTHS = [256 + 224 + 384, 256 + 314 + 424, 256 + 224 + 424, 256 + 264 + 424]  # 864, 994, 904, 944
LOGITS_1024 = 1024 * 512 * 4 * 2  # one chunk (all 1024 tokens) of fp32 logits and their gradient


def _debug(**sections):
    return RunConfig(model={"preset": "debug"}, **sections)


def test_debug_counts_are_what_the_numbers_below_assume():
    model = Transformer(PRESETS["debug"])
    assert sum(p.numel() for p in model.parameters()) == DEBUG_TOTAL
    routed = sum(p.numel() for n, p in model.named_parameters() if ".ffn.experts." in n)
    assert routed == DEBUG_ROUTED


@pytest.mark.parametrize("zero, grads", [(1, (DEBUG_DENSE + DEBUG_ROUTED // 2) * 2), (2, DEBUG_TOTAL // 2 * 2)])
def test_learner_rank_memory_bf16_ep2_by_hand(zero, grads):
    learner = {"ranks": 2, "ep_size": 2, "zero_stage": zero, "dtype": "bf16", "micro_batch_tokens": 1024}
    plan = make_plan(_debug(learner=learner))
    items = plan.learner.items
    # Non-expert weights replicated (161,220), half the experts per rank (73,728), 2 bytes each.
    assert items["weights"] == 469_896
    assert items["gradients"] == grads
    # fp32 master + Adam m, v = 12 bytes, partitioned over both ranks.
    assert items["optimizer states"] == 308_676 / 2 * 12
    assert items["activations"] == 1024 * 2 * sum(DEBUG_WIDTHS) + LOGITS_1024 == 11_784_192
    assert items["reserve"] == 2 * GIB
    assert plan.learner.total == sum(items.values())
    assert plan.learner.gpus == 2


def test_learner_fp32_with_activation_checkpointing_by_hand():
    learner = {"ranks": 4, "ep_size": 2, "zero_stage": 1, "dtype": "fp32", "micro_batch_tokens": 1024,
               "activation_checkpointing": True}
    items = make_plan(_debug(learner=learner)).learner.items
    assert items["weights"] == (DEBUG_DENSE + DEBUG_ROUTED / 2) * 4
    assert items["gradients"] == items["weights"]
    assert items["optimizer states"] == DEBUG_TOTAL / 4 * 8  # Adam m and v, partitioned over 4 ranks
    # Every layer's input (4 x 64) plus the widest layer (994) being recomputed.
    assert items["activations"] == 1024 * 4 * (4 * 64 + 994) + LOGITS_1024


def test_rollout_worker_memory_by_hand():
    rollout = {"workers": 3, "max_rows": 4, "mxfp4_experts": True}
    hardware = {"gpus_per_worker": 2, "max_context": 256}
    plan = make_plan(_debug(rollout=rollout, plan=hardware))
    items = plan.rollout.items
    # bf16 non-expert weights + 4.25-bit experts, over 2 GPUs.
    assert items["weights"] == (DEBUG_DENSE * 2 + DEBUG_ROUTED * 4.25 / 8) / 2
    # Per sequence: S and L layers cache (32 + 8) x 2 bytes per token, S adds a 16-dim index key (x 2 bytes):
    # 192 B x 256 tokens; two K layers hold 2 x 16 x 16 fp32 state + 3 conv steps of 3 x 32 bf16 channels.
    per_sequence = 192 * 256 + 2 * (2 * 16 * 16 * 4 + 3 * 3 * 32 * 2)
    assert items["KV / state cache"] == 4 * per_sequence / 2
    assert plan.rollout.gpus == 6 and plan.gpus == 1 + 6
    bf16 = make_plan(_debug(rollout={**rollout, "mxfp4_experts": False}, plan=hardware)).rollout.items["weights"]
    assert bf16 == DEBUG_TOTAL * 2 / 2


def test_context_beyond_the_model_is_refused():
    with pytest.raises(ValueError, match="max_context=1024 exceeds the model's max_seq_len=512"):
        make_plan(_debug(plan={"max_context": 1024}))


def test_plan_command_exit_code_says_whether_it_fits(capsys):
    assert main(["plan", "ep2_cpu", "rollout.workers=3"]) == 0
    out = capsys.readouterr().out
    assert "learner rank" in out and "5 GPUs (2 learner + 3 x 1 rollout); the plan fits" in out
    # Below the 2 GiB runtime reserve nothing fits.
    assert main(["plan", "ep2_cpu", "--gpu-mem-gib", "1"]) == 1
    assert "does NOT fit" in capsys.readouterr().out


def test_full_scale_recipe_plans_on_the_meta_device_and_fits():
    cfg = load_recipe("moe-2.8t.yaml")
    plan = make_plan(cfg)
    # 90 MoE layers x 800 experts x 3 x 7168 x 1792 routed; the rest (28.2B) replicated on every rank.
    routed = 90 * 800 * 3 * 7168 * 1792
    assert plan.routed_params == routed == 2_774_532_096_000
    dense = plan.total_params - routed
    assert plan.learner.items["weights"] == (dense + routed / 800) * 2
    assert plan.learner.items["optimizer states"] == plan.total_params / 800 * 12
    assert plan.fits and plan.learner.total < 141 * GIB and plan.rollout.total < 141 * GIB
    assert plan.gpus == cfg.learner.ranks + cfg.rollout.workers * cfg.plan.gpus_per_worker
    # The same layout on 80 GiB GPUs does not fit: the replicated dense weights alone take 52.5 GiB.
    assert not replace(plan.learner, capacity_gib=80).fits
