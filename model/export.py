"""Export a model as a directory transformers loads: its own kimi_linear when the config allows, else remote code.

Targets:
  kimi_linear  config.json and weight names of the Kimi Linear hub checkpoints; transformers' own
               `kimi_linear` model converts them on load (q/k/v convs stacked, forget-gate weights moved,
               per-expert w1/w2/w3 merged), so `AutoModelForCausalLM.from_pretrained(dir)` needs no remote
               code. Only configs that kimi_linear_incompatibility accepts; tied embeddings are written
               untied (kimi_linear never ties), which gives the same logits. No MXFP4: transformers loads
               MXFP4 only into gpt-oss experts, so asking for both raises ValueError.
  native       jointrl's own checkpoint (jointrl.model.checkpoint) plus `auto_map` and the remote code:
               modeling_jointrl.py (jointrl.model.remote_code) and the jointrl model modules it imports,
               assembled by jointrl.model.standalone, so `from_pretrained(dir, trust_remote_code=True)` works
               where only torch, transformers and safetensors are installed; jointrl's from_pretrained reads
               it as well, and also what transformers' save_pretrained writes from it.
  auto         kimi_linear when the config is compatible and mxfp4 is off, else native.

With mxfp4=True (native only) the routed experts are stored gpt-oss style as `<name>_blocks` uint8
[E, rows, cols/32, 16] and `<name>_scales` uint8 [E, rows, cols/32], and config.json gets a
`quantization_config` whose `modules_to_not_convert` names every module left in full precision.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from jointrl.model import checkpoint
from jointrl.model.config import ModelConfig
from jointrl.model.mxfp4 import BLOCKS_SUFFIX, dequantize_state_dict, mxfp4_state_dict, quantization_config
from jointrl.model.standalone import ENTRY_FILE, modeling_files
from jointrl.model.transformer import Transformer

if TYPE_CHECKING:
    from jointrl.model.tokenizer import JointTokenizer

TARGETS = ("auto", "native", "kimi_linear")
KIMI_LINEAR = "kimi_linear"
GENERATION_CONFIG_FILE = "generation_config.json"
REMOTE_CODE_FILE = ENTRY_FILE
_REMOTE_MODULE = REMOTE_CODE_FILE.removesuffix(".py")
AUTO_MAP = {
    "AutoConfig": f"{_REMOTE_MODULE}.JointRLConfig",
    "AutoModel": f"{_REMOTE_MODULE}.JointRLModel",
    "AutoModelForCausalLM": f"{_REMOTE_MODULE}.JointRLForCausalLM",
}
# transformers' KimiLinearAttention builds q_a_layernorm and kv_a_layernorm with this fixed eps.
KIMI_LINEAR_LATENT_NORM_EPS = 1e-6
# Hub checkpoints name the routed experts' projections w1 (gate), w2 (down), w3 (up).
_KIMI_EXPERT_NAMES = {"gate_proj": "w1", "down_proj": "w2", "up_proj": "w3"}
_MXFP4_BLOCK = 32


def kimi_linear_incompatibility(cfg: ModelConfig) -> str | None:
    """None when transformers' kimi_linear computes exactly this model, else a sentence naming the first reason."""
    if "S" in cfg.layer_pattern:
        return (
            f"layer {cfg.layer_pattern.index('S')} is gated sparse attention (S); kimi_linear has only "
            "delta attention (K) and latent attention (L) layers"
        )
    if "L" not in cfg.layer_pattern:
        return (
            "no latent-attention (L) layer: transformers' kimi_linear cache counts the tokens seen on its "
            "full-attention layers only, so without one its forward() and generate() fail with the default "
            "use_cache=True"
        )
    if cfg.attn_output_gate:
        return "attn_output_gate=True: kimi_linear's latent attention has no output gate"
    if cfg.qk_rope_dim != 0 and cfg.mla_rope:
        return (
            f"qk_rope_dim={cfg.qk_rope_dim} with mla_rope=True: kimi_linear never applies rotary, so latent "
            "attention must be NoPE (qk_rope_dim 0, or its rope dims left unrotated with mla_rope=False)"
        )
    if cfg.latent_eps != KIMI_LINEAR_LATENT_NORM_EPS:
        return (
            f"latent norm eps {cfg.latent_eps} (norm_eps={cfg.norm_eps}, latent_norm_eps={cfg.latent_norm_eps}): "
            f"kimi_linear normalises the latent-attention query and KV latents with a fixed eps of "
            f"{KIMI_LINEAR_LATENT_NORM_EPS}, so the latent eps must equal it"
        )
    if "K" in cfg.layer_pattern and cfg.kda_gate_rank != cfg.kda_head_dim:
        return (
            f"kda_gate_rank={cfg.kda_gate_rank} differs from kda_head_dim={cfg.kda_head_dim}: kimi_linear's "
            "decay-gate and output-gate projections have rank equal to the head dim"
        )
    if cfg.moe_layers:
        if cfg.router_scoring != "sigmoid":
            return f"router_scoring={cfg.router_scoring!r}: kimi_linear's router always scores with a sigmoid"
        if cfg.n_shared == 0:
            return "n_shared=0: every kimi_linear MoE layer has a shared expert"
        if cfg.n_experts // cfg.n_groups < 2:
            return (
                f"{cfg.n_experts // cfg.n_groups} expert per group (n_experts={cfg.n_experts}, n_groups="
                f"{cfg.n_groups}): kimi_linear scores a group by its two best experts, so groups need at least 2"
            )
    return None


def export_target(cfg: ModelConfig, target: str = "auto", mxfp4: bool = False) -> str:
    """The target export_pretrained writes: "kimi_linear" or "native"; ValueError when the request cannot be met."""
    if target not in TARGETS:
        raise ValueError(f"target={target!r} must be one of {TARGETS}")
    reason = kimi_linear_incompatibility(cfg)
    if target == KIMI_LINEAR:
        if reason is not None:
            raise ValueError(f"config {cfg.name!r} is not exportable as kimi_linear: {reason}")
        if mxfp4:
            raise ValueError(
                "mxfp4=True with target='kimi_linear': transformers loads MXFP4 weights only into gpt-oss experts, "
                "so a kimi_linear directory cannot hold MXFP4 experts; use target='native' or mxfp4=False"
            )
        return KIMI_LINEAR
    if target == "auto" and reason is None and not mxfp4:
        return KIMI_LINEAR
    return "native"


def kimi_linear_config(
    cfg: ModelConfig, tokenizer: JointTokenizer | None = None, dtype: torch.dtype = torch.float32
) -> dict:
    """config.json of the kimi_linear export, with the key names of the Kimi Linear hub checkpoints."""
    reason = kimi_linear_incompatibility(cfg)
    if reason is not None:
        raise ValueError(f"config {cfg.name!r} is not exportable as kimi_linear: {reason}")
    # Hub configs number layers from 1.
    kda_layers = [i + 1 for i, kind in enumerate(cfg.layer_pattern) if kind == "K"]
    mla_layers = [i + 1 for i, kind in enumerate(cfg.layer_pattern) if kind == "L"]
    return {
        "architectures": ["KimiLinearForCausalLM"],
        "model_type": KIMI_LINEAR,
        "dtype": str(dtype).removeprefix("torch."),
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.dim,
        "num_hidden_layers": cfg.n_layers,
        "intermediate_size": cfg.dense_hidden,
        "hidden_act": "silu",
        "rms_norm_eps": cfg.norm_eps,
        "model_max_length": cfg.max_seq_len,
        "initializer_range": cfg.init_std,
        "tie_word_embeddings": False,
        "use_cache": True,
        "num_attention_heads": cfg.attn_heads,
        "num_key_value_heads": cfg.attn_heads,
        "q_lora_rank": cfg.q_lora_rank or None,
        "kv_lora_rank": cfg.kv_lora_rank,
        "qk_nope_head_dim": cfg.qk_nope_dim,
        # Unrotated (mla_rope False) or absent: kimi_linear keeps the dims and never rotates them.
        "qk_rope_head_dim": cfg.qk_rope_dim,
        "v_head_dim": cfg.v_head_dim,
        "mla_use_nope": True,
        "linear_attn_config": {
            "kda_layers": kda_layers,
            "full_attn_layers": mla_layers,
            "num_heads": cfg.kda_heads,
            "head_dim": cfg.kda_head_dim,
            "short_conv_kernel_size": cfg.kda_conv_size,
        },
        "first_k_dense_replace": cfg.first_dense_layers,
        "moe_layer_freq": 1,
        "num_experts": cfg.n_experts,
        "num_experts_per_token": cfg.n_active,
        "num_shared_experts": cfg.n_shared,
        "moe_intermediate_size": cfg.expert_hidden,
        "moe_router_activation_func": "sigmoid",
        "moe_renormalize": cfg.norm_topk_prob,
        "routed_scaling_factor": cfg.route_scale,
        "use_grouped_topk": True,
        "num_expert_group": cfg.n_groups,
        "topk_group": cfg.topk_groups,
        "num_nextn_predict_layers": 0,
        **_token_ids(tokenizer),
    }


def kimi_linear_state_dict(cfg: ModelConfig, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Full-precision jointrl weights renamed (and split per expert) as in the Kimi Linear hub checkpoints."""
    out: dict[str, torch.Tensor] = {}
    used: set[str] = set()

    def take(src: str, dst: str) -> None:
        out[dst] = state[src]
        used.add(src)

    def take_under(prefix: str, dst_prefix: str, skip: str | None = None) -> None:
        for name in [n for n in state if n.startswith(prefix)]:
            rest = name[len(prefix) :]
            if skip is None or not rest.startswith(skip):
                take(name, dst_prefix + rest)

    take("embed.weight", "model.embed_tokens.weight")
    for i in range(cfg.n_layers):
        src, dst = f"layers.{i}.", f"model.layers.{i}."
        take(src + "attn_norm.weight", dst + "input_layernorm.weight")
        take(src + "ffn_norm.weight", dst + "post_attention_layernorm.weight")
        take_under(src + "attn.", dst + "self_attn.")
        if cfg.layer_kind(i) == "K":
            # The hub keeps A_log as [1, 1, H, 1]; jointrl keeps [H].
            out[dst + "self_attn.A_log"] = state[src + "attn.A_log"].reshape(1, 1, -1, 1)
        if not cfg.is_moe(i):
            take_under(src + "ffn.", dst + "mlp.")
            continue
        moe = dst + "block_sparse_moe."
        take_under(src + "ffn.", moe, skip="experts.")
        for ours, theirs in _KIMI_EXPERT_NAMES.items():
            stacked = state[src + "ffn.experts." + ours]  # [E, out, in]
            for e in range(cfg.n_experts):
                # Clones: safetensors refuses tensors that share storage.
                out[f"{moe}experts.{e}.{theirs}.weight"] = stacked[e].clone()
            used.add(src + "ffn.experts." + ours)
    take("norm.weight", "model.norm.weight")
    # Cloned so a tied head is stored as its own tensor (kimi_linear never ties).
    out["lm_head.weight"] = state.get("lm_head.weight", state["embed.weight"]).clone()
    used.add("lm_head.weight")
    left = sorted(set(state) - used)
    if left:
        raise ValueError(f"the kimi_linear export has no place for these weights: {left}")
    return out


def modules_to_not_convert(cfg: ModelConfig) -> list[str]:
    """Every module an MXFP4 export keeps in full precision: all but the routed experts."""
    names = ["embed"]
    for i in range(cfg.n_layers):
        names += [f"layers.{i}.attn_norm", f"layers.{i}.attn", f"layers.{i}.ffn_norm"]
        if cfg.is_moe(i):
            names.append(f"layers.{i}.ffn.gate")
            if cfg.n_shared:
                names.append(f"layers.{i}.ffn.shared_experts")
        else:
            names.append(f"layers.{i}.ffn")
    return names + ["norm", "lm_head"]


def generation_config(tokenizer: JointTokenizer) -> dict:
    """generation_config.json: stop at end of sequence or end of turn; pad and bos from the tokenizer."""
    return {
        "bos_token_id": tokenizer.bos_id,
        "eos_token_id": [tokenizer.eos_id, tokenizer.eot_id],
        "pad_token_id": tokenizer.pad_id,
    }


def export_pretrained(
    model: Transformer,
    out_dir: str | Path,
    tokenizer: JointTokenizer | None = None,
    mxfp4: bool = False,
    target: str = "auto",
    max_shard_bytes: int = checkpoint.DEFAULT_SHARD_BYTES,
) -> Path:
    """Write `model` to out_dir for transformers' AutoModelForCausalLM (see the module docstring); returns out_dir."""
    cfg = model.cfg
    chosen = export_target(cfg, target, mxfp4)
    if mxfp4 and cfg.moe_layers and (cfg.dim % _MXFP4_BLOCK or cfg.expert_hidden % _MXFP4_BLOCK):
        raise ValueError(
            f"mxfp4=True needs dim ({cfg.dim}) and expert_hidden ({cfg.expert_hidden}) to be multiples of "
            f"{_MXFP4_BLOCK}"
        )
    dtype = model.embed.weight.dtype
    state = _full_precision_state(model)
    with checkpoint.staged_directory(out_dir) as staging:
        if chosen == KIMI_LINEAR:
            weights, config = kimi_linear_state_dict(cfg, state), kimi_linear_config(cfg, tokenizer, dtype)
        else:
            weights, config = _native_files(cfg, state, tokenizer, mxfp4, dtype)
            for name, source in modeling_files().items():
                (staging / name).write_text(source)
        checkpoint.save_state(staging, weights, max_shard_bytes)
        (staging / checkpoint.CONFIG_FILE).write_text(json.dumps(config, indent=2))
        if tokenizer is not None:
            tokenizer.save(staging)
            (staging / GENERATION_CONFIG_FILE).write_text(json.dumps(generation_config(tokenizer), indent=2))
    return Path(out_dir)


def _full_precision_state(model: Transformer) -> dict[str, torch.Tensor]:
    """The model's tensors with MXFP4-held experts (a model loaded with mxfp4="keep") decoded back."""
    state = model.state_dict()
    if any(name.endswith(BLOCKS_SUFFIX) for name in state):
        state = dequantize_state_dict(state, dtype=model.embed.weight.dtype)
    return state


def _native_files(
    cfg: ModelConfig,
    state: dict[str, torch.Tensor],
    tokenizer: JointTokenizer | None,
    mxfp4: bool,
    dtype: torch.dtype,
) -> tuple[dict[str, torch.Tensor], dict]:
    """Weights and config.json of a native export: jointrl names, auto_map for the remote code."""
    if cfg.tie_embeddings:
        # safetensors refuses aliased tensors; loading re-ties the head.
        state = {k: v for k, v in state.items() if k != "lm_head.weight"}
    config = {
        **checkpoint.config_dict(cfg),
        "auto_map": AUTO_MAP,
        "dtype": str(dtype).removeprefix("torch."),
        "tie_word_embeddings": cfg.tie_embeddings,
        **_token_ids(tokenizer),
    }
    if mxfp4:
        state = mxfp4_state_dict(state)
        config["quantization_config"] = quantization_config(modules_to_not_convert(cfg))
    return state, config


def _token_ids(tokenizer: JointTokenizer | None) -> dict:
    if tokenizer is None:
        # Explicit nulls: kimi_linear's defaults are ids of the 163840-token Kimi vocabulary.
        return {"bos_token_id": None, "eos_token_id": None, "pad_token_id": None}
    return {"bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id, "pad_token_id": tokenizer.pad_id}
