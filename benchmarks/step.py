"""One RL step broken into its parts, each against a plain baseline measured in the same run.

    python benchmarks/step.py [RECIPE] [--init CKPT] [--reps N] [key=value ...]

From the recipe's SFT checkpoint (default: the one `jointrl sft RECIPE` writes), with the recipe's workers,
learner ranks, prompts per step and group size:
  rollout      RolloutManager.run on one step's tasks (Ray workers, envs, tool calls, result transport),
               against the raw engine: one in-process Engine replaying the same turns (the same tokens fed,
               the same number generated, stop tokens off) with as many rows as all workers together;
  reward       the reward mixer and the algorithm's advantages on those trajectories;
  update       LearnerGroup.train_step (Ray, DeepSpeed ZeRO, the recipe's ranks), wall time of the call,
               against a plain single-process torch loop doing the same work on the same samples: the same
               micro-batches, the reference forward when the recipe has a KL term, forward (sharing openings
               when learner.share_openings does), loss, backward and one torch AdamW step per update, with as
               many threads as a learner rank gets;
  weight sync  the learner ranks publish their shares (LearnerGroup.publish), every worker loads them.
The targets: update / plain loop <= 1.15, rollout / raw engine <= 1.3. Each part is timed `--reps` times
after one warm-up; the median is reported. Prints a table; asserts nothing.

Beside the wall times, the CPU time the whole machine spent during the rollout and the raw engine (every process:
workers, sandboxed tool commands, the kernel's work for them; Linux only; meaningful on an otherwise idle machine).
On a machine whose cores the rollout keeps busy, its wall time cannot fall below that CPU time over the cores,
whatever the framework does around the engine: the floor printed under the table is that bound as a ratio to the
raw engine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import ray  # noqa: E402
import torch  # noqa: E402
from rich.table import Table  # noqa: E402

from jointrl.model.checkpoint import load_state  # noqa: E402
from jointrl.model.generate import SamplingParams  # noqa: E402
from jointrl.model.tokenizer import JointTokenizer  # noqa: E402
from jointrl.model.transformer import Transformer  # noqa: E402
from jointrl.rewards.mixer import RewardMixer  # noqa: E402
from jointrl.rl.actor_group import Placement, start_ray  # noqa: E402
from jointrl.rl.progress import output_console  # noqa: E402
from jointrl.rl.algorithms.step import advantages_and_filters  # noqa: E402
from jointrl.rl.config.run import RunConfig  # noqa: E402
from jointrl.rl.learner.batch import pack, samples_from_trajectories, split_minibatches, totals  # noqa: E402
from jointrl.rl.learner.critic import PolicyWithValue  # noqa: E402
from jointrl.rl.learner.forward import detached, forward_micro_batch, micro_batch_loss, reference_logprobs  # noqa: E402
from jointrl.rl.learner.group import LearnerGroup  # noqa: E402
from jointrl.rl.recipe import load_recipe  # noqa: E402
from jointrl.rl.rollout.engine import Engine, TurnRequest  # noqa: E402
from jointrl.rl.rollout.manager import RolloutManager  # noqa: E402
from jointrl.rl.rollout.task_sampler import TaskSampler  # noqa: E402
from jointrl.rl.trainer import default_init  # noqa: E402
from jointrl.rl.trajectory import Trajectory  # noqa: E402

TARGETS = {"update": 1.15, "rollout": 1.3}


def turns_of(trajectory: Trajectory) -> list[tuple[list[int], int]]:
    """(tokens fed, tokens generated) per turn of a trajectory, from its loss mask."""
    tokens, mask = trajectory.tokens.tolist(), (trajectory.loss_mask > 0).tolist()
    turns, fed, generated = [], [], 0
    for token, sampled in zip(tokens, mask):
        if sampled:
            generated += 1
        else:
            if generated:
                turns.append((fed, generated))
                fed, generated = [], 0
            fed.append(token)
    if generated:
        turns.append((fed, generated))
    return turns


def raw_engine_seconds(model: Transformer, tokenizer: JointTokenizer, trajectories: list[Trajectory], rows: int) -> float:
    """Wall seconds of one Engine replaying every trajectory's turns: the same feeds, the same generated counts."""
    engine = Engine(model, tokenizer.think_start_id, tokenizer.think_end_id, max_rows=rows)
    plans = {i: turns_of(t) for i, t in enumerate(trajectories)}
    free = SamplingParams(temperature=1.0, stop_ids=())
    started = time.perf_counter()
    turn = 0
    while True:
        requests = [TurnRequest(i, plan[turn][0], plan[turn][1], free)
                    for i, plan in plans.items() if turn < len(plan)]
        if not requests:
            break
        engine.run(requests)
        turn += 1
    return time.perf_counter() - started


def plain_update_seconds(cfg: RunConfig, state: dict, trajectories: list[Trajectory], advantages: list[float],
                         keep: list[bool], threads: int, pad_id: int) -> float:
    """Wall seconds of a single-process torch loop doing the learner's work on the same samples."""
    torch.set_num_threads(threads)
    policy = PolicyWithValue(Transformer(cfg.model))
    policy.policy.load_state_dict(state)
    reference = None
    if cfg.algorithm.kl_coef > 0:
        reference = PolicyWithValue(Transformer(cfg.model))
        reference.policy.load_state_dict(state)
        reference.requires_grad_(False)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=cfg.learner.lr)
    samples = samples_from_trajectories(trajectories, advantages, keep)
    budget = cfg.algorithm.loss_token_budget or cfg.rollout.max_new_tokens_per_episode
    started = time.perf_counter()
    for minibatch in split_minibatches(samples, cfg.learner.updates_per_step):
        step_totals = totals(minibatch, token_budget=budget)
        for mb in pack(minibatch, cfg.learner.micro_batch_tokens, pad_id):
            ref = None
            if reference is not None:
                with torch.no_grad():
                    ref = reference_logprobs(reference, mb, temperature=cfg.rollout.temperature,
                                             routing=cfg.algorithm.reference_routing, replay="off",
                                             share_openings=cfg.learner.share_openings)
            out = forward_micro_batch(policy, mb, temperature=cfg.rollout.temperature, replay="off",
                                      share_openings=cfg.learner.share_openings)
            loss, _ = micro_batch_loss(cfg.algorithm, mb, out, detached(out), ref, step_totals)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - started


def busy_seconds(stat_line: str, ticks_per_second: int) -> float:
    """CPU seconds spent busy, from /proc/stat's aggregate `cpu` line: user, nice, system, irq and softirq.

    Idle and iowait are not busy; steal is time the hypervisor gave elsewhere; guest time is already in user.
    """
    name, *fields = stat_line.split()
    if name != "cpu" or len(fields) < 7:
        raise ValueError(f"not /proc/stat's aggregate cpu line: {stat_line!r}")
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[:7])
    return (user + nice + system + irq + softirq) / ticks_per_second


def machine_cpu_seconds() -> float | None:
    """Busy CPU seconds of the whole machine so far (None where there is no /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            return busy_seconds(f.readline(), os.sysconf("SC_CLK_TCK"))
    except OSError:
        return None


def with_machine_cpu(fn, spent: list[float]):
    """`fn` that also appends the machine's busy CPU seconds during each call to `spent` (nothing off Linux)."""
    def call() -> float:
        before = machine_cpu_seconds()
        seconds = fn()
        if before is not None:
            spent.append(machine_cpu_seconds() - before)
        return seconds
    return call


def median_of(fn, reps: int) -> float:
    """The median of `reps` timed calls after one warm-up call."""
    fn()
    return statistics.median(fn() for _ in range(reps))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", nargs="?", default="quickstart")
    parser.add_argument("overrides", nargs="*", help="recipe overrides key=value")
    parser.add_argument("--init", help="the SFT checkpoint (default: the recipe's, written by `jointrl sft`)")
    parser.add_argument("--reps", type=int, default=3, help="timed repetitions per part (default 3)")
    args = parser.parse_intermixed_args(argv)
    if args.reps < 1:
        raise SystemExit(f"--reps must be >= 1, got {args.reps}")
    cfg = load_recipe(args.recipe, args.overrides)
    init = Path(args.init or default_init(cfg))
    if not (init / "config.json").is_file():
        raise SystemExit(f"no SFT checkpoint at {init}: run `jointrl sft {args.recipe}` first, or pass --init CKPT")
    tokenizer = JointTokenizer.load(init)
    state = load_state(init)
    console = output_console()
    torch.manual_seed(cfg.trainer.seed)

    placement = start_ray(cfg.rollout.workers, cfg.learner.ranks, gpus=False)
    threads = max(1, int(placement.num_cpus)) if placement is not None else 1
    tasks = TaskSampler.from_config(cfg).next_step()
    rollouts = RolloutManager(cfg.model, tokenizer, cfg.rollout, placement=Placement(num_cpus=1),
                              max_rows=cfg.rollout.max_rows, chunk_size=max(1, -(-len(tasks) // cfg.rollout.workers)))
    learner = LearnerGroup(cfg, state, placement=placement, pad_id=tokenizer.pad_id)
    mixer = RewardMixer.from_config(cfg.rewards)
    try:
        rollouts.push_weights(state, 0)
        batch: list[Trajectory] = []

        def rollout() -> float:
            started = time.perf_counter()
            batch[:] = rollouts.run(tasks, seed=cfg.trainer.seed)
            return time.perf_counter() - started

        cpu: dict[str, list[float]] = {"rollout": [], "raw engine": []}
        seconds = {"rollout": median_of(with_machine_cpu(rollout, cpu["rollout"]), args.reps)}
        sampled = sum(int(t.loss_mask.sum()) for t in batch)
        fed = sum(len(t.tokens) for t in batch) - sampled
        model = Transformer(cfg.model)
        model.load_state_dict(state)
        model.eval().requires_grad_(False)
        torch.set_num_threads(cfg.rollout.workers)
        seconds["raw engine"] = median_of(with_machine_cpu(
            lambda: raw_engine_seconds(model, tokenizer, batch, cfg.rollout.max_rows * cfg.rollout.workers),
            cpu["raw engine"]), args.reps)

        adv = None

        def reward() -> float:
            nonlocal adv
            started = time.perf_counter()
            mixed = mixer.mix([t.episode for t in batch])
            adv = advantages_and_filters(cfg.algorithm, batch, mixed)
            return time.perf_counter() - started

        seconds["reward"] = median_of(reward, args.reps)
        advantages, keep = list(adv.values), list(adv.keep)
        # Every repetition updates the same weights again; the work per step does not depend on them.

        def update() -> float:
            started = time.perf_counter()
            learner.train_step(batch, advantages, keep)
            return time.perf_counter() - started

        seconds["update"] = median_of(update, args.reps)
        seconds["plain loop"] = median_of(
            lambda: plain_update_seconds(cfg, state, batch, advantages, keep, threads, tokenizer.pad_id), args.reps)
        version = iter(range(1, 10_000))

        def sync() -> float:
            # As the trainer syncs: every learner rank publishes its share, the workers load the version.
            started = time.perf_counter()
            v = next(version)
            rollouts.push_weights(learner.publish(v, rollouts.sync.bucket_bytes, cfg.rollout.mxfp4_experts), v)
            return time.perf_counter() - started

        seconds["weight sync"] = median_of(sync, args.reps)
    finally:
        rollouts.shutdown()
        learner.shutdown()
        ray.shutdown()

    table = Table(title=f"one RL step of {args.recipe}: {len(tasks)} episodes, {sampled} sampled and {fed} fed tokens, "
                        f"median of {args.reps}")
    for column in ("part", "seconds", "baseline", "ratio", "target"):
        table.add_column(column, justify="left" if column == "part" else "right")
    table.add_row("rollout (workers, envs, Ray)", f"{seconds['rollout']:.2f}", f"{seconds['raw engine']:.2f} raw engine",
                  f"{seconds['rollout'] / seconds['raw engine']:.2f}x", f"<= {TARGETS['rollout']}x")
    table.add_row("reward + advantages", f"{seconds['reward']:.3f}", "", "", "")
    table.add_row("update (Ray, DeepSpeed)", f"{seconds['update']:.2f}", f"{seconds['plain loop']:.2f} plain torch loop",
                  f"{seconds['update'] / seconds['plain loop']:.2f}x", f"<= {TARGETS['update']}x")
    table.add_row("weight sync", f"{seconds['weight sync']:.2f}", "", "", "")
    console.print(table)
    if cpu["rollout"] and cpu["raw engine"]:
        # The first call of each is a warm-up, as for the wall times.
        used = {part: statistics.median(spent[1:] or spent) for part, spent in cpu.items()}
        cores = os.cpu_count() or 1
        console.print(f"machine CPU: rollout {used['rollout']:.2f} s, raw engine {used['raw engine']:.2f} s (medians); "
                      f"on {cores} cores the rollout's work alone bounds its ratio to the raw engine at "
                      f">= {used['rollout'] / cores / seconds['raw engine']:.2f}x")
    console.print(f"{os.cpu_count()} CPUs; learner ranks {cfg.learner.ranks} with {threads} thread(s) each; "
                  f"{cfg.rollout.workers} rollout workers with 1 core each")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
