"""The model and tokenizer sections: a preset or a checkpoint resolved into ModelConfig fields."""
from __future__ import annotations

import difflib
from typing import Any

import yaml
from pydantic import Field

import jointrl.model.presets as presets
from jointrl.rl.config.section import Section, fail_at


PRESET_KEY = "preset"
PRETRAINED_KEY = "from_pretrained"


class TokenizerConfig(Section):
    """The tokenizer: an existing one on disk, or a byte-level BPE trained locally (vocab size from `model`)."""

    path: str | None = Field(
        None, description="Directory holding tokenizer.json and tokenizer_config.json; null trains one locally."
    )
    seed: int = Field(0, ge=0, description="Seed of the synthetic corpus the tokenizer is trained on.")
    n_samples: int = Field(20000, gt=0, description="Number of synthetic text samples in the training corpus.")


def _unknown_preset_message(name: str) -> str:
    """The error text for a preset name that neither the code table nor recipes/models/ knows."""
    known = presets.preset_names()
    hint = difflib.get_close_matches(name, known, n=1)
    suffix = f" (did you mean {hint[0]!r}?)" if hint else f"; known: {', '.join(known)}"
    return f"unknown model preset {name!r}{suffix}"


def preset_fields(name: str) -> dict[str, Any]:
    """The unvalidated ModelConfig fields of a code or file preset."""
    if name in presets.PRESETS:
        return presets.PRESETS[name].model_dump()
    path = presets.preset_path(name)
    if path is None:
        fail_at("ModelConfig", (PRESET_KEY,), _unknown_preset_message(name), name)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        fail_at("ModelConfig", (PRESET_KEY,), f"{path}: invalid YAML: {exc}", name)
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        fail_at("ModelConfig", (PRESET_KEY,), f"{path} holds no `model:` mapping", name)
    return dict(data["model"])


def pretrained_fields(path: Any) -> dict[str, Any]:
    """The ModelConfig fields of the checkpoint `model.from_pretrained` names (jointrl's, or transformers' imported)."""
    from jointrl.model.pretrained import pretrained_config

    if not isinstance(path, str) or not path:
        fail_at("ModelConfig", (PRETRAINED_KEY,), f"expected a checkpoint directory, got {path!r}", path)
    try:
        return pretrained_config(path).model_dump()
    except ValueError as err:
        fail_at("ModelConfig", (PRETRAINED_KEY,), str(err), path)
