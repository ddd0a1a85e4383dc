"""`jointrl plan RECIPE`: print the per-GPU memory of the recipe's layout and the GPUs it needs (exit 1: does not fit)."""
from __future__ import annotations

import argparse

from jointrl.rl.commands.recipe import add_recipe_arguments
from jointrl.rl.config.run import RunConfig
from jointrl.rl.plan import GIB, ITEM_ORDER, Plan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl plan`."""
    add_recipe_arguments(parser)
    parser.add_argument(
        "--gpu-mem-gib", type=float, default=None,
        help="memory of every GPU in GiB (default: the recipe's plan.learner_gpu_mem_gib and plan.rollout_gpu_mem_gib)",
    )


def _gib(nbytes: float) -> str:
    return f"{nbytes / GIB:,.2f} GiB" if nbytes >= GIB / 10 else f"{nbytes / 1024**2:,.2f} MiB"


def print_plan(plan: Plan, cfg: RunConfig, console) -> None:
    """The layout, a rich table of per-GPU memory with one column per role, and the GPU count."""
    from rich.table import Table

    learner, rollout = cfg.learner, cfg.rollout
    console.print(
        f"model {cfg.model.name}: {plan.total_params / 1e9:,.1f}B parameters, {plan.routed_params / 1e9:,.1f}B in "
        f"routed experts\nlearner: {learner.ranks} ranks, EP {learner.ep_size}, ZeRO {learner.zero_stage}, "
        f"{learner.dtype}, {learner.micro_batch_tokens:,} tokens per micro-batch, activation checkpointing "
        f"{'on' if learner.activation_checkpointing else 'off'}\nrollout: {rollout.workers} workers x "
        f"{cfg.plan.gpus_per_worker} GPUs, {rollout.max_rows} rows x {plan.context:,} tokens, experts "
        f"{'MXFP4' if rollout.mxfp4_experts else 'bf16'}",
        highlight=False,
    )
    table = Table(title="memory per GPU")
    table.add_column("")
    table.add_column("learner rank", justify="right")
    table.add_column("rollout worker", justify="right")
    names = [n for n in ITEM_ORDER if n in plan.learner.items or n in plan.rollout.items]
    for name in names:
        table.add_row(name, *(_gib(p.items[name]) if name in p.items else "-" for p in (plan.learner, plan.rollout)))
    table.add_row("total", *(_gib(p.total) for p in (plan.learner, plan.rollout)), end_section=True)
    table.add_row("GPU memory", *(f"{p.capacity_gib:,.0f} GiB" for p in (plan.learner, plan.rollout)))
    table.add_row("fits", *("yes" if p.fits else "NO" for p in (plan.learner, plan.rollout)))
    table.add_row("GPUs", f"{plan.learner.gpus:,}", f"{plan.rollout.gpus:,}")
    console.print(table)
    verdict = "fits" if plan.fits else "does NOT fit"
    console.print(f"{plan.gpus:,} GPUs ({plan.learner.gpus:,} learner + {rollout.workers} x {cfg.plan.gpus_per_worker} "
                  f"rollout); the plan {verdict}", highlight=False)


def run(args: argparse.Namespace) -> int:
    """The `jointrl plan` command: 0 when the plan fits, 1 when a role does not."""
    from rich.console import Console

    from jointrl.rl.plan import make_plan
    from jointrl.rl.recipe import load_recipe

    cfg = load_recipe(args.recipe, args.overrides)
    plan = make_plan(cfg, args.gpu_mem_gib)
    print_plan(plan, cfg, Console(soft_wrap=True))
    return 0 if plan.fits else 1
