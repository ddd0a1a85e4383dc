"""Checkpoint directories: config.json + safetensors weights (sharded above a size) + tokenizer files.

A directory whose config.json holds an MXFP4 `quantization_config` stores each routed-expert projection as
`<name>_blocks` / `<name>_scales` (see jointrl.model.mxfp4); from_pretrained keeps those experts quantized
or dequantizes them on load.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import torch
from safetensors.torch import load_file, save_file

from jointrl.model.config import ModelConfig
from jointrl.model.mxfp4 import MXFP4Experts, dequantize_state_dict
from jointrl.model.transformer import Transformer

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
MODEL_TYPE = "jointrl_moe"
DEFAULT_SHARD_BYTES = 4 * 1024**3
MXFP4_MODES = ("keep", "dequantize")
# transformers' save_pretrained of an exported model writes the base model's tensors under this prefix.
HF_BASE_PREFIX = "model."


def config_dict(cfg: ModelConfig) -> dict:
    """The config.json content of a native checkpoint."""
    return {"model_type": MODEL_TYPE, "architectures": ["JointRLForCausalLM"], **cfg.model_dump()}


def _read_config_json(directory: str | Path) -> dict:
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no {CONFIG_FILE}; is {directory} a checkpoint directory?")
    data = json.loads(path.read_text())
    if data.get("model_type") != MODEL_TYPE:
        raise ValueError(f"{path}: model_type {data.get('model_type')!r} is not {MODEL_TYPE!r}")
    return data


def read_config(directory: str | Path) -> ModelConfig:
    """The ModelConfig stored in a checkpoint directory."""
    data = _read_config_json(directory)
    fields = {k: v for k, v in data.items() if k in ModelConfig.model_fields}
    return ModelConfig(**fields)


def is_mxfp4(directory: str | Path) -> bool:
    """Whether a checkpoint stores its routed experts as MXFP4 (config.json has an mxfp4 quantization_config)."""
    quant = _read_config_json(directory).get("quantization_config")
    if quant is None:
        return False
    method = quant.get("quant_method") if isinstance(quant, dict) else None
    if method != "mxfp4":
        raise ValueError(f"{directory}: quantization_config quant_method {method!r} is not supported (only 'mxfp4')")
    return True


def split_by_bytes(state: Mapping[str, torch.Tensor], max_bytes: int) -> list[dict[str, torch.Tensor]]:
    """Whole tensors, in order, grouped into parts of at most max_bytes (a larger tensor gets a part alone)."""
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in state.items():
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > max_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    return shards


def save_state(directory: Path, state: dict[str, torch.Tensor], max_shard_bytes: int = DEFAULT_SHARD_BYTES) -> None:
    """Write tensors as one safetensors file, or shards plus an index when larger than a shard."""
    state = {k: v.detach().contiguous().cpu() for k, v in state.items()}
    shards = split_by_bytes(state, max_shard_bytes)
    if len(shards) == 1:
        save_file(shards[0], str(directory / WEIGHTS_FILE), metadata={"format": "pt"})
        return
    weight_map = {}
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(directory / name), metadata={"format": "pt"})
        weight_map.update({key: name for key in shard})
    total = sum(t.numel() * t.element_size() for t in state.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / INDEX_FILE).write_text(json.dumps(index, indent=2))


def load_state(directory: str | Path) -> dict[str, torch.Tensor]:
    """Read every tensor of a checkpoint directory (single file or sharded)."""
    directory = Path(directory)
    if (directory / WEIGHTS_FILE).is_file():
        return load_file(str(directory / WEIGHTS_FILE))
    index_path = directory / INDEX_FILE
    if not index_path.is_file():
        raise FileNotFoundError(f"{directory}: neither {WEIGHTS_FILE} nor {INDEX_FILE}")
    state: dict[str, torch.Tensor] = {}
    for shard in sorted(set(json.loads(index_path.read_text())["weight_map"].values())):
        state.update(load_file(str(directory / shard)))
    return state


@contextmanager
def staged_directory(directory: str | Path) -> Iterator[Path]:
    """Yield an empty sibling folder to fill; on success it replaces `directory`, on error it is removed."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        yield staging
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def save_pretrained(
    model: Transformer, directory: str | Path, tokenizer=None, max_shard_bytes: int = DEFAULT_SHARD_BYTES
) -> Path:
    """Write a self-contained checkpoint; the directory appears whole or not at all."""
    with staged_directory(directory) as staging:
        state = model.state_dict()
        if model.cfg.tie_embeddings:
            # safetensors refuses aliased tensors; the head is re-tied on load.
            state.pop("lm_head.weight")
        save_state(staging, state, max_shard_bytes)
        (staging / CONFIG_FILE).write_text(json.dumps(config_dict(model.cfg), indent=2))
        if tokenizer is not None:
            tokenizer.save(staging)
    return Path(directory)


def use_mxfp4_experts_(model: Transformer) -> None:
    """Give every MoE layer empty MXFP4Experts (the buffers an MXFP4 checkpoint fills), in place."""
    cfg = model.cfg
    device = model.embed.weight.device
    for i in model.moe_layers:
        model.layers[i].ffn.experts = MXFP4Experts(cfg.n_experts, cfg.dim, cfg.expert_hidden, device=device)


def from_pretrained(
    directory: str | Path,
    device: str | torch.device = "cpu",
    mxfp4: Literal["keep", "dequantize"] = "keep",
) -> Transformer:
    """Build the model a checkpoint describes and load its weights (strict: every tensor must match).

    Reads jointrl's own checkpoints and native exports, and what transformers' save_pretrained writes from a
    native export loaded with trust_remote_code (the base model's tensors under `model.`).

    For an MXFP4 checkpoint, mxfp4="keep" holds the routed experts as MXFP4Experts (decoded on the fly,
    inference only) and "dequantize" restores full-precision, trainable experts; other checkpoints ignore it.
    """
    if mxfp4 not in MXFP4_MODES:
        raise ValueError(f"mxfp4={mxfp4!r} must be one of {MXFP4_MODES}")
    cfg = read_config(directory)
    quantized = is_mxfp4(directory)
    # Built for real, not on meta: layers may hold non-persistent buffers that a checkpoint lacks.
    with torch.device(device):
        model = Transformer(cfg)
        if quantized and mxfp4 == "keep":
            use_mxfp4_experts_(model)
    # jointrl's names never start with the prefix, so stripping it reads both layouts.
    state = {name.removeprefix(HF_BASE_PREFIX): tensor for name, tensor in load_state(directory).items()}
    if quantized and mxfp4 == "dequantize":
        state = dequantize_state_dict(state, dtype=model.embed.weight.dtype)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if cfg.tie_embeddings:
        missing = [m for m in missing if m != "lm_head.weight"]
        model.lm_head.weight = model.embed.weight
    if missing or unexpected:
        raise ValueError(f"{directory}: checkpoint does not match its config: missing {missing}, unexpected {unexpected}")
    return model
