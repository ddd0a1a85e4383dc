"""`jointrl eval CKPT [RECIPE] [KEY=VALUE...]`: evaluate a checkpoint on held-out seeds; print a table, write JSON.

CKPT is a model directory (save_pretrained), a run checkpoint holding `model/`, or a checkpoint root (its
newest complete step). The recipe supplies the rollout limits, the reward table and the held-out seed
range; by default it is the recipe.yaml stored with the checkpoint, else the shipped quickstart recipe.
With --against BASE, BASE plays the same tasks with the same sampling seed, and the command prints the paired
change per family with its bootstrap 95% CI (jointrl.rl.significance): whether the checkpoint is better than BASE,
not only whether its pass rate is higher. The computation lives in jointrl.rl.evaluate; this module is the command
around it.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from jointrl.envs.base import TIERS
from jointrl.rl.config.run import RunConfig

DEFAULT_RECIPE = "quickstart"
DEFAULT_SEEDS = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `jointrl eval`."""
    parser.add_argument("checkpoint", help="model directory, run checkpoint (with model/), or checkpoint root")
    parser.add_argument(
        "recipe", nargs="?", default=None,
        help="recipe file or shipped name (default: the checkpoint's recipe.yaml, else quickstart)",
    )
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="settings applied on top of the recipe")
    parser.add_argument("--envs", help="env-id glob(s), comma-separated (default: the recipe's envs.mix globs)")
    parser.add_argument(
        "--seeds", help=f"held-out seeds A:B (half-open) or A (default: the first {DEFAULT_SEEDS} of envs.eval_seeds)"
    )
    parser.add_argument("--tiers", help="comma-separated tiers to play every task in (default: the recipe's selection)")
    parser.add_argument("--samples", type=int, default=1, help="samples per task (K); pass@k is reported when K > 1")
    parser.add_argument(
        "--temperature", type=float, default=None,
        help="sampling temperature (default: 0 = greedy with one sample, else rollout.temperature)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampling generator")
    parser.add_argument(
        "--against", metavar="BASE",
        help="a second checkpoint (e.g. the SFT one) to play the same tasks: print the paired change per family "
        "with its 95%% CI",
    )
    parser.add_argument("--out", help="write the summary as JSON to this file")


def parse_seeds(text: str | None, cfg: RunConfig) -> list[int]:
    """Seeds from 'A:B' (half-open) or 'A'; None gives the first DEFAULT_SEEDS held-out seeds."""
    held_out = cfg.envs.eval_seeds
    if text is None:
        return list(range(held_out.start, min(held_out.stop, held_out.start + DEFAULT_SEEDS)))
    start, sep, stop = text.partition(":")
    try:
        first = int(start)
        last = int(stop) if sep else first + 1
    except ValueError:
        raise ValueError(f"--seeds {text!r}: expected A:B or A with integers") from None
    if last <= first:
        raise ValueError(f"--seeds {text!r}: the range [{first}, {last}) is empty")
    return list(range(first, last))


def parse_tiers(text: str | None) -> list[str] | None:
    """Tiers from 'low,high'; None keeps the recipe's tier selection."""
    if text is None:
        return None
    tiers = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in tiers if t not in TIERS]
    if unknown or not tiers:
        raise ValueError(f"--tiers {text!r}: tiers are {', '.join(TIERS)}")
    return tiers


def _recipe_and_overrides(args: argparse.Namespace) -> tuple[str | None, list[str]]:
    """argparse fills the optional recipe slot with the first KEY=VALUE when no recipe is named; undo that."""
    from jointrl.rl.recipe import find_recipe

    recipe, overrides = args.recipe, list(args.overrides)
    if recipe is not None and "=" in recipe and find_recipe(recipe) is None:
        return None, [recipe, *overrides]
    return recipe, overrides


def run(args: argparse.Namespace) -> int:
    """The `jointrl eval` command."""
    import torch

    from jointrl.model.checkpoint import from_pretrained
    from jointrl.model.pretrained import check_vocab, load_tokenizer
    from jointrl.rl.evaluate import evaluate, print_summary
    from jointrl.rl.progress import output_console
    from jointrl.rl.recipe import load_recipe
    from jointrl.rl.run_checkpoint import model_dir, stored_recipe, write_json
    from jointrl.rl.significance import print_comparison

    console = output_console()
    if args.samples < 1:
        raise ValueError(f"--samples must be >= 1, got {args.samples}")
    if args.temperature is not None and args.temperature < 0:
        raise ValueError(f"--temperature must be >= 0, got {args.temperature}")
    directory = model_dir(args.checkpoint)
    base_dir = model_dir(args.against) if args.against else None
    recipe, overrides = _recipe_and_overrides(args)
    if recipe is None:
        stored = stored_recipe(args.checkpoint)
        recipe = str(stored) if stored is not None else DEFAULT_RECIPE
    cfg = load_recipe(recipe, overrides)
    seeds = parse_seeds(args.seeds, cfg)
    tiers = parse_tiers(args.tiers)
    globs = [g.strip() for g in args.envs.split(",") if g.strip()] if args.envs else [e.glob for e in cfg.envs.mix]
    if not globs:
        raise ValueError(f"--envs {args.envs!r} names no glob")
    temperature = args.temperature if args.temperature is not None else (
        0.0 if args.samples == 1 else cfg.rollout.temperature
    )

    device = "cuda" if torch.cuda.is_available() else "cpu"

    def play(checkpoint: Path):
        model = from_pretrained(checkpoint, device=device)
        tokenizer = load_tokenizer(checkpoint)
        check_vocab(tokenizer, model.cfg.vocab_size, checkpoint)
        console.print(f"checkpoint {checkpoint} ({model.cfg.name}) | recipe {recipe} | envs {', '.join(globs)} | "
                      f"seeds {seeds[0]}..{seeds[-1]} | samples {args.samples} | temperature {temperature:g}")
        played = evaluate(model, tokenizer, cfg, globs, seeds, temperature=temperature, max_rows=cfg.rollout.max_rows,
                          tiers=tiers, samples=args.samples, seed=args.seed, console=console)
        played.settings.update(checkpoint=str(checkpoint), recipe=recipe, envs=globs)
        title = (f"{len(played.settings['env_ids'])} envs x {len(seeds)} held-out seeds x {args.samples} "
                 f"sample{'s' * (args.samples > 1)}")
        print_summary(played, console, title)
        return played

    summary = play(directory)
    data = summary.to_json()
    if base_dir is not None:
        base = play(base_dir)
        changes = print_comparison(
            base, summary, console, names=("against", "checkpoint"),
            title=f"held-out pass rate on the same tasks: {base_dir} vs {directory} (paired bootstrap 95% CI)",
        )
        data |= {"against": base.to_json(), "changes": [c.to_json() for c in changes]}
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(out, data)
        console.print(f"wrote {out}")
    return 0
