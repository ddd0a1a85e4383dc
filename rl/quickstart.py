"""The quickstart job: the whole job end to end on CPU in minutes — cold start, joint RL, before/after evaluation.

recipe → demonstrations played by the recipe's environments → tokenizer → supervised cold start →
held-out evaluation of the SFT checkpoint → joint RL (`jointrl train`: Ray rollout workers, reward mixer,
DeepSpeed learner, weight sync, checkpoints) → held-out evaluation of the RL policy on the same tasks →
a table of pass rates before and after RL, per domain.
"""
from __future__ import annotations

import time

from rich.console import Console

from jointrl.model.info import model_info
from jointrl.rl.cold_start import cold_start
from jointrl.rl.config.run import RunConfig
from jointrl.rl.evaluate import print_summary
from jointrl.rl.significance import print_comparison
from jointrl.rl.trainer import evaluate_state, train


def quickstart(cfg: RunConfig, console: Console, name: str, *, overwrite: bool = False) -> None:
    """Run the quickstart job on the recipe `name` (resolved to cfg) and print what each stage produced.

    A run directory that holds an earlier quickstart is refused unless overwrite, which deletes its outputs.
    """
    began = time.perf_counter()
    console.rule(f"recipe {name}")
    mix = ", ".join(f"{m.glob} x{m.weight:g}" for m in cfg.envs.mix)
    info = model_info(cfg.model, context=cfg.model.max_seq_len)
    console.print(
        f"model {cfg.model.name} ({cfg.model.layer_pattern}: {info.total_params / 1e6:.2f}M parameters, "
        f"{info.active_params / 1e6:.2f}M active) | envs {mix} | algorithm {cfg.algorithm.name}"
    )

    console.rule("supervised cold start")
    start = cold_start(cfg, console, overwrite=overwrite)
    sft_state = start.model.state_dict()
    seeds = f"seeds {cfg.envs.eval_seeds.start}..{cfg.envs.eval_seeds.start + cfg.trainer.eval_seeds_per_env - 1}"

    console.rule("held-out evaluation of the SFT checkpoint")
    before = evaluate_state(cfg, start.tokenizer, sft_state, start.env_ids, console)
    print_summary(before, console, f"SFT checkpoint: {len(start.env_ids)} envs x held-out {seeds}")

    console.rule(f"joint RL: {cfg.trainer.steps} steps of {cfg.algorithm.name}")
    result = train(cfg, init=start.checkpoint, overwrite=overwrite, console=console, keep_state=True)

    console.rule("held-out evaluation after RL")
    after = evaluate_state(cfg, start.tokenizer, result.state, start.env_ids, console)
    print_summary(after, console, f"after {result.steps} RL steps: same tasks")
    print_comparison(before, after, console,
                     title="held-out pass rate on the same tasks: SFT checkpoint vs after RL (paired bootstrap 95% CI)")
    console.print(f"quickstart finished in {time.perf_counter() - began:.0f}s; RL checkpoint {result.checkpoint}")
