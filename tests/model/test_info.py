"""Model sizes on paper: counts agree with a real build, and the full preset hits its published shape."""
import pytest

from jointrl.model.info import model_info
from jointrl.model.presets import PRESETS, load_preset
from jointrl.model.transformer import Transformer
from jointrl.rl.commands.cli import main


def test_debug_counts_equal_a_real_build():
    cfg = PRESETS["debug"]
    model = Transformer(cfg)
    total = sum(p.numel() for p in model.parameters())
    routed = sum(p.numel() for i in model.moe_layers for p in model.layers[i].ffn.experts.parameters())
    info = model_info(cfg)
    assert info.total_params == total
    assert info.routed_expert_params == routed
    # One token runs n_active of the n_experts routed experts and everything else.
    assert info.active_params == total - routed + routed * cfg.n_active // cfg.n_experts
    assert info.layers_by_kind == {"kda": 2, "gated_dsa": 1, "gated_mla": 1}


def test_state_bytes_by_hand():
    cfg = PRESETS["debug"]
    info = model_info(cfg, context=100)
    # Two attention layers cache (latent 32 + rope 8) bf16 values per token; the DSA one adds 16 index dims.
    assert info.attn_cache_bytes == 100 * 2 * ((32 + 8) * 2) + 100 * 16 * 2
    # Two KDA layers: fp32 state 2 heads x 16 x 16, bf16 conv window 3 x (3 * 2 * 16).
    assert info.kda_state_bytes == 2 * (2 * 16 * 16 * 4 + 3 * 96 * 2)


def test_full_preset_is_2_8t_total_104b_active_with_69_kda_and_24_dsa_layers():
    info = model_info(load_preset("moe-2.8t"))
    assert info.total_params == pytest.approx(2.8e12, rel=0.02)
    assert info.active_params == pytest.approx(104e9, rel=0.03)
    assert info.layers_by_kind == {"kda": 69, "gated_dsa": 24, "gated_mla": 0}
    assert load_preset("moe-2.8t").index_topk == 2048


def test_model_info_command_prints_the_counts(capsys):
    assert main(["model", "info", "moe-2.8t"]) == 0
    out = capsys.readouterr().out
    assert "2.803T" in out and "104.512B" in out and "69 kda, 24 gated_dsa" in out
