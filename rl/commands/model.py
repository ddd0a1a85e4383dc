"""The `jointrl model ...` commands: parameter counts, layer kinds and memory of presets and checkpoints."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table


def _gib(nbytes: float) -> str:
    return f"{nbytes / 1024**3:,.2f} GiB" if nbytes >= 1024**3 else f"{nbytes / 1024**2:,.2f} MiB"


def _params(n: int) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:,.3f}{unit} ({n:,})"
    return f"{n:,}"


def add_info_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a preset name (jointrl model presets) or a checkpoint directory")
    parser.add_argument("--context", type=int, default=131072, help="context length for the inference-state sizes")


def run_info(args: argparse.Namespace) -> int:
    """Print parameter counts, layer kinds and memory of a preset or checkpoint."""
    from jointrl.model.checkpoint import read_config
    from jointrl.model.info import model_info as compute
    from jointrl.model.presets import load_preset

    cfg = read_config(args.model) if Path(args.model).is_dir() else load_preset(args.model)
    if args.context <= 0:
        raise ValueError(f"--context must be positive, got {args.context}")
    info = compute(cfg, context=args.context)
    table = Table(title=f"model {info.name}", show_header=False)
    table.add_row("total parameters", _params(info.total_params))
    table.add_row("active parameters / token", _params(info.active_params))
    table.add_row("routed expert parameters", _params(info.routed_expert_params))
    table.add_row("embedding + head parameters", _params(info.embedding_params))
    table.add_row("layers", f"{cfg.n_layers}: " + ", ".join(f"{n} {k}" for k, n in info.layers_by_kind.items() if n))
    table.add_row("MoE layers", f"{info.moe_layers} x {cfg.n_experts} experts, top-{cfg.n_active}, {cfg.n_shared} shared")
    table.add_row("weights, bf16", _gib(info.weights_bf16_bytes))
    table.add_row("weights, MXFP4 experts", _gib(info.weights_mxfp4_bytes))
    table.add_row(f"attention KV cache @ {info.context:,} tokens", _gib(info.attn_cache_bytes))
    table.add_row("delta-attention state (any length)", _gib(info.kda_state_bytes))
    table.add_row("inference state per token", f"{info.state_bytes_per_token:,.1f} B")
    Console(soft_wrap=True).print(table)
    return 0


def add_presets_arguments(parser: argparse.ArgumentParser) -> None:
    """`model presets` takes no arguments."""


def run_presets(args: argparse.Namespace) -> int:
    """List the model presets."""
    from jointrl.model.presets import preset_names, preset_path

    for name in preset_names():
        path = preset_path(name)
        print(f"{name}\t{path if path else '(built in)'}")
    return 0
