"""Does RL make the agent better? One SFT checkpoint, then RL arms compared on the same held-out tasks.

    python benchmarks/learning.py [RECIPE] [--arms sft,single,joint,learnability] [--eval-seeds N]
                                  [--eval-samples K] [--eval-offset M] [--sft-temperatures T,...]
                                  [--trainer-seeds S,...] [--cold-starts DIR] [--out DIR] [key=value ...]
    python benchmarks/learning.py --pool DIR,DIR,... [--out DIR]

From one supervised cold start (the recipe's `trainer.sft`), the arms are:
  sft           no RL: the cold-start checkpoint itself;
  single        RL on each domain of the mix alone (that domain's globs, the recipe's steps and prompts);
  joint         RL on the whole mix, the same steps and prompts per step as each single-domain arm;
  learnability  joint RL with `envs.mix_schedule: learnability` instead of the fixed mix.
Every policy is evaluated on the same held-out tasks (the recipe's eval seeds, which the config keeps at
or above the envs' held-out start), sampled at the rollout temperature, N seeds per env id x K samples.
The table gives each family's pass rate per arm and each arm's paired change from SFT with its bootstrap
95% CI (rl/significance.py), and transfer = joint - single per family, also paired. --sft-temperatures adds the
SFT checkpoint sampled at lower temperatures as control columns: RL that only sharpens the policy gains no more
than one of them. JSON (every change) and a PNG go to --out: per arm, the training reward per domain against step,
and the held-out pass rate per domain from the SFT checkpoint (step 0) to the arm's last step on the same tasks (with
the trainer's own evaluations in between where `trainer.eval_every` asks for them).

One cold start is one draw: its pass rates move with the initial weights more than RL moves them
(docs/learning.md). --trainer-seeds runs the whole benchmark once per `trainer.seed` (each into --out/seed-S) and
pools the changes over those cold starts with a hierarchical bootstrap (runs, then tasks; rl/significance.py).

Judging a change to the RL recipe: --cold-starts DIR takes each cold start from an earlier run's --out instead of
training it again (8 of the quickstart's 10 minutes), and --eval-offset M evaluates on the held-out seeds M on from
the recipe's first, so that choosing among RL variants does not tune them to the tasks a report is made on.
The earlier run's SFT evaluations are taken over too where they played the same tasks under the same envs, rewards
and rollout sections, from the same checkpoint files (each kept evaluation records them); any other is played again.

Every held-out evaluation is kept as it ends, as `jointrl eval --out` writes one, in <run>/evals/<arm>.json.
--pool DIR,DIR,... trains nothing: it pools the evaluations those runs kept (each a cold start's directory, an --out
or one seed-S of it), so that cold starts trained at different times make one table.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from jointrl.model.checkpoint import read_config
from jointrl.model.pretrained import load_pretrained, load_tokenizer
from jointrl.rl.cold_start import ColdStart, cold_start, demo_counts
from jointrl.rl.config.run import RunConfig
from jointrl.rl.demo_cache import tree_digest
from jointrl.rl.evaluate import EvalSummary, evaluate, summarize
from jointrl.rl.recipe import load_recipe
from jointrl.rl.progress import output_console
from jointrl.rl.significance import Change, compare_runs, family_of, task_pass_rates
from jointrl.rl.trainer import policy_from_state, train

ARMS = ("sft", "single", "joint", "learnability")
EVALS = "evals"  # a run's held-out evaluations, one JSON per arm


def with_envs(cfg: RunConfig, run_dir: Path, **envs) -> RunConfig:
    """A copy of the recipe with some `envs` keys replaced and its own run directory."""
    data = cfg.model_dump()
    data["envs"] |= envs
    data["tracking"] |= {"run_dir": str(run_dir)}
    data["checkpoint"] |= {"dir": None}
    return RunConfig.model_validate(data)


def held_out_settings(cfg: RunConfig, env_ids: list[str], seeds: int, samples: int,
                      temperature: float | None = None, offset: int = 0) -> dict:
    """What `held_out` asks of `evaluate`, keyed as its summary's settings record it: `seeds` held-out seeds per
    env id from the `offset`-th, `samples` samples each, at the rollout temperature unless given."""
    start = cfg.envs.eval_seeds.start + offset
    return {"env_ids": sorted(env_ids), "seeds": list(range(start, start + seeds)), "samples": samples,
            "temperature": cfg.rollout.temperature if temperature is None else temperature, "seed": cfg.trainer.seed}


def held_out(cfg: RunConfig, tokenizer, state, env_ids: list[str], seeds: int, samples: int,
             temperature: float | None = None, offset: int = 0) -> EvalSummary:
    """The policy `state` on the held-out tasks `held_out_settings` names."""
    model = policy_from_state(cfg, state).eval().requires_grad_(False)
    asked = held_out_settings(cfg, env_ids, seeds, samples, temperature, offset)
    return evaluate(model, tokenizer, cfg, env_ids, asked["seeds"], temperature=asked["temperature"],
                    max_rows=cfg.rollout.max_rows, samples=samples, seed=asked["seed"])


def eval_inputs(cfg: RunConfig, checkpoint: Path) -> dict:
    """What an SFT evaluation's episodes depend on besides their tasks: the recipe's envs, rewards and rollout
    sections, and the digest of the checkpoint's files."""
    return cfg.model_dump(mode="json", include={"envs", "rewards", "rollout"}) | {"checkpoint": tree_digest(checkpoint)}


def restrict(summary: EvalSummary, domain: str) -> EvalSummary:
    """The evaluation's episodes of one domain only."""
    keep = [i for i, t in enumerate(summary.trajectories) if t.episode.domain == domain]
    return summarize([summary.trajectories[i] for i in keep], [summary.rewards[i] for i in keep], summary.settings)


def _cell(change: Change | None) -> str:
    if change is None:
        return "-"
    mark = "*" if change.significant else ""
    return f"{change.change:+.3f} [{change.low:+.3f}, {change.high:+.3f}]{mark}"


def report(runs: list[dict[str, EvalSummary]], console: Console) -> dict:
    """Print the family x arm table, pooled over runs (cold starts), and return every change as JSON-ready dicts."""
    first = runs[0]
    columns = [arm for arm in ARMS if arm in first and arm != "sft"] + [k for k in first if k.startswith("sft@")]
    vs_sft = {arm: {c.group: c for c in compare_runs([(_matching(r["sft"], r[arm]), r[arm]) for r in runs], family_of)}
              for arm in columns}
    transfer = {}
    if "joint" in first and "single" in first:
        pairs = [(r["single"], _matching(r["joint"], r["single"])) for r in runs]
        transfer = {c.group: c for c in compare_runs(pairs, family_of)}
    sft_alone = _pass_rates([r["sft"] for r in runs])
    # The SFT evaluation plays every env id, so its families are every arm's.
    families = sorted(set(sft_alone) - {"all"})
    pooled = f", pooled over {len(runs)} cold starts (runs, then tasks)" if len(runs) > 1 else ""
    title = f"held-out pass rate: change from SFT per arm, paired bootstrap 95% CI{pooled} (* = significant)"
    table = Table(title=title)
    for name in ("family", "SFT", *(f"{arm}" for arm in vs_sft), "joint - single"):
        table.add_column(name, justify="left" if name == "family" else "right")
    for family in [*families, "all"]:
        base = next((changes[family].a for changes in vs_sft.values() if family in changes), sft_alone.get(family))
        table.add_row(family, "-" if base is None else f"{base:.3f}",
                      *(_cell(changes.get(family)) for changes in vs_sft.values()), _cell(transfer.get(family)))
    console.print(table)
    return {"vs_sft": {arm: {g: c.to_json() for g, c in changes.items()} for arm, changes in vs_sft.items()},
            "transfer": {g: c.to_json() for g, c in transfer.items()}}


def _pass_rates(evaluations: list[EvalSummary]) -> dict[str, float]:
    """Per family and "all": the mean over evaluations of the mean task pass rate (the SFT column with no RL arm)."""
    per_run = []
    for evaluation in evaluations:
        rates = task_pass_rates(evaluation, family_of)
        every = [rate for tasks in rates.values() for rate in tasks.values()]
        per_run.append({**{g: sum(t.values()) / len(t) for g, t in rates.items()}, "all": sum(every) / len(every)})
    return {g: sum(r[g] for r in per_run) / len(per_run) for g in per_run[0]} if per_run else {}


def _matching(reference: EvalSummary, other: EvalSummary) -> EvalSummary:
    """`reference` restricted to the env ids `other` played, so the two pair task by task."""
    ids = {t.episode.env_id for t in other.trajectories}
    keep = [i for i, t in enumerate(reference.trajectories) if t.episode.env_id in ids]
    return summarize([reference.trajectories[i] for i in keep], [reference.rewards[i] for i in keep], reference.settings)


def mean_mix(histories: dict[str, list[dict]], console: Console) -> dict[str, dict[str, float]]:
    """Each joint arm's draw probability per env id, averaged over its steps (the learnability schedule's effect)."""
    means = {}
    for arm, history in histories.items():
        ids = sorted({k.removeprefix("mix/") for metrics in history for k in metrics if k.startswith("mix/")})
        if arm.startswith("single") or not ids:
            continue
        means[arm] = {i: sum(m.get(f"mix/{i}", 0.0) for m in history) / len(history) for i in ids}
    if means:
        table = Table(title="draw probability per env id, mean over RL steps")
        table.add_column("env id")
        for arm in means:
            table.add_column(arm, justify="right")
        for env_id in sorted({i for arm in means.values() for i in arm}):
            table.add_row(env_id, *(f"{arm.get(env_id, 0.0):.3f}" for arm in means.values()))
        console.print(table)
    return means


def held_out_points(sft: EvalSummary, arm: EvalSummary, steps: int,
                    trainer_evals: dict[int, dict[str, float]] | None = None) -> list[dict]:
    """Held-out pass rate per domain against RL step: the SFT checkpoint (step 0) and the arm after `steps` on the
    benchmark's tasks, and between them any evaluation the trainer made on its own, smaller seed set."""
    points = [{"step": 0, "tasks": "benchmark", **_matching(sft, arm).pass_rate}]
    for step, metrics in sorted((trainer_evals or {}).items()):
        rates = {k.removeprefix("pass_rate/"): v for k, v in metrics.items() if k.startswith("pass_rate/")}
        points.append({"step": step, "tasks": "trainer", **rates})
    points.append({"step": steps, "tasks": "benchmark", **arm.pass_rate})
    return points


def plot(histories: dict[str, list[dict]], held: dict[str, list[dict]], path: Path) -> None:
    """One column per arm: training reward per domain against step (top), held-out pass rate per domain (bottom)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a CI or CPU box
    import matplotlib.pyplot as plt

    arms = [arm for arm, history in histories.items() if history]
    columns = max(len(arms), 1)
    fig, axes = plt.subplots(2, columns, figsize=(4.5 * columns, 7), squeeze=False)
    for top, bottom, arm in zip(axes[0], axes[1], arms):
        history, points = histories[arm], held.get(arm, [])
        # reward/<domain>/mean: the other reward/ keys are the whole batch's or a component's.
        domains = sorted({k.split("/")[1] for m in history for k in m if k.startswith("reward/") and
                          k.endswith("/mean") and k.count("/") == 2})
        shown = sorted({*domains, *(k for p in points for k in p if k not in ("step", "tasks"))})
        colour = {d: ("black" if d == "all" else f"C{i}") for i, d in enumerate(shown)}
        steps = range(1, len(history) + 1)
        for domain in domains:
            top.plot(steps, [m.get(f"reward/{domain}/mean", float("nan")) for m in history], label=domain,
                     color=colour[domain])
        top.set_title(arm)
        top.set_ylabel("training reward (mean)")
        top.legend(fontsize=7)
        for domain in shown:
            for tasks, style in (("benchmark", {"marker": "o"}), ("trainer", {"marker": "x", "linestyle": ":"})):
                xy = [(p["step"], p[domain]) for p in points if p["tasks"] == tasks and domain in p]
                if xy:
                    label = domain if tasks == "benchmark" else f"{domain} (trainer's eval seeds)"
                    bottom.plot(*zip(*xy), label=label, color=colour[domain], **style)
        bottom.set_xlabel("RL step")
        bottom.set_ylabel("held-out pass rate")
        bottom.set_ylim(-0.02, 1.02)
        bottom.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def save_evaluation(run: Path, name: str, summary: EvalSummary, inputs: dict | None = None) -> None:
    """Keep one arm's held-out evaluation in run/evals/<name>.json (the format of `jointrl eval --out`), with the
    recipe sections it was played under (`eval_inputs`) where given."""
    folder = run / EVALS
    folder.mkdir(parents=True, exist_ok=True)
    data = summary.to_json() | ({"inputs": inputs} if inputs is not None else {})
    (folder / f"{name}.json").write_text(json.dumps(data))


def kept_evaluation(run: Path, name: str, asked: dict, inputs: dict) -> tuple[EvalSummary | None, str]:
    """An earlier run's evaluation `name` if it played the `asked` tasks (`held_out_settings`) under the same
    `inputs` (`eval_inputs`), else None; with the reason either way."""
    file = run / EVALS / f"{name}.json"
    if not file.is_file():
        return None, f"no {file}"
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as err:
        return None, f"{file}: {err}"
    differ = [key for key, value in asked.items() if data.get("settings", {}).get(key) != value]
    if differ:
        return None, f"{file} played other tasks ({', '.join(differ)} differ)"
    if "inputs" not in data:
        return None, f"{file} does not record the recipe sections it was played under"
    differ = sorted(k for k in inputs if data["inputs"].get(k) != inputs[k])
    if differ:
        return None, f"{file} was played under another {' and '.join(differ)}"
    try:
        return EvalSummary.from_json(data), f"taken from {file}"
    except (KeyError, ValueError, TypeError) as err:
        return None, f"{file}: {err}"


def saved_evaluations(run: Path) -> dict[str, EvalSummary]:
    """The held-out evaluations an earlier run kept, by arm."""
    files = sorted((run / EVALS).glob("*.json"))
    if not any(f.stem == "sft" for f in files):
        raise SystemExit(f"--pool: no {run / EVALS / 'sft.json'}; give the directory of one cold start (an --out, "
                         "or one seed-S of it)")
    evaluations = {}
    for file in files:
        try:
            evaluations[file.stem] = EvalSummary.from_json(json.loads(file.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise SystemExit(f"--pool: {file}: {err}") from None
    return evaluations


def pool(runs: list[Path], out: Path, console: Console) -> dict:
    """The table over the evaluations earlier runs kept, pooled over those cold starts; written to out/learning.json."""
    evaluations = [saved_evaluations(run) for run in runs]
    shared = set.intersection(*(set(e) for e in evaluations))
    dropped = sorted(set.union(*(set(e) for e in evaluations)) - shared)
    if dropped:
        console.print(f"left out (not in every run): {', '.join(dropped)}")
    results = report([{arm: e[arm] for arm in e if arm in shared} for e in evaluations], console)
    out.mkdir(parents=True, exist_ok=True)
    (out / "learning.json").write_text(json.dumps({"pooled_from": [str(r) for r in runs], **results}, indent=1))
    return results


def earlier_cold_start(cfg: RunConfig, run: Path) -> ColdStart:
    """The SFT checkpoint an earlier benchmark run (its --out, or one seed-S of it) holds, in place of a new one."""
    checkpoint = run / "sft" / "checkpoints" / "sft"
    if not checkpoint.is_dir():
        raise SystemExit(f"--cold-starts: no SFT checkpoint at {checkpoint}; give the --out of an earlier run with the "
                         "same --trainer-seeds")
    stored = read_config(checkpoint)
    differ = [f"{k} {getattr(stored, k)!r} (checkpoint) vs {getattr(cfg.model, k)!r} (recipe)"
              for k in type(stored).model_fields if getattr(stored, k) != getattr(cfg.model, k)]
    if differ:
        raise SystemExit(f"--cold-starts: {checkpoint} holds a model other than the recipe's: {'; '.join(differ)}")
    return ColdStart(load_pretrained(checkpoint, cfg.model), load_tokenizer(checkpoint), checkpoint,
                     list(demo_counts(cfg)), demos=0, losses=[])


def one_cold_start(cfg: RunConfig, arms: list[str], temperatures: list[float], eval_seeds: int, eval_samples: int,
                   out: Path, console: Console, *, eval_offset: int = 0, start: ColdStart | None = None,
                   earlier: Path | None = None,
                   ) -> tuple[dict[str, EvalSummary], dict[str, list[dict]], dict[str, list[dict]], dict[str, float]]:
    """One cold start (or `start`, an earlier one, with the SFT evaluations its run `earlier` kept where they match)
    and its RL arms, each into its own directory under out: (evaluations, histories, held-out points, seconds)."""
    began = time.perf_counter()
    # Each benchmark run is a fresh experiment: its --out directory's earlier run is replaced.
    start = start or cold_start(cfg, console, overwrite=True)
    sft_state = start.model.state_dict()

    def evaluate_policy(state, env_ids, temperature=None):
        return held_out(cfg, start.tokenizer, state, env_ids, eval_seeds, eval_samples, temperature, eval_offset)

    evals = {}

    def keep(name: str, summary: EvalSummary, inputs: dict | None = None) -> None:
        evals[name] = summary
        save_evaluation(out, name, summary, inputs)

    # Only SFT evaluations are taken over later, so only they record what they were played under.
    sft_inputs = eval_inputs(cfg, start.checkpoint)

    def evaluate_sft(name: str, temperature: float | None = None) -> EvalSummary:
        if earlier is not None:
            asked = held_out_settings(cfg, start.env_ids, eval_seeds, eval_samples, temperature, eval_offset)
            summary, why = kept_evaluation(earlier, name, asked, sft_inputs)
            console.print(f"SFT evaluation {name}: {why}{'' if summary else '; playing it again'}")
            if summary is not None:
                return summary
        return evaluate_policy(sft_state, start.env_ids, temperature)

    keep("sft", evaluate_sft("sft"), sft_inputs)
    for temperature in temperatures:
        keep(f"sft@T{temperature:g}", evaluate_sft(f"sft@T{temperature:g}", temperature), sft_inputs)
    histories, held, seconds = {}, {}, {"sft": time.perf_counter() - began}
    runs = []
    if "single" in arms:
        for domain in sorted({t.episode.domain for t in evals["sft"].trajectories}):
            globs = [m for m in cfg.envs.mix if m.glob.split("/", 1)[0] == domain]
            runs.append((f"single:{domain}", with_envs(cfg, out / f"single-{domain}", mix=[m.model_dump() for m in globs],
                                                         domain_shares={}), domain))
    if "joint" in arms:
        runs.append(("joint", with_envs(cfg, out / "joint"), None))
    if "learnability" in arms:
        runs.append(("learnability", with_envs(cfg, out / "learnability", mix_schedule="learnability"), None))
    singles = []
    for name, arm_cfg, domain in runs:
        console.rule(f"RL arm {name}: {arm_cfg.trainer.steps} steps x {arm_cfg.trainer.prompts_per_step} prompts")
        arm_start = time.perf_counter()
        result = train(arm_cfg, init=start.checkpoint, overwrite=True, console=console, keep_state=True)
        ids = [i for i in start.env_ids if domain is None or i.split("/", 1)[0] == domain]
        summary = evaluate_policy(result.state, ids)
        histories[name], seconds[name] = result.history, time.perf_counter() - arm_start
        held[name] = held_out_points(evals["sft"], summary, result.steps, result.evals)
        if domain is None:
            keep(name, summary)
        else:
            singles.append(summary)
    if singles:
        trajectories = [t for s in singles for t in s.trajectories]
        keep("single", summarize(trajectories, [r for s in singles for r in s.rewards], singles[0].settings))
    return evals, histories, held, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("recipe", nargs="?", default="quickstart")
    parser.add_argument("overrides", nargs="*", help="recipe overrides key=value")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated subset of {','.join(ARMS)}")
    parser.add_argument("--eval-seeds", type=int, default=64, help="held-out seeds per env id (default 64)")
    parser.add_argument("--eval-samples", type=int, default=4, help="samples per held-out task (default 4)")
    parser.add_argument("--eval-offset", type=int, default=0,
                        help="evaluate from the held-out seed this many after the recipe's first (default 0; "
                             "raise envs.eval_seeds.stop to cover them)")
    parser.add_argument("--cold-starts", metavar="DIR", default=None,
                        help="take each cold start's SFT checkpoint from an earlier run's --out instead of training it")
    parser.add_argument("--sft-temperatures", default="",
                        help="comma-separated temperatures below the rollout's to sample the SFT checkpoint at (controls)")
    parser.add_argument("--trainer-seeds", default="",
                        help="comma-separated trainer.seed values: one cold start and its arms each, pooled "
                             "(default: the recipe's one)")
    parser.add_argument("--pool", metavar="DIR,...", default="",
                        help="train nothing: pool the evaluations these earlier runs kept (each one cold start's "
                             "directory) into one table")
    parser.add_argument("--out", default="runs/learning", help="output directory (default runs/learning)")
    # Intermixed: recipe overrides may follow the options, as in the usage line.
    args = parser.parse_intermixed_args(argv)
    if args.pool:
        runs = [Path(d) for d in args.pool.split(",") if d.strip()]
        if not runs:
            raise SystemExit(f"--pool {args.pool!r}: give one or more run directories, comma-separated")
        console = output_console()
        pool(runs, Path(args.out), console)
        console.print(f"wrote {Path(args.out) / 'learning.json'}")
        return 0
    arms = args.arms.split(",")
    if any(a not in ARMS for a in arms) or "sft" not in arms:
        raise SystemExit(f"--arms {args.arms!r}: choose among {', '.join(ARMS)}, sft included")
    try:
        temperatures = [float(t) for t in args.sft_temperatures.split(",") if t.strip()]
    except ValueError:
        raise SystemExit(f"--sft-temperatures {args.sft_temperatures!r}: give numbers, e.g. 0.85,0.7") from None
    try:
        seeds = [int(t) for t in args.trainer_seeds.split(",") if t.strip()]
    except ValueError:
        raise SystemExit(f"--trainer-seeds {args.trainer_seeds!r}: give integers, e.g. 0,1,2") from None
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"--trainer-seeds {args.trainer_seeds!r}: each seed once")

    began = time.perf_counter()
    console = output_console()
    out = Path(args.out)
    if args.eval_offset < 0:
        raise SystemExit(f"--eval-offset {args.eval_offset}: give 0 or more")
    header = {"recipe": args.recipe, "overrides": args.overrides, "eval_seeds": args.eval_seeds,
              "eval_samples": args.eval_samples, "eval_offset": args.eval_offset, "cold_starts": args.cold_starts,
              "sft_temperatures": temperatures}
    runs, per_seed = [], {}
    for seed in seeds or [None]:
        seed_out = out if seed is None else out / f"seed-{seed}"
        overrides = [*args.overrides, *([f"trainer.seed={seed}"] if seed is not None else [])]
        cfg = load_recipe(args.recipe, [*overrides, f"tracking.run_dir={seed_out / 'sft'}"])
        if seed is not None:
            console.rule(f"cold start {len(runs) + 1} of {len(seeds)}: trainer.seed={seed}")
        earlier = start = None
        if args.cold_starts:
            earlier = Path(args.cold_starts) / seed_out.relative_to(out)
            start = earlier_cold_start(cfg, earlier)
        evals, histories, held, seconds = one_cold_start(cfg, arms, temperatures, args.eval_seeds, args.eval_samples,
                                                         seed_out, console, eval_offset=args.eval_offset,
                                                         start=start, earlier=earlier)
        runs.append(evals)
        results = report([evals], console)
        results["mean_mix"] = mean_mix(histories, console)
        seed_out.mkdir(parents=True, exist_ok=True)
        plot(histories, held, seed_out / "learning.png")
        per_seed[cfg.trainer.seed] = {**results, "seconds": seconds, "history": histories, "held_out": held}
        if seed is not None:
            # Written as each cold start ends, so a run stopped later keeps the cold starts it finished.
            (seed_out / "learning.json").write_text(json.dumps({**header, "trainer_seed": seed, **per_seed[seed]},
                                                               indent=1))
    total = time.perf_counter() - began
    if seeds:
        console.rule(f"pooled over {len(seeds)} cold starts (trainer.seed {', '.join(map(str, seeds))})")
        pooled = report(runs, console)
        summary = {**header, "trainer_seeds": seeds, "seconds": {"total": total}, **pooled,
                   "per_seed": {seed: {k: v for k, v in r.items() if k != "history"} for seed, r in per_seed.items()}}
    else:
        (results,) = per_seed.values()
        summary = {**header, **results, "seconds": {**results["seconds"], "total": total}}
    (out / "learning.json").write_text(json.dumps(summary, indent=1))
    plots = "learning.png" if not seeds else "seed-*/learning.png"
    console.print(f"wrote {out / 'learning.json'} and {out / plots} in {total:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
