"""A `train` driver process whose memory the driver-memory test reads (run as `python -m tests.rl.driver_memory`).

`init DIR EXPERTS` writes a random MoE checkpoint with EXPERTS routed experts per layer (most of its parameters)
and a tokenizer; `train DIR RUN_DIR` runs the ep2_cpu recipe's RL (two learner ranks splitting the experts, two
rollout workers) from it for two steps with a checkpoint, and prints one JSON line: this process's resident
memory before `train` and its peak during it.
"""
from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

RECIPE = "ep2_cpu"
SHAPE = {"dim": 256, "expert_hidden": 512, "dense_hidden": 512}


def overrides(experts: int, run_dir: Path) -> list[str]:
    """The ep2_cpu recipe with wide expert banks and the shortest episodes; no eval (it gathers the policy here)."""
    return [
        *(f"model.{k}={v}" for k, v in SHAPE.items()), f"model.n_experts={experts}",
        "rollout.workers=2", "rollout.group_size=2", "rollout.max_turns=1", "rollout.max_new_tokens_per_turn=8",
        "rollout.max_new_tokens_per_episode=8", "rollout.tiers.low=4", "trainer.steps=2", "trainer.prompts_per_step=2",
        "trainer.eval_every=0", "checkpoint.every=2", "tracking.wandb_mode=disabled", "tracking.console=false",
        f"tracking.run_dir={run_dir}",
    ]


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_init(directory: Path, experts: int) -> int:
    """A random policy of the recipe's shape with `experts` experts per MoE layer; returns its parameter count."""
    import torch

    from jointrl.model.checkpoint import save_pretrained
    from jointrl.model.tokenizer import train_tokenizer
    from jointrl.model.transformer import Transformer
    from jointrl.rl.recipe import load_recipe

    cfg = load_recipe(RECIPE, overrides(experts, directory / "unused"))
    torch.manual_seed(0)
    model = Transformer(cfg.model)
    tokenizer = train_tokenizer(["What is 2 + 3? The answer is 5."] * 8, vocab_size=cfg.model.vocab_size)
    save_pretrained(model, directory, tokenizer=tokenizer)
    return sum(p.numel() for p in model.parameters())


def run_train(init: Path, run_dir: Path, experts: int) -> dict:
    """RL steps from init; this process's memory before and at its peak."""
    from jointrl.rl.recipe import load_recipe
    from jointrl.rl.trainer import train

    cfg = load_recipe(RECIPE, overrides(experts, run_dir))
    before = peak_rss_mib()
    result = train(cfg, init=init, overwrite=True)
    return {"before_mib": before, "peak_mib": peak_rss_mib(), "steps": result.steps,
            "checkpoint": str(result.checkpoint)}


def main(argv: list[str]) -> int:
    command, directory, experts = argv[0], Path(argv[1]), int(argv[2])
    if command == "init":
        print(json.dumps({"parameters": write_init(directory, experts)}))
    else:
        print(json.dumps(run_train(directory, Path(argv[3]), experts)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
