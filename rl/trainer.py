"""The joint RL loop — rollouts, rewards, advantages, learner update, weight sync, logs, checkpoints.

One step: the rollout pipeline hands over the step's trajectories (played by the workers, at most
`rollout.max_staleness` versions behind the learner) → the reward mixer scores and normalises them per
domain → the algorithm turns rewards into advantages and the filters drop what teaches nothing → the
learner ranks update the policy → each learner rank publishes its share of the new weights to the workers
(only handles pass through this process, whose memory does not grow with the model) → metrics are logged and the step's
episodes saved as a Parquet shard → periodically the policy is evaluated on held-out seeds and the run is
checkpointed. A run directory that already holds an RL run is refused unless resumed or overwritten.

Where this departs from the textbook algorithms:
- One optimizer step per batch by default (`learner.updates_per_step: 1`): pi_old is the current weights, so
  the PPO ratio starts at 1 and clipping only acts across mini-batches when updates_per_step > 1. The
  rollout/learner mismatch (other weights in async mode, MXFP4 experts, other kernels) is corrected by
  truncated importance weights min(pi_old / pi_behaviour, C) instead.
- Rewards are normalised by the mixer (per prompt group, domain or batch) before the algorithm's own
  advantage; with `group` normalisation GRPO's second standardisation is close to the identity.
- DAPO's dynamic sampling drops zero-variance groups but draws no replacements, so a step may train on fewer
  sequences than it played.
- KL to the reference in `reward` mode is a per-token penalty on the advantage, not a sum into the return.
- Async mode bounds staleness by waiting, not by discarding: a batch played by version v is trained at step
  s with s - v <= max_staleness, and TIS weights carry the correction.
- A resumed run replays exactly in synchronous mode; in async mode the batches in flight at the crash are
  played again with the checkpoint's weights.
- With `rollout.weight_transport: collective` the ranks stage their shares at publish and broadcast them when the
  rollout thread pushes (a version the thread skips is never sent); the object store carries them otherwise.
- Partial rollouts (`rollout.partial`) close a batch once prompts_per_step prompt groups finished; slower groups carry
  over and finish under newer weights (tokens of several versions, none older than step - max_staleness). A batch
  may then hold more groups than prompts_per_step (groups that would otherwise expire). On resume the groups in
  flight at the checkpoint are dropped, not replayed: the saved sampler state is already past their prompts.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from rich.console import Console

from jointrl.model.pretrained import load_tokenizer
from jointrl.model.tokenizer import JointTokenizer
from jointrl.model.transformer import Transformer
from jointrl.rewards.alarms import RewardAlarms
from jointrl.rewards.mixer import RewardMixer
from jointrl.rl.actor_group import Placement, start_ray
from jointrl.rl.algorithms.step import advantages_and_filters
from jointrl.rl.cold_start import checkpoint_dir
from jointrl.rl.config.run import RunConfig
from jointrl.rl.demos import mix_env_ids
from jointrl.rl.evaluate import EvalSummary, evaluate
from jointrl.rl.learner.group import LearnerGroup
from jointrl.rl.progress import Progress
from jointrl.rl.recipe import dump_config
from jointrl.rl.rollout.manager import RolloutManager
from jointrl.rl.rollout.pipeline import RolloutPipeline
from jointrl.rl.rollout.task_sampler import TaskSampler
from jointrl.rl.run_checkpoint import latest_checkpoint, rng_state, save_checkpoint, set_rng_state
from jointrl.rl.step_metrics import episode_metrics, episode_rows, failed_episodes, reward_summary, staleness_metrics
from jointrl.rl.tracking import Tracker, claim_run_dir, print_places, rl_outputs
from jointrl.rl.weight_sync import CollectiveGroup

STATE_FILE = "trainer_state.pt"


@dataclass
class TrainResult:
    """What a run produced."""

    run_dir: Path
    steps: int  # the step count the run ended at
    state: dict[str, torch.Tensor] | None = field(default=None, repr=False)  # the final weights, if asked for
    history: list[dict[str, float]] = field(default_factory=list, repr=False)  # metrics of the steps run here
    evals: dict[int, dict[str, float]] = field(default_factory=dict)  # step -> eval pass rates
    checkpoint: Path | None = None  # the last complete checkpoint


@dataclass
class _Run:
    """Everything a run holds between steps."""

    tokenizer: JointTokenizer
    sampler: TaskSampler
    mixer: RewardMixer
    alarms: RewardAlarms
    learner: LearnerGroup
    rollouts: RolloutManager
    tracker: Tracker
    init: Path
    start_step: int


def train(cfg: RunConfig, *, init: Path | None = None, resume: bool = False, overwrite: bool = False,
          console: Console | None = None, keep_state: bool = False) -> TrainResult:
    """Run the recipe's RL stage from `init` (default: the recipe's SFT checkpoint), resume it, or overwrite it.

    keep_state gathers the final policy into this process (result.state), for callers that evaluate it here.
    """
    console = console or Console(soft_wrap=True)
    run_dir = Path(cfg.tracking.run_dir)
    claim_run_dir(run_dir, rl_outputs(run_dir, checkpoint_dir(cfg) / "rl"), stage="rl", resume=resume, overwrite=overwrite)
    run = _start(cfg, init, resume, console)
    pipeline = RolloutPipeline(
        run.rollouts, run.sampler, run_seed=cfg.trainer.seed, max_staleness=cfg.rollout.max_staleness,
        start_step=run.start_step, steps=cfg.trainer.steps, partial=cfg.rollout.partial,
        spare_prompts=cfg.rollout.partial_spare_prompts,
    )
    pipeline.publish(_publish(cfg, run, run.start_step), run.start_step)
    result = TrainResult(Path(cfg.tracking.run_dir), run.start_step)
    env_ids = mix_env_ids([entry.glob for entry in cfg.envs.mix])
    bar = Progress(console if cfg.tracking.console else None, "RL", cfg.trainer.steps, completed=run.start_step)
    try:
        with bar:
            for step in range(run.start_step, cfg.trainer.steps):
                start = time.perf_counter()
                batch = pipeline.next()  # rollouts, played at most max_staleness versions ago
                mixed = run.mixer.mix([t.episode for t in batch.trajectories])  # rewards, normalised per domain
                for trajectory, reward, parts in zip(batch.trajectories, mixed.rewards, mixed.components):
                    trajectory.reward, trajectory.rewards = reward, {k: v for k, v in parts.items() if v is not None}
                adv = advantages_and_filters(cfg.algorithm, batch.trajectories, mixed)  # advantages + filters
                learned = run.learner.train_step(batch.trajectories, adv.values, adv.keep)  # policy update
                version = step + 1
                pipeline.publish(_publish(cfg, run, version), version)  # the workers load it before their next batch
                metrics = {
                    **mixed.metrics, **reward_summary(mixed), **adv.metrics, **learned, **episode_metrics(batch.trajectories),
                    **staleness_metrics(batch.trajectories, step),
                    "perf/rollout_s": batch.seconds, "perf/step_s": time.perf_counter() - start,
                    "perf/tokens_per_s": _sampled_tokens(batch.trajectories) / max(batch.seconds, 1e-9),
                    "rollout/worker_restarts": float(run.rollouts.restarts),
                    **{f"mix/{env_id}": p for env_id, p in batch.mix.items()},
                }
                metrics |= run.alarms.update(metrics).metrics
                run.tracker.log(version, metrics)
                run.tracker.log_rollouts(version, episode_rows(version, batch.trajectories, mixed.raw))
                result.history.append(metrics)
                for line in failed_episodes(batch.trajectories)[:3]:
                    console.print(f"[yellow]failed episode[/] {line}")
                if cfg.trainer.eval_every and version % cfg.trainer.eval_every == 0:
                    # Evaluation runs here on the gathered policy: the one step that still brings the weights to this
                    # process (set eval_every: 0 and evaluate the checkpoints for models that do not fit).
                    summary = evaluate_state(cfg, run.tokenizer, run.learner.state_dict(), env_ids, bar.console)
                    result.evals[version] = summary.metrics()
                    run.tracker.log_eval(version, result.evals[version])
                if cfg.checkpoint.every and (version % cfg.checkpoint.every == 0 or version == cfg.trainer.steps):
                    result.checkpoint = _save(cfg, run, version, batch.sampler_state)
                result.steps = version
                bar.advance(info=f"reward {metrics['reward/mean']:.3f}" if "reward/mean" in metrics else "")
        if keep_state:
            result.state = run.learner.state_dict()
    finally:
        pipeline.close()
        run.rollouts.shutdown()
        run.learner.shutdown()
        run.tracker.finish()
    last = result.checkpoint or latest_checkpoint(checkpoint_dir(cfg) / "rl")
    print_places(console, f"RL finished at step {result.steps}:", [
        ("checkpoints", f"{checkpoint_dir(cfg) / 'rl'}" + (f" (last {last.name})" if last else " (none saved)")),
        *run.tracker.places(),
    ])
    return result


def policy_from_state(cfg: RunConfig, state: dict[str, torch.Tensor]) -> Transformer:
    """The recipe's model holding the learner's gathered weights."""
    model = Transformer(cfg.model)
    model.load_state_dict(state, strict=False)  # a tied head arrives once, under the embedding's name
    return model


def evaluate_state(
    cfg: RunConfig, tokenizer: JointTokenizer, state: dict[str, torch.Tensor], env_ids: list[str],
    console: Console | None = None,
) -> EvalSummary:
    """The given weights on the recipe's held-out seeds, with the trainer's eval settings (progress on console)."""
    model = policy_from_state(cfg, state).eval().requires_grad_(False)
    t = cfg.trainer
    seeds = list(range(cfg.envs.eval_seeds.start, cfg.envs.eval_seeds.start + t.eval_seeds_per_env))
    return evaluate(
        model, tokenizer, cfg, env_ids, seeds, temperature=t.eval_temperature, max_rows=cfg.rollout.max_rows,
        samples=t.eval_samples, seed=t.seed, console=console,
    )


def _sampled_tokens(trajectories) -> float:
    return float(sum(t.loss_mask.sum() for t in trajectories))


def default_init(cfg: RunConfig) -> Path:
    """The checkpoint `jointrl sft` writes for this recipe, which `train` starts from by default."""
    return checkpoint_dir(cfg) / "sft"


def _start(cfg: RunConfig, init: Path | None, resume: bool, console: Console) -> _Run:
    torch.manual_seed(cfg.trainer.seed)
    run_dir = Path(cfg.tracking.run_dir)
    root = checkpoint_dir(cfg) / "rl"
    saved = latest_checkpoint(root) if resume else None
    if resume and saved is None:
        console.print(f"no complete checkpoint under {root}: starting from the beginning")
    trainer_state = torch.load(saved / STATE_FILE, weights_only=False) if saved else None
    init = Path(trainer_state["init"]) if trainer_state else Path(init or default_init(cfg))
    if not (init / "config.json").is_file():
        raise ValueError(f"no model checkpoint at {init}: run `jointrl sft` on the recipe first, or pass --init CKPT")
    tokenizer = load_tokenizer(init)
    learner_placement = start_ray(cfg.rollout.workers, cfg.learner.ranks, gpus=torch.cuda.is_available(),
                                  address=cfg.ray.address, run_dir=cfg.tracking.run_dir)
    # The ranks read the checkpoint themselves.
    learner = LearnerGroup(cfg, init, placement=learner_placement, pad_id=tokenizer.pad_id)
    sampler, mixer, alarms = TaskSampler.from_config(cfg), RewardMixer.from_config(cfg.rewards), RewardAlarms(cfg.rewards.alarms)
    start_step, run_id = 0, None
    if trainer_state:
        learner.load(saved / "learner")
        sampler.load_state_dict(trainer_state["sampler"])
        mixer.load_state_dict(trainer_state["mixer"])
        alarms.load_state_dict(trainer_state["alarms"])
        set_rng_state(trainer_state["rng"])
        start_step, run_id = trainer_state["step"], trainer_state["tracker_run_id"]
        console.print(f"resumed from {saved} at step {start_step}")
    tasks = cfg.trainer.prompts_per_step * cfg.rollout.group_size
    rollouts = RolloutManager(
        cfg.model, tokenizer, cfg.rollout, placement=Placement(num_cpus=1), max_rows=cfg.rollout.max_rows,
        # One chunk per worker and step keeps each worker's engine batch full; faults still isolate per task.
        chunk_size=max(1, -(-tasks // cfg.rollout.workers)),
    )
    if cfg.rollout.weight_transport == "collective":
        try:
            # Formed once here; the manager re-forms it when it restarts a worker and leaves it at shutdown.
            spec = rollouts.attach_collective(CollectiveGroup(learner.senders)).spec
        except Exception:
            rollouts.shutdown()
            learner.shutdown()
            raise
        console.print(f"weight sync: collective, {spec.backend} broadcasts from {spec.senders} learner ranks to "
                      f"{spec.workers} rollout workers")
    # Resuming with no checkpoint starts at step 0, so every metrics line of the crashed run is rolled back.
    tracker = Tracker(
        cfg, run_dir, resume_id=run_id, resume_step=start_step if resume else None, console=console,
        env_mix=sampler.probabilities(),
    )
    return _Run(tokenizer, sampler, mixer, alarms, learner, rollouts, tracker, init, start_step)


def _publish(cfg: RunConfig, run: _Run, version: int):
    """The learner ranks' weights as `version`, in the rollout workers' bucket size, expert format and transport."""
    collective = run.rollouts.collective
    return run.learner.publish(version, run.rollouts.sync.bucket_bytes, cfg.rollout.mxfp4_experts,
                               transport=collective.transport if collective is not None else None)


def _save(cfg: RunConfig, run: _Run, step: int, sampler_state: dict) -> Path:
    def write(directory: Path) -> None:
        run.learner.export(directory / "model", run.tokenizer)
        run.learner.save(directory / "learner")
        (directory / "recipe.yaml").write_text(dump_config(cfg))
        torch.save({
            "step": step, "init": str(run.init), "sampler": sampler_state, "mixer": run.mixer.state_dict(),
            "alarms": run.alarms.state_dict(), "rng": rng_state(), "tracker_run_id": run.tracker.run_id,
        }, directory / STATE_FILE)

    return save_checkpoint(checkpoint_dir(cfg) / "rl", step, write, cfg.checkpoint.keep_last)
