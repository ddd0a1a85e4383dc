"""Named model presets in one table; the full-scale ones live as YAML under recipes/models/."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from jointrl.model.config import ModelConfig

PRESETS: dict[str, ModelConfig] = {
    # Unit tests: every layer kind, MoE with shared expert, < 1M parameters.
    "debug": ModelConfig(
        name="debug", vocab_size=512, dim=64, layer_pattern="KSKL", first_dense_layers=1, dense_hidden=128,
        max_seq_len=512, kda_heads=2, kda_head_dim=16, kda_gate_rank=16, kda_chunk_size=16,
        attn_heads=2, q_lora_rank=32, kv_lora_rank=32, qk_nope_dim=16, qk_rope_dim=8, v_head_dim=16,
        index_heads=2, index_head_dim=16, index_rope_dim=8, index_topk=8,
        n_experts=8, n_active=2, n_shared=1, expert_hidden=32, route_scale=1.0,
    ),
    # The debug model in a form transformers' kimi_linear expresses exactly (export tests): delta and
    # latent attention only, no output gates, NoPE latent attention.
    "debug-kimi": ModelConfig(
        name="debug-kimi", vocab_size=512, dim=64, layer_pattern="KLKL", first_dense_layers=1, dense_hidden=128,
        max_seq_len=512, kda_heads=2, kda_head_dim=16, kda_gate_rank=16, kda_chunk_size=16,
        attn_heads=2, q_lora_rank=32, kv_lora_rank=32, qk_nope_dim=16, qk_rope_dim=0, v_head_dim=16,
        attn_output_gate=False, n_experts=8, n_active=2, n_shared=1, expert_hidden=32, route_scale=1.0,
    ),
    # The quickstart's: the debug shape with a real vocabulary (0.77M parameters). A forward + backward
    # runs ~18k tokens/s on one CPU core, 20x the tiny preset, and learns the quickstart's tasks no worse
    # at equal CPU time (docs/learning.md).
    "mini": ModelConfig(
        name="mini", vocab_size=4096, dim=64, layer_pattern="KSKL", first_dense_layers=1, dense_hidden=128,
        max_seq_len=1024, kda_heads=2, kda_head_dim=16, kda_gate_rank=16, kda_chunk_size=16,
        attn_heads=2, q_lora_rank=32, kv_lora_rank=32, qk_nope_dim=16, qk_rope_dim=8, v_head_dim=16,
        index_heads=2, index_head_dim=16, index_rope_dim=8, index_topk=8,
        n_experts=8, n_active=2, n_shared=1, expert_hidden=32, route_scale=1.0,
    ),
    # A few M parameters, trains on 2 CPU cores in minutes.
    "tiny": ModelConfig(
        name="tiny", vocab_size=4096, dim=192, layer_pattern="KKKS*2", first_dense_layers=1, dense_hidden=512,
        max_seq_len=2048, kda_heads=4, kda_head_dim=48, kda_gate_rank=48, kda_chunk_size=32,
        attn_heads=4, q_lora_rank=96, kv_lora_rank=96, qk_nope_dim=32, qk_rope_dim=16, v_head_dim=48,
        index_heads=4, index_head_dim=32, index_rope_dim=16, index_topk=128,
        n_experts=8, n_active=2, n_shared=1, expert_hidden=128, route_scale=1.0,
    ),
    # A GPU-friendly model for experiments: ~350M total, ~100M active.
    "small": ModelConfig(
        name="small", vocab_size=32768, dim=512, layer_pattern="KKKS*4", first_dense_layers=1, dense_hidden=1536,
        max_seq_len=8192, kda_heads=8, kda_head_dim=64, kda_gate_rank=64, kda_chunk_size=64,
        attn_heads=8, q_lora_rank=256, kv_lora_rank=256, qk_nope_dim=64, qk_rope_dim=32, v_head_dim=64,
        index_heads=8, index_head_dim=64, index_rope_dim=32, index_topk=512,
        n_experts=32, n_active=4, n_shared=1, expert_hidden=384, route_scale=2.0,
    ),
}


def _preset_dir() -> Path:
    return Path(str(resources.files("jointrl.recipes"))) / "models"


def preset_names() -> list[str]:
    """Every preset: the code table plus YAML files under recipes/models/."""
    files = sorted(p.stem for p in _preset_dir().glob("*.yaml")) if _preset_dir().is_dir() else []
    return sorted(set(PRESETS) | set(files))


def preset_path(name: str) -> Path | None:
    """The YAML file of a file-backed preset, or None for a code preset."""
    path = _preset_dir() / f"{name}.yaml"
    return path if path.is_file() else None


def load_preset(name: str) -> ModelConfig:
    """A preset by name; file presets hold a `model:` mapping of ModelConfig fields."""
    if name in PRESETS:
        return PRESETS[name].model_copy()
    path = preset_path(name)
    if path is None:
        raise ValueError(f"unknown model preset {name!r}; known: {', '.join(preset_names())}")
    data = yaml.safe_load(path.read_text())
    return ModelConfig(**data["model"])
