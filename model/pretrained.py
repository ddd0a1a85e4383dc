"""Reading a checkpoint of either kind, jointrl's own or a transformers one to import: config, weights and tokenizer.

A recipe's `model: {from_pretrained: DIR}` starts here. DIR is told apart by its config.json's model_type:
jointrl_moe (a jointrl checkpoint or native export) is read as saved; kimi_linear / deepseek_v3 / deepseek_v32
are imported on the fly by jointrl.model.hf_import. load_tokenizer gives jointrl's tokenizer or the imported
one (jointrl.model.hf_tokenizer) for any checkpoint; it is not in jointrl.model.checkpoint because that module
ships inside native exports, which carry no tokenizer code.
"""
from __future__ import annotations

import json
from pathlib import Path

from jointrl.model import chat, checkpoint
from jointrl.model.config import ModelConfig
from jointrl.model.hf_import import SUPPORTED_TYPES, import_config, import_state_dict, read_hf_config
from jointrl.model.hf_tokenizer import TEMPLATE_FILE, HFTokenizer
from jointrl.model.tokenizer import JointTokenizer
from jointrl.model.transformer import Transformer


def checkpoint_kind(directory: str | Path) -> str:
    """'jointrl' or 'transformers' for a directory a run can start from; ValueError naming it otherwise."""
    directory = Path(directory)
    path = directory / checkpoint.CONFIG_FILE
    if not path.is_file():
        raise ValueError(f"{directory}: no {checkpoint.CONFIG_FILE}; not a checkpoint directory")
    model_type = json.loads(path.read_text()).get("model_type")
    if model_type == checkpoint.MODEL_TYPE:
        return "jointrl"
    if model_type in SUPPORTED_TYPES:
        return "transformers"
    raise ValueError(f"{path}: model_type {model_type!r} is neither jointrl's ({checkpoint.MODEL_TYPE}) nor one "
                     f"that imports ({', '.join(SUPPORTED_TYPES)})")


def pretrained_config(directory: str | Path) -> ModelConfig:
    """The ModelConfig of a jointrl checkpoint, or the one a transformers checkpoint imports as."""
    if checkpoint_kind(directory) == "jointrl":
        return checkpoint.read_config(directory)
    return import_config(read_hf_config(directory))


def load_pretrained(directory: str | Path, cfg: ModelConfig) -> Transformer:
    """A trainable model of `cfg` holding a checkpoint's weights (every tensor must fit, as from_pretrained demands)."""
    if checkpoint_kind(directory) == "jointrl":
        if checkpoint.is_mxfp4(directory):
            raise ValueError(f"{directory}: MXFP4 experts do not train; start from the full-precision checkpoint")
        state = {k.removeprefix(checkpoint.HF_BASE_PREFIX): v for k, v in checkpoint.load_state(directory).items()}
    else:
        state, _ = import_state_dict(directory)
    model = Transformer(cfg)
    if cfg.tie_embeddings:
        state.pop("lm_head.weight", None)
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as err:
        # Shape mismatches: a recipe override changed a size the weights fix.
        raise ValueError(f"{directory}: weights do not fit model config {cfg.name!r}: {str(err).splitlines()[1:3]}") from None
    if cfg.tie_embeddings:
        missing = [m for m in missing if m != "lm_head.weight"]
        model.lm_head.weight = model.embed.weight
    if missing or unexpected:
        raise ValueError(f"{directory}: weights do not fit model config {cfg.name!r}: missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    return model.train()


def load_tokenizer(directory: str | Path):
    """The tokenizer a checkpoint holds: JointTokenizer for jointrl's chat format, else the imported HFTokenizer."""
    directory = Path(directory)
    if not (directory / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{directory}: no tokenizer.json; save the checkpoint with its tokenizer")
    config_path = directory / "tokenizer_config.json"
    template = json.loads(config_path.read_text()).get("chat_template") if config_path.is_file() else None
    if (directory / TEMPLATE_FILE).is_file():
        template = (directory / TEMPLATE_FILE).read_text()
    # jointrl's own tokenizers always carry its template; one without any template is read as jointrl's (and refused
    # there if it lacks the format's tokens).
    if template is None or template in (chat.chat_template(), chat.chat_template(thinking_kwargs=False)):
        return JointTokenizer.load(directory)
    return HFTokenizer(directory)


def check_vocab(tokenizer, vocab_size: int, where: str | Path) -> None:
    """Raise unless the tokenizer fills the embedding (jointrl's) or fits in it (an imported one: hubs pad the rows)."""
    size = tokenizer.vocab_size
    if size > vocab_size or (size != vocab_size and isinstance(tokenizer, JointTokenizer)):
        raise ValueError(f"{where}: tokenizer has {size} tokens but the model's vocab_size is {vocab_size}")
