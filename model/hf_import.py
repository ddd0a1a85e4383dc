"""Import a transformers checkpoint of type kimi_linear, deepseek_v3 or deepseek_v32 as a jointrl ModelConfig + weights.

Shape legend: E = routed experts, F = expert width, D = dim, P = delta-attention q/k/v channels (heads x
head dim), W = short-conv kernel, H = delta-attention heads.

Config: each config.json field is mapped onto ModelConfig, listed in _IGNORED (it does not change what the
model computes), or refused with a ValueError naming field and value (something jointrl does not compute:
YaRN rope scaling, another activation than silu, attention biases, FP8 weights, ...). Fields this module does
not know are refused too, since they may change the model.

Weights are read shard by shard (model.safetensors.index.json, or one model.safetensors) and renamed or
reshaped as each tensor is read; a layer's per-expert projections are stacked when its last expert arrives.
Both layouts import: per-expert experts.{e}.{w1,w2,w3 | gate_proj,up_proj,down_proj} (hub files and what
transformers writes) or stacked experts.gate_up_proj [E, 2F, D] / experts.down_proj [E, D, F]; q/k/v_conv1d
or one stacked conv1d [3P, 1, W]; forget-gate weights flat or under forget_gate.; MoE and dense FFNs under
mlp. or block_sparse_moe.. Multi-token-prediction layers (num_nextn_predict_layers, stored as layers n ..
n + k - 1) are skipped with a note; any other unknown or missing tensor is an error naming it.

Published models vs jointrl's defaults (checked against DeepSeek-V3.2-Exp's inference/model.py and Kimi
Linear's modeling_kimi.py; transformers 5.24 computes the same):
  - The latent-attention norms (query and KV latent RMSNorms, the indexer's key LayerNorm) use eps 1e-6
    whatever rms_norm_eps says (Kimi Linear: 1e-5 elsewhere), so imports set latent_norm_eps = 1e-6.
  - Kimi Linear's latent attention keeps qk_rope_head_dim dims in queries and the shared key but never
    rotates them (mla_use_nope), so imports set mla_rope = False.
  - The DSA indexer rotates its leading qk_rope_head_dim dims in the split-halves layout while latent
    attention rotates interleaved pairs (DeepSeek fixed its demo code to this on 2025-11-17); jointrl
    already does both. DeepSeek's Hadamard transform of index queries and keys is orthogonal and its FP8
    scoring a precision choice: jointrl and transformers score in full precision.
  - Equal index scores (ReLU zeros) may be broken differently: jointrl ranks the later slot first,
    DeepSeek and transformers leave it to torch.topk.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from pydantic import ValidationError
from safetensors import safe_open

from jointrl.model.checkpoint import CONFIG_FILE, INDEX_FILE, WEIGHTS_FILE
from jointrl.model.config import ModelConfig
from jointrl.model.transformer import Transformer

SUPPORTED_TYPES = ("kimi_linear", "deepseek_v3", "deepseek_v32")
# DeepSeek's and Kimi's reference RMSNorm / LayerNorm default, used inside latent attention.
LATENT_NORM_EPS = 1e-6

# Fields that do not change what the model computes: identity, token ids, runtime switches, values
# transformers derives from others, and training-time balancing losses (jointrl's own settings govern training).
_IGNORED = frozenset({
    "architectures", "auto_map", "model_type", "transformers_version", "torch_dtype", "dtype", "_name_or_path",
    "bos_token_id", "eos_token_id", "pad_token_id", "use_cache", "output_router_logits", "pretraining_tp",
    "tokenizer_class", "return_dict", "output_hidden_states", "output_attentions",
    "head_dim", "qk_head_dim",
    "aux_loss_alpha", "seq_aux", "ep_size", "router_aux_loss_coef",
})
# Fields that only matter for rotary embeddings, which Kimi Linear's latent attention never applies.
_KIMI_ROPE_FIELDS = ("rope_theta", "rope_scaling", "rope_parameters")
_LINEAR_ATTN_KEYS = {"kda_layers", "full_attn_layers", "num_heads", "head_dim", "short_conv_kernel_size"}
# transformers' defaults for fields a config may leave out (sizes are always required).
_DEFAULTS = {
    "kimi_linear": {"rms_norm_eps": 1e-5, "routed_scaling_factor": 2.446, "n_group": 1, "topk_group": 1,
                    "first_k_dense_replace": 1, "max_position_embeddings": 1048576},
    "deepseek_v3": {"rms_norm_eps": 1e-6, "routed_scaling_factor": 2.5, "n_group": 8, "topk_group": 4,
                    "first_k_dense_replace": 3, "max_position_embeddings": 4096},
    "deepseek_v32": {"rms_norm_eps": 1e-6, "routed_scaling_factor": 2.5, "n_group": 8, "topk_group": 4,
                     "first_k_dense_replace": 3, "max_position_embeddings": 163840},
}
_REQUIRED = object()


class _Fields:
    """config.json fields, each taken once under any of its names; refusals gather until `finish`."""

    def __init__(self, data: dict, model_type: str):
        self.data = dict(data)
        self.model_type = model_type
        self.problems: list[str] = []

    def take(self, *names: str, default=_REQUIRED):
        """The value under the first of `names` present (aliases must agree), else the default."""
        found = {n: self.data.pop(n) for n in names if n in self.data}
        values = list(found.values())
        if any(v != values[0] for v in values[1:]):
            self.refuse(" / ".join(found), values, "aliases of one field disagree")
        if values:
            return values[0]
        if default is _REQUIRED:
            raise ValueError(f"{self.model_type} config has no {' / '.join(names)} field")
        return default

    def refuse(self, name: str, value, why: str) -> None:
        self.problems.append(f"{name}={value!r}: {why}")

    def expect(self, name: str, default, allowed: tuple, why: str):
        """Take a field whose value must be one of `allowed`."""
        value = self.take(name, default=default)
        if value not in allowed:
            self.refuse(name, value, why)
        return value

    def finish(self) -> None:
        for name in sorted(self.data):
            self.refuse(name, self.data[name], f"not a field jointrl knows for {self.model_type}")
        if self.problems:
            raise ValueError(f"cannot import this {self.model_type} config: " + "; ".join(self.problems))


def read_hf_config(directory: str | Path) -> dict:
    """config.json of a transformers checkpoint directory."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: no such directory")
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no {CONFIG_FILE}; is {directory} a transformers checkpoint?")
    return json.loads(path.read_text())


def import_config(hf_config: dict) -> ModelConfig:
    """The ModelConfig computing what a kimi_linear / deepseek_v3 / deepseek_v32 config.json describes."""
    model_type = hf_config.get("model_type")
    if model_type not in SUPPORTED_TYPES:
        raise ValueError(f"model_type {model_type!r} cannot be imported; supported: {', '.join(SUPPORTED_TYPES)}")
    f = _Fields(hf_config, model_type)
    defaults = _DEFAULTS[model_type]
    for name in _IGNORED & set(f.data):
        f.take(name)
    n_layers = f.take("num_hidden_layers")
    fields = {
        "name": model_type,
        "vocab_size": f.take("vocab_size"),
        "dim": f.take("hidden_size"),
        "dense_hidden": f.take("intermediate_size"),
        "norm_eps": f.take("rms_norm_eps", default=defaults["rms_norm_eps"]),
        "max_seq_len": f.take("max_position_embeddings", "model_max_length",
                              default=defaults["max_position_embeddings"]),
        "init_std": f.take("initializer_range", default=0.02),
        "tie_embeddings": f.take("tie_word_embeddings", default=False),
    }
    f.expect("hidden_act", "silu", ("silu",), "jointrl's FFNs, experts and short convs use SiLU only")
    if quant := f.take("quantization_config", default=None):
        f.refuse("quantization_config", quant, "quantized weights do not import; dequantize them to bf16 first")
    fields |= _latent_attention(f, model_type)
    fields |= _moe(f, defaults, n_layers)
    if model_type == "kimi_linear":
        fields |= _kimi_layers(f, n_layers)
        if fields["tie_embeddings"]:
            f.refuse("tie_word_embeddings", True, "transformers' kimi_linear never ties the head, Kimi's code does; "
                     "which one the checkpoint means is unclear")
    else:
        fields |= _deepseek_layers(f, model_type, n_layers)
    if model_type == "deepseek_v32":
        # The indexer rotates as many leading dims as latent attention has rotary dims.
        fields["index_rope_dim"] = fields["qk_rope_dim"]
    # MTP layers are not part of the model; import_state_dict skips their weights.
    f.take("num_nextn_predict_layers", "num_mtp_layers", default=0)
    f.finish()
    try:
        return ModelConfig(**fields)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"this {model_type} config gives no valid jointrl model: {problems}") from None


def _latent_attention(f: _Fields, model_type: str) -> dict:
    """Latent-attention fields, alike in all three types (kimi_linear's never rotates)."""
    heads = f.take("num_attention_heads")
    kv_heads = f.take("num_key_value_heads", default=None)
    if kv_heads not in (None, heads):
        f.refuse("num_key_value_heads", kv_heads, f"latent attention has one KV head per query head ({heads})")
    q_lora = f.take("q_lora_rank")
    if q_lora is None and model_type == "deepseek_v32":
        f.refuse("q_lora_rank", None, "deepseek_v32's indexer reads the query latent, so it needs a q_lora_rank")
    f.expect("attention_bias", False, (False,), "jointrl's attention projections have no bias")
    f.expect("attention_dropout", 0.0, (0, 0.0), "jointrl's attention has no dropout")
    fields = {
        "attn_heads": heads,
        "q_lora_rank": q_lora or 0,
        "kv_lora_rank": f.take("kv_lora_rank"),
        "qk_nope_dim": f.take("qk_nope_head_dim"),
        "qk_rope_dim": f.take("qk_rope_head_dim"),
        "v_head_dim": f.take("v_head_dim"),
        "attn_output_gate": False,
        "latent_norm_eps": LATENT_NORM_EPS,
    }
    if model_type == "kimi_linear":
        f.expect("mla_use_nope", True, (True,), "kimi_linear's latent attention never rotates (NoPE)")
        for name in _KIMI_ROPE_FIELDS:
            f.take(name, default=None)
        return fields | {"mla_rope": False}
    return fields | {"mla_rope": True, "rope_theta": _rope_theta(f)}


def _rope_theta(f: _Fields) -> float:
    """The rotary base of plain rope; any scaling (YaRN, linear, dynamic, ...) is refused."""
    params = dict(f.take("rope_parameters", default=None) or {})
    scaling = f.take("rope_scaling", default=None)
    theta = f.take("rope_theta", default=None)
    theta = params.pop("rope_theta", theta)
    for source, spec in (("rope_parameters", params), ("rope_scaling", dict(scaling or {}))):
        kind = spec.pop("rope_type", spec.pop("type", "default"))
        if kind != "default":
            f.refuse(f"{source}.rope_type", kind, "jointrl's rotary embedding has no scaling; only plain rope imports")
        elif spec:
            f.refuse(source, spec, "plain rope takes no further parameters")
    f.expect("rope_interleave", True, (True,), "jointrl's latent attention rotates interleaved pairs only")
    return 10000.0 if theta is None else float(theta)


def _moe(f: _Fields, defaults: dict, n_layers: int) -> dict:
    """Router, experts and which layers are MoE."""
    shared = f.take("n_shared_experts", "num_shared_experts", default=1)
    groups = f.take("n_group", "num_expert_group", default=defaults["n_group"])
    sigmoid_only = "transformers' deepseek_v3 and kimi_linear always route with a sigmoid, so only that imports"
    f.expect("scoring_func", "sigmoid", ("sigmoid",), sigmoid_only)
    f.expect("moe_router_activation_func", "sigmoid", ("sigmoid",), sigmoid_only)
    f.expect("topk_method", "noaux_tc", ("noaux_tc",), "only bias-corrected group top-k (noaux_tc) imports")
    if not f.take("use_grouped_topk", default=True) and groups != 1:
        f.refuse("use_grouped_topk", False, f"with n_group={groups}: transformers groups experts anyway; ambiguous")
    f.expect("moe_layer_freq", 1, (1,), "jointrl has MoE in every layer after the first dense ones")
    f.expect("mlp_bias", False, (False,), "jointrl's FFNs have no bias")
    first_dense = f.take("first_k_dense_replace", default=None)
    mlp_types = f.take("mlp_layer_types", default=None)
    if mlp_types is not None:
        dense = next((i for i, kind in enumerate(mlp_types) if kind != "dense"), len(mlp_types))
        if len(mlp_types) != n_layers or any(kind != "sparse" for kind in mlp_types[dense:]):
            f.refuse("mlp_layer_types", mlp_types, "jointrl needs dense layers first, then only sparse ones")
        elif first_dense is not None and min(first_dense, n_layers) != dense:
            f.refuse("first_k_dense_replace", first_dense, f"disagrees with mlp_layer_types ({dense} dense)")
        first_dense = dense
    return {
        "n_experts": f.take("n_routed_experts", "num_experts", "num_local_experts"),
        "n_active": f.take("num_experts_per_tok", "num_experts_per_token"),
        # num_shared_experts None (Kimi's own config) means none.
        "n_shared": shared or 0,
        "expert_hidden": f.take("moe_intermediate_size"),
        "router_scoring": "sigmoid",
        "route_scale": f.take("routed_scaling_factor", default=defaults["routed_scaling_factor"]),
        "norm_topk_prob": f.take("norm_topk_prob", "moe_renormalize", default=True),
        "n_groups": groups,
        "topk_groups": f.take("topk_group", default=defaults["topk_group"]),
        "first_dense_layers": min(defaults["first_k_dense_replace"] if first_dense is None else first_dense, n_layers),
    }


def _kimi_layers(f: _Fields, n_layers: int) -> dict:
    """Delta (K) and latent (L) layers and the delta-attention sizes of a kimi_linear config."""
    linear = dict(f.take("linear_attn_config", default=None) or {})
    for key in sorted(set(linear) - _LINEAR_ATTN_KEYS):
        f.refuse(f"linear_attn_config.{key}", linear[key], "not part of kimi_linear as transformers computes it")
    sizes = {}
    for key, flat, default in (("num_heads", "linear_num_heads", 32), ("head_dim", "linear_head_dim", 128),
                               ("short_conv_kernel_size", "linear_conv_kernel_dim", 4)):
        top = f.take(flat, default=None)
        sizes[key] = linear.get(key, default if top is None else top)
        if top is not None and top != sizes[key]:
            f.refuse(flat, top, f"disagrees with linear_attn_config.{key}={sizes[key]}")
    kinds = {"linear_attention": "K", "full_attention": "L"}
    if "kda_layers" in linear and "full_attn_layers" in linear:
        # Hub configs number layers from 1.
        pattern = ["?"] * n_layers
        for key, kind in (("kda_layers", "K"), ("full_attn_layers", "L")):
            for layer in linear[key]:
                if not 1 <= layer <= n_layers or pattern[layer - 1] != "?":
                    f.refuse(f"linear_attn_config.{key}", linear[key], f"layer {layer} is out of range or listed twice")
                else:
                    pattern[layer - 1] = kind
        pattern = "".join(pattern)
    else:
        # transformers' default: latent attention at layers 4, 8, ... (0-based), delta attention elsewhere.
        pattern = "".join("L" if i and i % 4 == 0 else "K" for i in range(n_layers))
    layer_types = f.take("layer_types", default=None)
    if layer_types is not None:
        from_types = "".join(kinds.get(kind, "?") for kind in layer_types)
        if "kda_layers" in linear and from_types != pattern:
            f.refuse("layer_types", layer_types, f"disagrees with linear_attn_config (layers {pattern})")
        pattern = from_types
    if len(pattern) != n_layers or "?" in pattern:
        f.refuse("layer kinds", pattern, f"need one of {sorted(kinds)} for each of the {n_layers} layers")
        pattern = "K" * n_layers
    return {
        "layer_pattern": pattern,
        "kda_heads": sizes["num_heads"],
        "kda_head_dim": sizes["head_dim"],
        # kimi_linear's decay- and output-gate projections have rank = head dim.
        "kda_gate_rank": sizes["head_dim"],
        "kda_conv_size": sizes["short_conv_kernel_size"],
    }


def _deepseek_layers(f: _Fields, model_type: str, n_layers: int) -> dict:
    """All latent (deepseek_v3) or all sparse (deepseek_v32) layers, and the indexer sizes."""
    # Placeholders: ModelConfig needs delta-attention sizes, which no layer of these models uses.
    fields = {"kda_heads": 1, "kda_head_dim": 1, "kda_gate_rank": 1}
    if model_type == "deepseek_v3":
        return fields | {"layer_pattern": "L" * n_layers}
    layer_types = f.take("layer_types", default=None)
    if layer_types is not None and set(layer_types) != {"indexed_attention"}:
        f.refuse("layer_types", layer_types, "deepseek_v32 layers are all indexed_attention")
    return fields | {
        "layer_pattern": "S" * n_layers,
        "index_heads": f.take("index_n_heads"),
        "index_head_dim": f.take("index_head_dim"),
        "index_topk": f.take("index_topk"),
    }


_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
_TOP_LEVEL = {"model.embed_tokens.weight": "embed.weight", "model.norm.weight": "norm.weight",
              "lm_head.weight": "lm_head.weight"}
_BLOCK_NORMS = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight"}
# Routed-expert projections: the hub's w1 / w3 / w2 and transformers' gate / up / down.
_EXPERT_PROJ = {"w1": "gate_proj", "w3": "up_proj", "w2": "down_proj",
                "gate_proj": "gate_proj", "up_proj": "up_proj", "down_proj": "down_proj"}
_PER_EXPERT = re.compile(r"^experts\.(\d+)\.(\w+)\.weight$")
# jointrl name -> transformers name, for error messages about missing tensors.
_HF_NAMES = ((r"^embed\.", "model.embed_tokens."), (r"^norm\.", "model.norm."), (r"\.attn_norm\.", ".input_layernorm."),
             (r"\.ffn_norm\.", ".post_attention_layernorm."), (r"\.attn\.", ".self_attn."), (r"\.ffn\.", ".mlp."),
             (r"^layers\.", "model.layers."))
_LISTED = 6


def _listing(names: list[str]) -> str:
    more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return ", ".join(names[:_LISTED]) + more


def _hf_name(ours: str) -> str:
    for pattern, repl in _HF_NAMES:
        ours = re.sub(pattern, repl, ours)
    return ours


class _Converter:
    """Turns checkpoint tensors, one at a time, into jointrl's state dict, checking every name and shape."""

    def __init__(self, cfg: ModelConfig, mtp_layers: range):
        with torch.device("meta"):
            self.shapes = {k: tuple(v.shape) for k, v in Transformer(cfg).state_dict().items()}
        if cfg.tie_embeddings:
            del self.shapes["lm_head.weight"]
        self.cfg = cfg
        self.mtp_layers = mtp_layers
        self.state: dict[str, torch.Tensor] = {}
        self.experts: dict[str, dict[int, torch.Tensor]] = {}  # stacked name -> expert -> [out, in]
        self.unexpected: list[str] = []
        self.skipped: dict[str, int] = {}  # why -> tensors

    def add(self, name: str, tensor: torch.Tensor) -> None:
        """Convert one tensor, named as in the checkpoint."""
        layer = _LAYER.match(name)
        if name == "lm_head.weight" and self.cfg.tie_embeddings:
            self._skip("lm_head.weight (tie_word_embeddings: the head is the embedding)")
        elif name in _TOP_LEVEL:
            self._put(_TOP_LEVEL[name], tensor, name)
        elif layer is None:
            self.unexpected.append(name)
        elif int(layer[1]) in self.mtp_layers:
            self._skip(f"multi-token-prediction layers {self.mtp_layers.start}..{self.mtp_layers.stop - 1}")
        else:
            prefix, rest = f"layers.{layer[1]}.", layer[2]
            part, _, sub = rest.partition(".")
            if rest in _BLOCK_NORMS:
                self._put(prefix + _BLOCK_NORMS[rest], tensor, name)
            elif part == "self_attn":
                self._attention(prefix + "attn.", sub, tensor, name)
            elif part in ("mlp", "block_sparse_moe"):
                self._ffn(prefix + "ffn.", sub, tensor, name)
            else:
                self.unexpected.append(name)

    def _attention(self, prefix: str, sub: str, tensor: torch.Tensor, name: str) -> None:
        sub = sub.removeprefix("forget_gate.")
        if sub == "conv1d.weight":
            # transformers' runtime layout stacks the q, k and v short convs: [3P, 1, W].
            for part, chunk in zip("qkv", tensor.chunk(3)):
                self._put(f"{prefix}{part}_conv1d.weight", chunk.clone(), name)
        elif sub == "A_log":
            # Kimi's files hold [1, 1, H, 1]; jointrl holds [H].
            self._put(prefix + sub, tensor.reshape(-1), name)
        else:
            self._put(prefix + sub, tensor, name)

    def _ffn(self, prefix: str, sub: str, tensor: torch.Tensor, name: str) -> None:
        expert = _PER_EXPERT.match(sub)
        if expert is not None and expert[2] in _EXPERT_PROJ:
            self._expert(prefix + "experts." + _EXPERT_PROJ[expert[2]], int(expert[1]), tensor, name)
        elif sub == "experts.gate_up_proj":
            # [E, 2F, D]: the gate rows, then the up rows.
            gate, up = tensor.chunk(2, dim=1)
            self._put(prefix + "experts.gate_proj", gate.clone(), name)
            self._put(prefix + "experts.up_proj", up.clone(), name)
        elif sub == "experts.down_proj":
            self._put(prefix + "experts.down_proj", tensor, name)
        elif sub.startswith("shared_experts.") and self.cfg.n_shared == 0 and tensor.numel() == 0:
            # transformers builds zero-width shared experts for n_shared_experts = 0.
            self._skip("empty shared-expert tensors (no shared experts)")
        elif sub == "gate.e_score_correction_bias":
            # The balancing bias stays fp32 (its steps are below bf16 resolution).
            self._put(prefix + sub, tensor.float(), name)
        else:
            self._put(prefix + sub, tensor, name)

    def _expert(self, target: str, index: int, tensor: torch.Tensor, name: str) -> None:
        expected = self.shapes.get(target)
        if expected is None or not 0 <= index < expected[0]:
            self.unexpected.append(name)
            return
        pieces = self.experts.setdefault(target, {})
        if index in pieces or target in self.state:
            raise ValueError(f"{name}: a second tensor for expert {index} of jointrl's {target}")
        if tuple(tensor.shape) != expected[1:]:
            raise ValueError(f"{name}: shape {tuple(tensor.shape)}, but the config implies {expected[1:]}")
        pieces[index] = tensor
        if len(pieces) == expected[0]:
            # Every expert arrived: one [E, out, in] tensor, and the pieces go.
            self._put(target, torch.stack([pieces[e] for e in range(expected[0])]), name)
            del self.experts[target]

    def _put(self, ours: str, tensor: torch.Tensor, name: str) -> None:
        expected = self.shapes.get(ours)
        if expected is None:
            self.unexpected.append(name)
            return
        if tuple(tensor.shape) != expected:
            raise ValueError(f"{name}: shape {tuple(tensor.shape)}, but the config implies {expected} ({ours})")
        if ours in self.state:
            raise ValueError(f"{name}: a second tensor for jointrl's {ours}")
        self.state[ours] = tensor

    def _skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def finish(self) -> tuple[dict[str, torch.Tensor], list[str]]:
        """The state dict and notes on what was skipped; ValueError naming unexpected and missing tensors."""
        missing = [_hf_name(n) for n in sorted(set(self.shapes) - set(self.state) - set(self.experts))]
        for target, pieces in self.experts.items():
            absent = [e for e in range(self.shapes[target][0]) if e not in pieces]
            missing.append(f"{_hf_name(target)} of experts {absent}")
        problems = []
        if self.unexpected:
            problems.append(f"{len(self.unexpected)} unexpected tensors: {_listing(self.unexpected)}")
        if missing:
            problems.append(f"{len(missing)} missing tensors: {_listing(missing)}")
        if problems:
            raise ValueError(f"the checkpoint does not match its {self.cfg.name} config: " + "; ".join(problems))
        return self.state, [f"skipped {count} tensors: {why}" for why, count in self.skipped.items()]


def _weight_files(directory: Path) -> list[tuple[Path, list[str] | None]]:
    """(file, tensor names or None for all) per safetensors file, one file at a time."""
    if (directory / WEIGHTS_FILE).is_file():
        return [(directory / WEIGHTS_FILE, None)]
    index = directory / INDEX_FILE
    if not index.is_file():
        raise FileNotFoundError(f"{directory}: neither {WEIGHTS_FILE} nor {INDEX_FILE}")
    by_file: dict[str, list[str]] = {}
    for name, file in json.loads(index.read_text())["weight_map"].items():
        by_file.setdefault(file, []).append(name)
    return [(directory / file, names) for file, names in sorted(by_file.items())]


def import_state_dict(
    directory: str | Path, hf_config: dict | None = None
) -> tuple[dict[str, torch.Tensor], list[str]]:
    """jointrl's state dict from a checkpoint's safetensors (shard by shard), and notes on skipped tensors."""
    directory = Path(directory)
    hf_config = read_hf_config(directory) if hf_config is None else hf_config
    cfg = import_config(hf_config)
    mtp = hf_config.get("num_nextn_predict_layers", hf_config.get("num_mtp_layers")) or 0
    converter = _Converter(cfg, range(cfg.n_layers, cfg.n_layers + mtp))
    for path, names in _weight_files(directory):
        with safe_open(str(path), framework="pt") as shard:
            present = set(shard.keys())
            for name in present if names is None else names:
                if name not in present:
                    raise ValueError(f"{path}: no tensor {name}, which {INDEX_FILE} places there")
                converter.add(name, shard.get_tensor(name))
    return converter.finish()


def import_pretrained(directory: str | Path) -> tuple[Transformer, list[str]]:
    """The jointrl model a transformers checkpoint directory holds (eval mode), and notes on skipped tensors."""
    hf_config = read_hf_config(directory)
    cfg = import_config(hf_config)
    state, notes = import_state_dict(directory, hf_config)
    with torch.device("meta"):
        model = Transformer(cfg)
    # assign=True makes the tensors just read the parameters, instead of copying them into new ones.
    model.load_state_dict(state, strict=False, assign=True)
    if cfg.tie_embeddings:
        model.lm_head.weight = model.embed.weight
    assert not any(t.is_meta for t in model.state_dict().values()), "the converter checked every tensor is present"
    return model.eval(), notes
