"""`jointrl export CKPT OUT [--mxfp4] [--target auto|native|kimi_linear]`: a checkpoint as a transformers directory.

CKPT is a model directory, a run checkpoint holding `model/`, or a checkpoint root (its newest complete
step). The writing is jointrl.model.export.export_pretrained (its docstring describes the targets); this
module loads the checkpoint and its tokenizer, checks the request and reports what was written.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

TARGETS = ("auto", "native", "kimi_linear")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl export`."""
    parser.add_argument("checkpoint", help="model directory, run checkpoint (with model/), or checkpoint root")
    parser.add_argument("out", help="directory to write; replaced whole if it exists")
    parser.add_argument("--mxfp4", action="store_true", help="store the routed experts as MXFP4 (native target only)")
    parser.add_argument(
        "--target", choices=TARGETS, default="auto",
        help="kimi_linear (transformers' own model), native (jointrl remote code), auto (kimi_linear when possible)",
    )


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def run(args: argparse.Namespace) -> int:
    """The `jointrl export` command."""
    from jointrl.model.checkpoint import from_pretrained
    from jointrl.model.pretrained import load_tokenizer
    from jointrl.model.export import export_pretrained, export_target
    from jointrl.rl.run_checkpoint import model_dir

    console = Console(soft_wrap=True)
    source = model_dir(args.checkpoint)
    out = Path(args.out)
    if out.resolve() == source.resolve() or source.resolve() in out.resolve().parents:
        raise ValueError(f"export directory {out} must not be the checkpoint {source} or lie inside it")
    model = from_pretrained(source)
    # Fail on an impossible target before loading anything else.
    target = export_target(model.cfg, args.target, args.mxfp4)
    tokenizer = load_tokenizer(source) if (source / "tokenizer.json").is_file() else None
    if tokenizer is None:
        console.print(f"note: {source} has no tokenizer; the export holds weights and config only")
    export_pretrained(model, out, tokenizer=tokenizer, mxfp4=args.mxfp4, target=target)
    files = sorted(p.name for p in out.iterdir())
    console.print(
        f"exported {source} ({model.cfg.name}) as {target}{' with MXFP4 experts' if args.mxfp4 else ''} -> {out} "
        f"({_size(out) / 1024**2:,.1f} MiB: {', '.join(files)})"
    )
    return 0
