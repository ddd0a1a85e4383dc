"""Imports of transformers checkpoints (kimi_linear, deepseek_v3, deepseek_v32) against transformers' own forward and
greedy decoding, the import command, and the errors for what does not import.

The reference models are built by transformers itself, with weights large enough to matter, saved with its
save_pretrained (once sharded through model.safetensors.index.json), and given multi-token-prediction layers
in the file where the config declares them. Measured max relative logit differences (max |jointrl - transformers|
/ max |transformers|, fp32, 2 x 24 tokens; printed by test_import_matches_transformers with -s): kimi_linear
1.2e-6 .. 3.2e-6, deepseek_v3 5.7e-7 .. 8.7e-7, deepseek_v32 9.0e-7 .. 9.5e-7.
"""
import json
import math

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM

from jointrl.model.checkpoint import INDEX_FILE, WEIGHTS_FILE, from_pretrained
from jointrl.model.export import export_pretrained, export_target
from jointrl.model.generate import SamplingParams
from jointrl.model.generate import generate as jointrl_generate
from jointrl.model.hf_import import import_config, import_pretrained, import_state_dict
from jointrl.rl.commands.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: one thread each

# Odd sizes throughout; every type has latent attention with rotary (or unrotated) dims and MoE layers. An eps
# of 1e-2 makes the fixed 1e-6 of the latent norms visible in the logits.
COMMON = dict(
    vocab_size=101, hidden_size=36, intermediate_size=52, moe_intermediate_size=20, num_attention_heads=3,
    num_key_value_heads=3, kv_lora_rank=14, qk_nope_head_dim=10, qk_rope_head_dim=6, v_head_dim=12,
    num_experts_per_tok=2, pad_token_id=None, bos_token_id=None, eos_token_id=None,
)
# id -> (model_type, config, how to save: sharded index and/or an MTP layer in the file).
CASES = {
    "kimi_KLK_eps1e-2_sharded_mtp": ("kimi_linear", dict(
        num_hidden_layers=3, num_local_experts=6, q_lora_rank=None, rms_norm_eps=1e-2, n_group=2, topk_group=1,
        first_k_dense_replace=1, num_nextn_predict_layers=1,
        linear_attn_config={"kda_layers": [1, 3], "full_attn_layers": [2], "num_heads": 2, "head_dim": 8,
                            "short_conv_kernel_size": 4},
    ), {"shard": True, "mtp": True}),
    "kimi_LKKL_qlora_no_shared": ("kimi_linear", dict(
        num_hidden_layers=4, num_local_experts=6, q_lora_rank=12, n_shared_experts=0, first_k_dense_replace=0,
        linear_attn_config={"kda_layers": [2, 3], "full_attn_layers": [1, 4], "num_heads": 3, "head_dim": 6,
                            "short_conv_kernel_size": 3},
    ), {}),
    "v3_LLL_mtp": ("deepseek_v3", dict(
        num_hidden_layers=3, n_routed_experts=6, q_lora_rank=12, n_group=2, topk_group=1, first_k_dense_replace=1,
        num_nextn_predict_layers=1,
    ), {"mtp": True}),
    "v3_no_qlora_no_shared_tied_sharded": ("deepseek_v3", dict(
        num_hidden_layers=2, n_routed_experts=6, q_lora_rank=None, n_shared_experts=0, n_group=1, topk_group=1,
        first_k_dense_replace=0, tie_word_embeddings=True, num_nextn_predict_layers=0,
    ), {"shard": True}),
    # 8 indexer heads make ReLU-zero score ties rare: jointrl and torch.topk break ties differently.
    "v32_SSS_eps1e-2_sharded_mtp": ("deepseek_v32", dict(
        num_hidden_layers=3, n_routed_experts=6, q_lora_rank=12, index_n_heads=8, index_head_dim=16, index_topk=6,
        rms_norm_eps=1e-2, n_group=2, topk_group=1, first_k_dense_replace=1, num_nextn_predict_layers=1,
    ), {"shard": True, "mtp": True}),
    "v32_SS_no_shared": ("deepseek_v32", dict(
        num_hidden_layers=2, n_routed_experts=6, q_lora_rank=10, index_n_heads=8, index_head_dim=12, index_topk=5,
        n_shared_experts=0, n_group=1, topk_group=1, first_k_dense_replace=0,
    ), {}),
}
B, T, PROMPT, STEPS = 2, 24, 8, 20
MAX_REL_DIFF = 1e-4
SHARD = "40KB"




def hf_model(model_type: str, update: dict):
    """A transformers model of the type, seeded, with unit-gain matrices, norms near 1 and a router bias."""
    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **COMMON, **update)).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith(("A_log", "dt_bias")):
                continue  # their own init is random and in range
            if p.dim() >= 2:
                p.normal_(0.0, 1.0 / math.sqrt(max(p.shape[-1], 1)))
            else:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
        for name, buffer in hf.named_buffers():
            if name.endswith("e_score_correction_bias"):
                # Large enough to change which experts win, so a lost bias shows in the logits.
                buffer.normal_(0.0, 0.1)
    return hf


def add_mtp_layer(directory, n_layers: int) -> int:
    """Append a DeepSeek-style MTP layer (a decoder layer plus its projections) to the saved files; its tensor count."""
    index_path = directory / INDEX_FILE
    files = sorted(directory.glob("*.safetensors"))
    state = {k: v for f in files for k, v in load_file(str(f)).items()}
    last = f"model.layers.{n_layers - 1}."
    mtp = {k.replace(last, f"model.layers.{n_layers}."): v.clone() for k, v in state.items() if k.startswith(last)}
    dim = state["model.embed_tokens.weight"].shape[1]
    for extra, shape in (("enorm.weight", (dim,)), ("hnorm.weight", (dim,)), ("eh_proj.weight", (dim, 2 * dim)),
                         ("shared_head.norm.weight", (dim,)), ("embed_tokens.weight", (7, dim))):
        mtp[f"model.layers.{n_layers}.{extra}"] = torch.randn(shape)
    if index_path.is_file():
        save_file(mtp, str(directory / "model-mtp.safetensors"))
        index = json.loads(index_path.read_text())
        index["weight_map"].update({k: "model-mtp.safetensors" for k in mtp})
        index_path.write_text(json.dumps(index))
    else:
        save_file({**state, **mtp}, str(directory / WEIGHTS_FILE))
    return len(mtp)


def save_case(case: str, directory):
    """The case's transformers model, saved as its options say; returns (hf model, MTP tensors written)."""
    model_type, update, how = CASES[case]
    hf = hf_model(model_type, update)
    hf.save_pretrained(directory, max_shard_size=SHARD if how.get("shard") else "1GB")
    assert (directory / INDEX_FILE).is_file() == bool(how.get("shard"))
    mtp = add_mtp_layer(directory, update["num_hidden_layers"]) if how.get("mtp") else 0
    return hf, mtp


def logits(model, tokens: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(tokens).logits.float()


def max_rel_diff(ours: torch.Tensor, reference: torch.Tensor) -> float:
    return ((ours - reference).abs().max() / reference.abs().max()).item()


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")
@pytest.mark.parametrize("case", list(CASES))
def test_import_matches_transformers(case, tmp_path):
    hf, mtp = save_case(case, tmp_path / "hf")
    model, notes = import_pretrained(tmp_path / "hf")
    model_type, update, _ = CASES[case]
    if mtp:
        assert any(f"skipped {mtp} tensors: multi-token-prediction" in note for note in notes), notes

    tokens = torch.randint(0, COMMON["vocab_size"], (B, T), generator=torch.Generator().manual_seed(1))
    diff = max_rel_diff(logits(model, tokens), logits(hf, tokens))
    print(f"{case}: max relative logit difference {diff:.2e}")
    assert diff <= MAX_REL_DIFF

    prompt = tokens[:1, :PROMPT]
    with torch.no_grad():
        expected = hf.generate(prompt, max_new_tokens=STEPS, do_sample=False, eos_token_id=None, pad_token_id=0)
    params = SamplingParams(temperature=0.0, max_new_tokens=STEPS)
    assert jointrl_generate(model, prompt.tolist(), params)[0].tokens == expected[0, PROMPT:].tolist()

    if model_type == "kimi_linear" and update.get("n_shared_experts", 1):
        # Back out through the kimi_linear export: the unrotated rope dims and the fixed latent eps survive.
        assert export_target(model.cfg) == "kimi_linear"
        back = AutoModelForCausalLM.from_pretrained(export_pretrained(model, tmp_path / "back")).eval()
        assert max_rel_diff(logits(back, tokens), logits(hf, tokens)) <= MAX_REL_DIFF


def test_import_command_writes_a_checkpoint_from_pretrained_loads(tmp_path, capsys):
    case = "v3_LLL_mtp"
    save_case(case, tmp_path / "hf")
    assert main(["import", str(tmp_path / "hf"), str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "multi-token-prediction" in printed and "3 layers LLL" in printed
    loaded = from_pretrained(tmp_path / "out")
    imported, _ = import_pretrained(tmp_path / "hf")
    tokens = torch.randint(0, COMMON["vocab_size"], (1, 9))
    assert torch.equal(logits(loaded, tokens), logits(imported, tokens))


@pytest.mark.parametrize(
    "setup, message",
    [
        ("missing_dir", "no such directory"),
        ("no_config", "no config.json"),
        ("llama", "model_type 'llama' cannot be imported; supported: kimi_linear, deepseek_v3, deepseek_v32"),
        ("yarn", "rope_scaling.rope_type='yarn'"),
    ],
)
def test_import_command_bad_input_is_one_line(setup, message, tmp_path, capsys):
    source = tmp_path / "hf"
    if setup != "missing_dir":
        source.mkdir()
    if setup == "llama":
        (source / "config.json").write_text(json.dumps({"model_type": "llama"}))
    if setup == "yarn":
        config = {**REAL_DEEPSEEK_V3, "rope_scaling": YARN}
        (source / "config.json").write_text(json.dumps(config))
    assert main(["import", str(source), str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


# Published configs (DeepSeek-V3's, DeepSeek-V3.2-Exp's, Kimi-Linear-48B-A3B-Instruct's config.json), without
# the FP8 quantization_config and YaRN rope_scaling of the DeepSeek ones (tested apart).
REAL_DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3,
    "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02, "intermediate_size": 18432,
    "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048,
    "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True,
    "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 10000, "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid", "seq_aux": True, "tie_word_embeddings": False, "topk_group": 4,
    "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "transformers_version": "4.33.1", "use_cache": True,
    "v_head_dim": 128, "vocab_size": 129280,
}
REAL_DEEPSEEK_V32 = {
    **REAL_DEEPSEEK_V3, "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
    "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048, "transformers_version": "4.44.2",
}
YARN = {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096, "type": "yarn"}
FP8 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
KIMI_FULL = [4, 8, 12, 16, 20, 24, 27]
REAL_KIMI_LINEAR = {
    "architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear", "first_k_dense_replace": 1,
    "head_dim": 72, "hidden_act": "silu", "hidden_size": 2304, "initializer_range": 0.02, "intermediate_size": 9216,
    "kv_lora_rank": 512, "linear_attn_config": {
        "full_attn_layers": KIMI_FULL, "head_dim": 128, "kda_layers": [i for i in range(1, 28) if i not in KIMI_FULL],
        "num_heads": 32, "short_conv_kernel_size": 4,
    },
    "mla_use_nope": True, "model_max_length": 1048576, "moe_intermediate_size": 1024, "moe_layer_freq": 1,
    "moe_renormalize": True, "moe_router_activation_func": "sigmoid", "num_attention_heads": 32,
    "num_expert_group": 1, "num_experts": 256, "num_experts_per_token": 8, "num_hidden_layers": 27,
    "num_key_value_heads": 32, "num_nextn_predict_layers": 0, "num_shared_experts": 1, "q_lora_rank": None,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-5, "rope_scaling": None,
    "rope_theta": 10000.0, "routed_scaling_factor": 2.446, "tie_word_embeddings": False, "topk_group": 1,
    "torch_dtype": "bfloat16", "use_grouped_topk": True, "v_head_dim": 128, "vocab_size": 163840,
    "bos_token_id": 163584, "eos_token_id": 163586, "pad_token_id": 163839,
}


def test_published_kimi_linear_config_imports_and_exports_back():
    cfg = import_config(REAL_KIMI_LINEAR)
    assert cfg.layer_pattern == "KKKL" * 6 + "KKL"
    assert (cfg.dim, cfg.kda_heads, cfg.kda_head_dim, cfg.kda_gate_rank, cfg.q_lora_rank) == (2304, 32, 128, 128, 0)
    assert (cfg.qk_rope_dim, cfg.mla_rope, cfg.norm_eps, cfg.latent_eps) == (64, False, 1e-5, 1e-6)
    assert (cfg.n_experts, cfg.n_active, cfg.n_shared, cfg.first_dense_layers, cfg.route_scale) == (256, 8, 1, 1, 2.446)
    assert export_target(cfg) == "kimi_linear"


@pytest.mark.parametrize("published, pattern", [(REAL_DEEPSEEK_V3, "L" * 61), (REAL_DEEPSEEK_V32, "S" * 61)])
def test_published_deepseek_configs_import_without_yarn_and_fp8(published, pattern):
    cfg = import_config(published)
    assert cfg.layer_pattern == pattern and cfg.mla_rope and cfg.latent_eps == 1e-6
    assert (cfg.n_groups, cfg.topk_groups, cfg.first_dense_layers, cfg.route_scale) == (8, 4, 3, 2.5)
    if pattern[0] == "S":
        assert (cfg.index_heads, cfg.index_head_dim, cfg.index_topk, cfg.index_rope_dim) == (64, 128, 2048, 64)
    with pytest.raises(ValueError) as info:
        import_config({**published, "rope_scaling": YARN, "quantization_config": FP8})
    assert "rope_scaling.rope_type='yarn'" in str(info.value) and "quantization_config=" in str(info.value)


@pytest.mark.parametrize(
    "base, update, message",
    [
        (REAL_DEEPSEEK_V3, {"hidden_act": "gelu"}, "hidden_act='gelu'"),
        (REAL_DEEPSEEK_V3, {"attention_bias": True}, "attention_bias=True"),
        (REAL_DEEPSEEK_V3, {"scoring_func": "softmax"}, "scoring_func='softmax'"),
        (REAL_DEEPSEEK_V3, {"rope_interleave": False}, "rope_interleave=False"),
        (REAL_DEEPSEEK_V3, {"rope_scaling": None, "rope_parameters": {"rope_type": "linear", "factor": 2.0}},
         "rope_parameters.rope_type='linear'"),
        (REAL_DEEPSEEK_V3, {"num_key_value_heads": 8}, "num_key_value_heads=8"),
        (REAL_DEEPSEEK_V32, {"q_lora_rank": None}, "q_lora_rank=None"),
        (REAL_KIMI_LINEAR, {"mla_use_output_gate": True}, "mla_use_output_gate=True: not a field jointrl knows"),
        (REAL_KIMI_LINEAR, {"linear_attn_config": {**REAL_KIMI_LINEAR["linear_attn_config"], "gate_lower_bound": -5}},
         "linear_attn_config.gate_lower_bound=-5"),
        (REAL_KIMI_LINEAR, {"moe_router_activation_func": "softmax"}, "moe_router_activation_func='softmax'"),
    ],
    ids=["gelu", "attention_bias", "softmax_router", "rope_not_interleaved", "linear_rope", "kv_heads",
         "v32_no_q_lora", "kimi_output_gate", "kimi_gate_lower_bound", "kimi_softmax_router"],
)
def test_unsupported_field_values_name_field_and_value(base, update, message):
    with pytest.raises(ValueError, match="cannot import this") as info:
        import_config({**base, **update})
    assert message in str(info.value)


def test_unknown_model_type_names_the_supported_ones():
    with pytest.raises(ValueError, match="^model_type 'llama' cannot be imported; supported: kimi_linear, "):
        import_config({"model_type": "llama"})


@pytest.mark.parametrize(
    "change, message",
    [
        ("drop model.layers.1.self_attn.kv_b_proj.weight", "1 missing tensors: model.layers.1.self_attn.kv_b_proj.weight"),
        ("drop model.layers.2.mlp.experts.4.up_proj.weight", "model.layers.2.mlp.experts.up_proj of experts [4]"),
        ("add model.layers.4.self_attn.o_proj.weight", "1 unexpected tensors: model.layers.4.self_attn.o_proj.weight"),
        ("add model.layers.0.self_attn.q_a_proj.bias", "unexpected tensors: model.layers.0.self_attn.q_a_proj.bias"),
    ],
    ids=["missing", "missing_expert", "beyond_mtp_layer", "attention_bias"],
)
def test_missing_or_unexpected_weights_are_named(change, message, tmp_path):
    # v3_LLL_mtp declares one MTP layer (layer 3): layer 4 is unexpected.
    save_case("v3_LLL_mtp", tmp_path)
    state = load_file(str(tmp_path / WEIGHTS_FILE))
    action, name = change.split()
    if action == "drop":
        del state[name]
    else:
        state[name] = torch.zeros(3)
    save_file(state, str(tmp_path / WEIGHTS_FILE))
    with pytest.raises(ValueError, match="does not match its deepseek_v3 config") as info:
        import_state_dict(tmp_path)
    assert message in str(info.value)
