"""`jointrl quickstart`: the whole pipeline that exists today, end to end on CPU in a few minutes.

recipe → demonstrations played by the recipe's environments → tokenizer trained on project and
environment text → the recipe's model → supervised cold start on the demonstrations → checkpoint →
reload → multi-turn, tool-calling evaluation on held-out seeds with the agent loop, printed per domain.
The RL stage joins between the cold start and the evaluation once it exists.
"""
from __future__ import annotations

import argparse

from rich.console import Console

from jointrl.model.checkpoint import from_pretrained
from jointrl.model.info import model_info
from jointrl.model.tokenizer import JointTokenizer
from jointrl.rl.cold_start import cold_start
from jointrl.rl.evaluate import evaluate, print_summary
from jointrl.rl.recipe import load_recipe


def run(args: argparse.Namespace) -> int:
    """Run the quickstart job and print what each stage produced."""
    console = Console(soft_wrap=True)
    cfg = load_recipe(args.recipe, args.overrides)
    console.rule(f"recipe {args.recipe}")
    mix = ", ".join(f"{m.glob} x{m.weight:g}" for m in cfg.envs.mix)
    info = model_info(cfg.model, context=cfg.model.max_seq_len)
    console.print(
        f"model {cfg.model.name} ({cfg.model.layer_pattern}: {info.total_params / 1e6:.2f}M parameters, "
        f"{info.active_params / 1e6:.2f}M active) | envs {mix} | algorithm {cfg.algorithm.name}"
    )

    console.rule("supervised cold start")
    start = cold_start(cfg, console)

    console.rule("held-out evaluation")
    model = from_pretrained(start.checkpoint)
    tokenizer = JointTokenizer.load(start.checkpoint)
    seeds = list(range(cfg.envs.eval_seeds.start, cfg.envs.eval_seeds.start + args.eval_seeds))
    summary = evaluate(model, tokenizer, cfg, start.env_ids, seeds)
    print_summary(summary, console, f"after the cold start: {len(start.env_ids)} envs x {len(seeds)} held-out seeds")
    example = max(summary.trajectories, key=lambda t: (t.episode.signals.get("success", 0.0), t.episode.turns))
    console.print(f"one episode ({example.episode.env_id}, seed {example.episode.seed}): "
                  f"{example.episode.turns} turns, signals {example.episode.signals}")
    return 0
