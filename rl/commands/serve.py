"""`jointrl serve CKPT [--host 127.0.0.1 --port 8000 --max-rows N --mxfp4]`: an OpenAI-compatible server.

CKPT is a model directory, a run checkpoint holding `model/`, or a checkpoint root (its newest complete step);
it must hold its tokenizer. Thinking budgets per tier come from `--budgets`, else from the recipe stored with
the checkpoint, else the recipe defaults. The server is jointrl.rl.serve (app, scheduler, protocol).
"""
from __future__ import annotations

import argparse

from rich.console import Console

TIERS = ("low", "high", "max")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl serve`."""
    parser.add_argument("checkpoint", help="model directory, run checkpoint (with model/), or checkpoint root")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    parser.add_argument("--max-rows", type=int, default=16, help="sequences generated at once (engine rows)")
    parser.add_argument("--mxfp4", action="store_true", help="hold the routed experts as MXFP4 (quantized on load)")
    parser.add_argument("--name", help="the model id clients send (default: CKPT as given)")
    parser.add_argument("--budgets", help="thinking tokens per tier, e.g. low=256,high=2048,max=8192")
    parser.add_argument("--default-tier", choices=TIERS, default="high", help="tier of requests that name none")
    parser.add_argument("--max-tokens", type=int, default=1024, help="completion tokens of requests that set none")


def parse_budgets(text: str | None, fallback: dict[str, int]) -> dict[str, int]:
    """`low=256,high=2048,max=8192` over the fallback budgets; a clear error names a bad entry."""
    budgets = dict(fallback)
    for part in (p.strip() for p in (text or "").split(",") if p.strip()):
        tier, _, value = part.partition("=")
        if tier.strip() not in TIERS or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"--budgets entry {part!r} is not TIER=TOKENS with TIER one of {', '.join(TIERS)}")
        budgets[tier.strip()] = int(value)
    if not budgets["low"] <= budgets["high"] <= budgets["max"]:
        raise ValueError(f"--budgets must grow from low to max, got {budgets}")
    return budgets


def run(args: argparse.Namespace) -> int:
    """The `jointrl serve` command."""
    import torch
    import uvicorn

    from jointrl.model.checkpoint import from_pretrained, use_mxfp4_experts_
    from jointrl.model.pretrained import load_tokenizer
    from jointrl.model.mxfp4 import MXFP4Experts, mxfp4_state_dict
    from jointrl.model.tokenizer import JointTokenizer
    from jointrl.rl.recipe import load_recipe
    from jointrl.rl.run_checkpoint import model_dir, stored_recipe
    from jointrl.rl.serve.app import ServedModel, build_app
    from jointrl.rl.serve.scheduler import Scheduler

    console = Console(soft_wrap=True)
    if args.max_rows < 1 or args.max_tokens < 1:
        raise ValueError("--max-rows and --max-tokens must be >= 1")
    directory = model_dir(args.checkpoint)
    if not (directory / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{directory}: no tokenizer.json; serve needs the checkpoint's tokenizer")
    stored = stored_recipe(args.checkpoint)
    fallback = load_recipe(str(stored)).rollout.tiers.model_dump() if stored else {"low": 512, "high": 4096, "max": 16384}
    budgets = parse_budgets(args.budgets, fallback)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = from_pretrained(directory, device=device, mxfp4="keep")
    if args.mxfp4 and not all(isinstance(model.layers[i].ffn.experts, MXFP4Experts) for i in model.moe_layers):
        state = mxfp4_state_dict(model.state_dict())
        use_mxfp4_experts_(model)
        model.load_state_dict(state)
    tokenizer = load_tokenizer(directory)
    if not isinstance(tokenizer, JointTokenizer):
        # The server streams and constrains tool calls by jointrl's own marker tokens.
        raise ValueError(f"{directory}: serve speaks jointrl's chat format only; this checkpoint's tokenizer and chat "
                         "template are imported (use jointrl eval, or serve it with transformers)")
    scheduler = Scheduler(model, tokenizer, max_rows=args.max_rows)
    # As vLLM does: the path as typed is the model id unless --name gives one.
    served = ServedModel(name=args.name or str(args.checkpoint), budgets=budgets, default_tier=args.default_tier, default_max_tokens=args.max_tokens)
    console.print(f"serving {directory} as {served.name!r} on http://{args.host}:{args.port}/v1 | rows "
                  f"{args.max_rows} | budgets {budgets} | {device}{' | MXFP4 experts' if args.mxfp4 else ''}")
    scheduler.start()
    try:
        uvicorn.run(build_app(scheduler, served), host=args.host, port=args.port, log_level="warning")
    finally:
        scheduler.stop()
    return 0
