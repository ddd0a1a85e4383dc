"""`jointrl import HF_DIR OUT`: a transformers kimi_linear / deepseek_v3 / deepseek_v32 checkpoint, as jointrl's.

The mapping is jointrl.model.hf_import (its docstring lists what imports and what is refused); this module
checks the paths, writes OUT with jointrl.model.checkpoint.save_pretrained and reports what it wrote.
The tokenizer files (tokenizer.json, tokenizer_config.json, chat_template.jinja, special_tokens_map.json) are copied
as they are, after jointrl.model.hf_tokenizer has read them: the report names the tool-call format found in the
chat template and the stop token, or why the template cannot express tool calls.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl import`."""
    parser.add_argument("hf_dir", help="transformers checkpoint directory: config.json + safetensors weights")
    parser.add_argument("out", help="jointrl checkpoint directory to write; replaced whole if it exists")


def run(args: argparse.Namespace) -> int:
    """The `jointrl import` command."""
    from jointrl.model.checkpoint import save_pretrained
    from jointrl.model.pretrained import check_vocab
    from jointrl.model.hf_import import import_pretrained
    from jointrl.model.hf_tokenizer import TOKENIZER_FILE, HFTokenizer

    source, out = Path(args.hf_dir), Path(args.out)
    if not source.is_dir():
        raise FileNotFoundError(f"{source}: no such directory")
    if out.resolve() == source.resolve() or source.resolve() in out.resolve().parents:
        raise ValueError(f"output directory {out} must not be the checkpoint {source} or lie inside it")
    model, notes = import_pretrained(source)
    tokenizer = None
    if (source / TOKENIZER_FILE).is_file():
        tokenizer = HFTokenizer(source)
        check_vocab(tokenizer, model.cfg.vocab_size, source)
        tools = (f"{tokenizer.tool_format.name} tool calls" if tokenizer.tool_format
                 else f"no tool calls: {tokenizer.no_tools_reason}")
        notes.append(f"tokenizer: {tokenizer.vocab_size} tokens, chat template with {tools}, "
                     f"turns end with {tokenizer.eot}")
    else:
        others = sorted(p.name for p in source.glob("*.model")) or ["none"]
        notes.append(f"no {TOKENIZER_FILE} in {source} (tokenizer models: {', '.join(others)}): OUT gets no tokenizer; "
                     f"convert it to {TOKENIZER_FILE} to train or evaluate")
    save_pretrained(model, out, tokenizer=tokenizer)
    console = Console(soft_wrap=True)
    for note in notes:
        console.print(f"note: {note}")
    cfg = model.cfg
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    console.print(
        f"imported {source} ({cfg.name}: {cfg.n_layers} layers {cfg.layer_pattern}, {cfg.n_experts} experts) -> {out} "
        f"({size / 1024**2:,.1f} MiB{'' if tokenizer else '; no tokenizer'})"
    )
    return 0
