"""Exports against transformers' own kimi_linear model, the remote-code wrapper, MXFP4 reloads and native round trips.

transformers runs kimi_linear on CPU here through its reference PyTorch paths: `chunk_kda`,
`fused_recurrent_kda` and the short convs fall back to plain torch when `fla` (flash-linear-attention)
and `causal_conv1d` are not installed (it logs "falling back to its reference PyTorch implementation").
With fla installed it would pick fla's Triton kernels, which need a GPU.
"""
import ast
import importlib.util
import json
import math
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM

from jointrl.model.checkpoint import INDEX_FILE, from_pretrained, load_state
from jointrl.model.export import (
    export_pretrained,
    export_target,
    kimi_linear_incompatibility,
)
from jointrl.model.generate import SamplingParams
from jointrl.model.generate import generate as jointrl_generate
from jointrl.model.moe import RoutedExperts
from jointrl.model.mxfp4 import MXFP4Experts, dequantize_mxfp4
from jointrl.model.standalone import modeling_files
from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: one thread each

# The kimi_linear-compatible preset: no DSA layer, ungated NoPE latent attention.
KIMI_PRESET = "debug-kimi"
KIMI_VARIANTS = {
    "base": {},
    # Direct query projection, no dense layer, two expert groups, tied embeddings (written untied).
    "no_q_lora_grouped_tied": {"q_lora_rank": 0, "first_dense_layers": 0, "n_groups": 2, "tie_embeddings": True},
}
# fp32; logits have std ~1. Measured max |diff| 8e-6 (KLKL) to 1.3e-5 (KKLKL): the delta rule and expert sums
# run in other orders.
KIMI_ATOL = 1e-4
B, T, PAD = 2, 24, 5
# Layer patterns the default export must run in transformers: no latent attention, and latent attention
# first or between delta layers.
DEFAULT_EXPORT_PATTERNS = ["KKK", "KKLKL", "LKLLK"]
DEFAULT_GENERATE_STEPS = 20
# The packages a native export's remote code may import.
SHIPPED_IMPORTS = {"torch", "transformers", "safetensors"}


def build(update: dict | None = None, preset: str = "debug") -> Transformer:
    """A preset model with weights large enough to matter: unit-gain matrices, norms near 1, a router bias."""
    model = Transformer(PRESETS[preset].model_copy(update=update or {})).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("A_log", "dt_bias")):
                continue  # their own init is already random and in range
            if p.dim() >= 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]))
            else:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
        for i in model.moe_layers:
            # Large enough to change which experts win, so a lost or misplaced bias shows in the logits.
            model.layers[i].ffn.gate.e_score_correction_bias.normal_(0.0, 0.1)
    return model


def tokens_for(model: Transformer) -> torch.Tensor:
    return torch.randint(0, model.cfg.vocab_size, (B, T))


def logits(model, tokens: torch.Tensor, **kwargs) -> torch.Tensor:
    with torch.no_grad():
        return model(tokens, **kwargs).logits


def greedy(model: Transformer, prompt: torch.Tensor, steps: int = 4) -> torch.Tensor:
    """Hand-written greedy decoding: rerun the whole sequence, append the argmax."""
    seq = prompt
    for _ in range(steps):
        seq = torch.cat([seq, logits(model, seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return seq


def generate(hf, prompt: torch.Tensor, steps: int = 4, **kwargs) -> torch.Tensor:
    return hf.generate(prompt, max_new_tokens=steps, do_sample=False, eos_token_id=None, pad_token_id=0, **kwargs)


def assert_clean_load(info: dict) -> None:
    assert {k: v for k, v in info.items() if v} == {}, info






@pytest.mark.parametrize(
    "preset, update, reason",
    [
        ("debug", {}, "layer 1 is gated sparse attention"),
        (KIMI_PRESET, {"layer_pattern": "KKK"}, "no latent-attention (L) layer"),
        (KIMI_PRESET, {"attn_output_gate": True}, "no output gate"),
        (KIMI_PRESET, {"qk_rope_dim": 8}, "never applies rotary"),
        (KIMI_PRESET, {"norm_eps": 1e-5}, "fixed eps of 1e-06"),
        (KIMI_PRESET, {"kda_gate_rank": 8}, "kda_gate_rank=8 differs from kda_head_dim=16"),
        (KIMI_PRESET, {"router_scoring": "softmax"}, "always scores with a sigmoid"),
        (KIMI_PRESET, {"n_shared": 0}, "has a shared expert"),
        (KIMI_PRESET, {"n_groups": 8, "topk_groups": 2}, "groups need at least 2"),
    ],
    ids=["debug_dsa", "no_latent", "gate", "rope", "eps", "gate_rank", "softmax", "no_shared", "groups_of_one"],
)
def test_incompatibility_names_the_reason(preset, update, reason):
    cfg = PRESETS[preset].model_copy(update=update)
    assert reason in kimi_linear_incompatibility(cfg)
    assert export_target(cfg) == "native"
    with pytest.raises(ValueError, match="not exportable as kimi_linear"):
        export_target(cfg, "kimi_linear")


@pytest.mark.parametrize("variant", list(KIMI_VARIANTS))
def test_compatible_configs_are_accepted(variant):
    cfg = PRESETS[KIMI_PRESET].model_copy(update=KIMI_VARIANTS[variant])
    assert kimi_linear_incompatibility(cfg) is None
    assert export_target(cfg) == "kimi_linear"
    # transformers cannot hold MXFP4 kimi_linear experts: auto falls back to native, an explicit request fails.
    assert export_target(cfg, mxfp4=True) == "native"
    with pytest.raises(ValueError, match="gpt-oss"):
        export_target(cfg, "kimi_linear", mxfp4=True)
    with pytest.raises(ValueError, match="target='onnx'"):
        export_target(cfg, "onnx")


@pytest.mark.parametrize("variant", list(KIMI_VARIANTS))
def test_kimi_linear_export_loads_natively_in_transformers(variant, tmp_path):
    assert importlib.util.find_spec("fla") is None, "the CPU reference path of kimi_linear needs fla absent"
    model = build(KIMI_VARIANTS[variant], preset=KIMI_PRESET)
    cfg = model.cfg
    out = export_pretrained(model, tmp_path / "kimi")

    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "kimi_linear" and "auto_map" not in config
    assert config["tie_word_embeddings"] is False  # a tied model is written with its own head copy
    assert not (out / "modeling_jointrl.py").exists()
    # Hub checkpoint names, which transformers converts on load.
    state = load_state(out)
    moe = cfg.moe_layers[0]
    assert state["model.layers.0.self_attn.A_log"].shape == (1, 1, cfg.kda_heads, 1)
    assert state["model.layers.0.self_attn.q_conv1d.weight"].shape == (cfg.kda_heads * cfg.kda_head_dim, 1, 4)
    up = state[f"model.layers.{moe}.block_sparse_moe.experts.3.w3.weight"]
    torch.testing.assert_close(up, model.layers[moe].ffn.experts.up_proj[3], atol=0, rtol=0)

    hf, info = AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    assert_clean_load(info)
    assert type(hf).__name__ == "KimiLinearForCausalLM" and hf.dtype == torch.float32
    assert hf.config.layer_types == ["linear_attention", "full_attention"] * 2
    assert hf.config.mlp_layer_types == ["dense" if i < cfg.first_dense_layers else "sparse" for i in range(4)]
    bias = hf.model.layers[moe].mlp.gate.e_score_correction_bias
    torch.testing.assert_close(bias, model.layers[moe].ffn.gate.e_score_correction_bias, atol=0, rtol=0)

    tokens = tokens_for(model)
    expected = logits(model, tokens)
    torch.testing.assert_close(logits(hf, tokens), expected, atol=KIMI_ATOL, rtol=0)
    # Left padding: transformers zeroes padded inputs, jointrl skips them; real tokens agree either way.
    mask = torch.ones(B, T, dtype=torch.long)
    mask[0, :PAD] = 0
    padded = logits(hf, tokens, attention_mask=mask)
    torch.testing.assert_close(padded[0, PAD:], logits(model, tokens[:1, PAD:])[0], atol=KIMI_ATOL, rtol=0)
    # transformers' cached decode (recurrent delta rule, conv state, latent KV cache) follows jointrl's greedy path.
    assert torch.equal(generate(hf, tokens[:1, :6]), greedy(model, tokens[:1, :6]))


@pytest.mark.parametrize("preset", ["debug", KIMI_PRESET])
@pytest.mark.parametrize("pattern", DEFAULT_EXPORT_PATTERNS)
def test_default_export_runs_in_transformers_with_default_arguments(pattern, preset, tmp_path, tokenizer):
    """What a user gets from `jointrl export` with no options: forward() and generate() as transformers calls them."""
    model = build({"layer_pattern": pattern}, preset=preset)
    target = export_target(model.cfg, "auto", False)
    out = export_pretrained(model, tmp_path / "auto", tokenizer=tokenizer, target=target)
    hf = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=target == "native")
    # Unset (None) falls back to transformers' default, greedy; only True would sample.
    assert hf.generation_config.do_sample is not True

    tokens = tokens_for(model)
    torch.testing.assert_close(logits(hf, tokens), logits(model, tokens), atol=KIMI_ATOL, rtol=0)

    # Row 1: none of these seeded models reaches a stop token from it within the 20 steps, so all 20 are compared.
    prompt = tokens[1:, :8]
    with torch.no_grad():
        continued = hf.generate(prompt, max_new_tokens=DEFAULT_GENERATE_STEPS)
    stops = (tokenizer.eos_id, tokenizer.eot_id)
    params = SamplingParams(temperature=0.0, max_new_tokens=DEFAULT_GENERATE_STEPS, stop_ids=stops)
    expected = jointrl_generate(model, prompt.tolist(), params)[0]
    assert expected.finish_reason == "length"
    assert continued[0, prompt.shape[1]:].tolist() == expected.tokens


class BrokenTokenizer:
    """Fails while the export directory is being written."""

    bos_id, eos_id, eot_id, pad_id = 1, 2, 3, 0

    def save(self, directory):
        raise OSError("disk full")


def test_failed_export_keeps_the_previous_directory(tmp_path):
    model = build()
    out = export_pretrained(model, tmp_path / "out")
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(OSError, match="disk full"):
        export_pretrained(model, out, tokenizer=BrokenTokenizer())
    with pytest.raises(ValueError, match="not exportable as kimi_linear"):
        export_pretrained(model, out, target="kimi_linear")
    assert sorted(p.name for p in out.iterdir()) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_unknown_quantization_is_refused(tmp_path):
    out = export_pretrained(build(), tmp_path / "native")
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "quantization_config": {"quant_method": "gptq"}}))
    with pytest.raises(ValueError, match="'gptq' is not supported"):
        from_pretrained(out)
    with pytest.raises(ValueError, match="mxfp4='fp8'"):
        from_pretrained(out, mxfp4="fp8")


def test_debug_preset_exports_native_with_remote_code(tmp_path, tokenizer):
    model = build()
    out = export_pretrained(model, tmp_path / "native", tokenizer=tokenizer)

    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "jointrl_moe"
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_jointrl.JointRLForCausalLM"
    assert (out / "tokenizer.json").is_file()
    # The remote code is jointrl's own source, every jointrl import made relative to a shipped file.
    shipped = modeling_files()
    assert "modeling_jointrl.py" in shipped and "model_transformer.py" in shipped and "kernels_kda.py" in shipped
    for name, source in shipped.items():
        assert (out / name).read_text() == source
        imports = [n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.Import, ast.ImportFrom))]
        modules = [a.name for n in imports if isinstance(n, ast.Import) for a in n.names]
        modules += [n.module for n in imports if isinstance(n, ast.ImportFrom) and n.level == 0]
        # Only what transformers' remote code has anyway: no jointrl, no pydantic, no triton.
        assert {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names) <= SHIPPED_IMPORTS, name
    generation = json.loads((out / "generation_config.json").read_text())
    assert generation == {
        "bos_token_id": tokenizer.bos_id,
        "eos_token_id": [tokenizer.eos_id, tokenizer.eot_id],
        "pad_token_id": tokenizer.pad_id,
    }

    hf, info = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True, output_loading_info=True)
    assert_clean_load(info)
    assert type(hf).__name__ == "JointRLForCausalLM"
    assert hf.generation_config.eos_token_id == [tokenizer.eos_id, tokenizer.eot_id]
    tokens = tokens_for(model)
    expected = logits(model, tokens)
    # The same code on the same weights: bit for bit, without a cache and with one (a cached forward takes the
    # absorbed latent-attention path, as jointrl's engine does on prefill).
    torch.testing.assert_close(logits(hf, tokens, use_cache=False), expected, atol=0, rtol=0)
    cached = logits(model, tokens, cache=model.allocate_cache(B, T))
    torch.testing.assert_close(logits(hf, tokens), cached, atol=0, rtol=0)
    torch.testing.assert_close(cached, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(logits(from_pretrained(out), tokens), expected, atol=0, rtol=0)

    # generate() decodes with jointrl's cache (one new column per step) and follows the hand-written greedy
    # decoder, which reruns the whole sequence; so does generate() without a cache.
    assert torch.equal(generate(hf, tokens[:1, :6]), greedy(model, tokens[:1, :6]))
    assert torch.equal(generate(hf, tokens[:1, :6], use_cache=False), greedy(model, tokens[:1, :6]))
    # Its loss is jointrl's objective: next-token cross-entropy (mean of -log p(token t+1 | tokens <= t)) plus
    # the blocks' aux losses (here the DSA indexer's, which needs autograd on).
    out_hf = hf(tokens, labels=tokens, use_cache=False)
    logp = expected.log_softmax(-1)[:, :-1].gather(-1, tokens[:, 1:, None])
    assert out_hf.aux_loss > 0
    torch.testing.assert_close(out_hf.loss, -logp.mean() + out_hf.aux_loss, atol=1e-5, rtol=0)
    torch.testing.assert_close(out_hf.aux_loss, model(tokens).aux_loss, atol=0, rtol=0)


def test_mxfp4_export_layout(tmp_path):
    model = build()
    cfg = model.cfg
    out = export_pretrained(model, tmp_path / "mx", mxfp4=True)
    quant = json.loads((out / "config.json").read_text())["quantization_config"]
    assert quant["quant_method"] == "mxfp4"
    kept = quant["modules_to_not_convert"]
    for name in ("embed", "lm_head", "norm", "layers.0.ffn", "layers.1.attn", "layers.1.ffn.gate",
                 "layers.1.ffn.shared_experts"):
        assert name in kept
    assert not any("experts" in n and "shared" not in n for n in kept)

    state = load_state(out)
    e, d, f = cfg.n_experts, cfg.dim, cfg.expert_hidden
    shapes = {"gate_proj": (f, d), "up_proj": (f, d), "down_proj": (d, f)}
    for i in model.moe_layers:
        for proj, (rows, cols) in shapes.items():
            name = f"layers.{i}.ffn.experts.{proj}"
            assert name not in state
            blocks, scales = state[name + "_blocks"], state[name + "_scales"]
            assert blocks.dtype == scales.dtype == torch.uint8
            assert blocks.shape == (e, rows, cols // 32, 16) and scales.shape == (e, rows, cols // 32)
            # The MX format's promise: every element within a quarter of its 32-block's largest magnitude.
            w = getattr(model.layers[i].ffn.experts, proj).detach().unflatten(-1, (-1, 32))
            err = (dequantize_mxfp4(blocks, scales, torch.float32).unflatten(-1, (-1, 32)) - w).abs()
            assert bool((err <= w.abs().amax(-1, keepdim=True) / 4).all())
    quantized = {n for n in state if n.endswith(("_blocks", "_scales"))}
    assert len(quantized) == 2 * 3 * len(model.moe_layers)
    for name in set(state) - quantized:
        assert state[name].dtype == torch.float32
        assert any(name.startswith(module + ".") for module in kept), name


def test_mxfp4_reload_keep_and_dequantize(tmp_path):
    model = build()
    out = export_pretrained(model, tmp_path / "mx", mxfp4=True)
    kept, full = from_pretrained(out, mxfp4="keep"), from_pretrained(out, mxfp4="dequantize")
    assert isinstance(kept.layers[1].ffn.experts, MXFP4Experts)
    assert isinstance(full.layers[1].ffn.experts, RoutedExperts)

    tokens = tokens_for(model)
    with torch.no_grad():
        reference = model(tokens)
    scale = reference.logits.std()
    from_kept = logits(kept, tokens)
    torch.testing.assert_close(from_kept, logits(full, tokens), atol=1e-5, rtol=0)
    # Against full precision, relative to the logits' std, with the full-precision routing replayed
    # (quantization error alone) and live (a few expert choices flip). Measured here: replayed max|diff|
    # 1.30, rms 0.17; live 2.14, 0.22; over seeds 0-7 replayed 0.78-1.67 / 0.15-0.20, live 1.0-2.3 /
    # 0.18-0.25. 4-bit Gaussian weights round with ~10% rms error each, and these unit-gain experts
    # carry much of the residual stream.
    replayed = logits(kept, tokens, routing=reference.routing)
    for got, max_bound, rms_bound in ((replayed, 2.5, 0.3), (from_kept, 3.0, 0.35)):
        diff = got - reference.logits
        assert diff.abs().max() / scale < max_bound
        # Above zero: the experts really were quantized.
        assert 0.01 < diff.pow(2).mean().sqrt() / scale < rms_bound

    # transformers, through the remote code, keeps the experts in MXFP4 too.
    hf, info = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True, output_loading_info=True)
    assert_clean_load(info)
    # The export's own copy of the class (from model_mxfp4.py beside the weights), not jointrl's.
    experts = hf.model.layers[1].ffn.experts
    assert type(experts).__name__ == "MXFP4Experts" and type(experts).__module__.endswith(".model_mxfp4")
    torch.testing.assert_close(logits(hf, tokens, use_cache=False), from_kept, atol=0, rtol=0)

    # A kept model exports back to full precision (its experts decoded).
    again = export_pretrained(kept, tmp_path / "again")
    torch.testing.assert_close(logits(from_pretrained(again), tokens), from_kept, atol=1e-5, rtol=0)


@pytest.mark.parametrize("update", [{}, {"tie_embeddings": True}], ids=["untied", "tied"])
def test_native_round_trip_is_exact(update, tmp_path):
    model = build(update)
    out = export_pretrained(model, tmp_path / "native", target="native")
    again = from_pretrained(out)
    assert again.state_dict().keys() == model.state_dict().keys()
    for name, tensor in model.state_dict().items():
        assert torch.equal(again.state_dict()[name], tensor), name
    if model.cfg.tie_embeddings:
        assert again.lm_head.weight is again.embed.weight
    tokens = tokens_for(model)
    torch.testing.assert_close(logits(again, tokens), logits(model, tokens), atol=0, rtol=0)


def test_sharded_native_export_loads(tmp_path):
    model = build({"tie_embeddings": True})
    out = export_pretrained(model, tmp_path / "sharded", max_shard_bytes=64 * 1024)
    index = json.loads((out / INDEX_FILE).read_text())
    shards = set(index["weight_map"].values())
    assert len(shards) > 1 and all((out / s).is_file() for s in shards)
    assert not (out / "model.safetensors").exists()
    tokens = tokens_for(model)
    expected = logits(model, tokens)
    torch.testing.assert_close(logits(from_pretrained(out), tokens), expected, atol=0, rtol=0)
    hf, info = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True, output_loading_info=True)
    assert_clean_load(info)  # the tied head is not in the files and not reported missing
    assert hf.lm_head.weight is hf.model.embed.weight
    torch.testing.assert_close(logits(hf, tokens, use_cache=False), expected, atol=0, rtol=0)
