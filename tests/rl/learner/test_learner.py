"""The learner group as real Ray actors with DeepSpeed on gloo: EP parity, a full training step, the NaN guard, resume.

Trajectories are synthesized (random tokens, a trained suffix, behaviour log-probs, advantages); routing replay
is off or r2 (r2 replays the learner's own old-pass routing, so no recorded routing is needed).
"""
import pytest
import torch

from jointrl.envs.episode import Episode
from jointrl.model.transformer import Transformer
from jointrl.rl.actor_group import Placement
from jointrl.rl.config.run import RunConfig
from jointrl.rl.learner.batch import pack, samples_from_trajectories, split_for_ranks, split_minibatches
from jointrl.rl.learner.group import LearnerGroup
from jointrl.rl.trajectory import Trajectory

# Two ranks share the session's 2 CPUs with room for nothing else; one torch thread each.
PLACEMENT = Placement(num_cpus=0.5, runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}}, ready_timeout_s=120)
# EP=2 vs EP=1 differ only in summation order (all-to-all, reduce-scatter, per-rank micro-batches):
# losses and gradient norms to 1e-5 relative. Weights move by at most ~lr = 1e-3 per Adam step; they must agree
# to 2e-6 (0.2% of a step; measured: 1e-6 at most), except that Adam magnifies rounding where a clipped
# gradient is below its eps (1e-8): there the update is ~g / eps, so a weight whose gradient cancels to
# ~1e-8 can differ by a few % of a step. The same outliers (2 of 3e5 weights, 3e-5) appear between two
# one-rank runs that only pack micro-batches differently, so they are rounding, not EP. Allowed: at most
# 1 weight in 10^4 beyond 2e-6, none beyond 1e-4. Router biases move by +-rate from integer loads: exact.
LOSS_RTOL = 1e-5
WEIGHT_ATOL = 2e-6
OUTLIER_ATOL = 1e-4
OUTLIER_FRACTION = 1e-4


def assert_states_match(actual: dict, expected: dict) -> None:
    """Weights within WEIGHT_ATOL (rare Adam-eps outliers within OUTLIER_ATOL), router biases bit-identical."""
    assert actual.keys() == expected.keys()
    far, total = 0, 0
    for key, want in expected.items():
        if key.endswith("e_score_correction_bias"):
            assert torch.equal(actual[key], want), key
            continue
        err = (actual[key] - want).abs()
        assert err.max() <= OUTLIER_ATOL, f"{key}: max error {err.max():.3g}"
        far += int((err > WEIGHT_ATOL).sum())
        total += want.numel()
    assert far <= OUTLIER_FRACTION * total, f"{far} of {total} weights differ by more than {WEIGHT_ATOL}"


def synth_trajectories(cfg: RunConfig, n: int, seed: int = 0) -> tuple[list[Trajectory], list[float]]:
    """n trajectories of 8..40 tokens with a trained suffix, behaviour log-probs near the model's, and advantages."""
    g = torch.Generator().manual_seed(seed)
    trajectories, advantages = [], []
    for i in range(n):
        length = int(torch.randint(8, 41, (1,), generator=g))
        tokens = torch.randint(1, cfg.model.vocab_size, (length,), generator=g)
        mask = torch.zeros(length)
        mask[int(torch.randint(1, length // 2, (1,), generator=g)) :] = 1.0
        behavior = torch.where(mask > 0, -torch.rand(length, generator=g) * 0.5 - 6.0, 0.0)
        version = torch.where(mask > 0, 0, -1)
        episode = Episode(
            env_id="test/synth-v0:easy", domain="test", family="synth", difficulty="easy", seed=i, tier="low"
        )
        trajectories.append(Trajectory(episode, tokens, mask, behavior, version, reward=float(i % 2)))
        advantages.append(float(torch.randn((), generator=g)))
    return trajectories, advantages


def run_config(preset: str = "debug", **learner) -> RunConfig:
    """A run config for the learner tests; learner overrides on top of small-batch defaults."""
    fields = dict(ranks=1, ep_size=1, zero_stage=1, lr=1e-3, micro_batch_tokens=96)
    fields.update(learner)
    return RunConfig(
        model={"preset": preset},
        algorithm={"routing_replay": "off"},
        learner=fields,
        trainer={"seed": 0},
    )


def initial_state(cfg: RunConfig) -> dict[str, torch.Tensor]:
    """A freshly initialised policy state (seeded by the test fixture)."""
    return {k: v.clone() for k, v in Transformer(cfg.model).state_dict().items()}


def changed_keys(before, after):
    """Keys whose tensors differ."""
    return {k for k in before if not torch.equal(before[k], after[k])}


@pytest.mark.parametrize("zero_stage", [1, 2])
def test_ep2_two_ranks_match_one_rank(ray_session, zero_stage):
    """ranks=2, ep_size=2 (ZeRO-1 or 2) vs ranks=1: same loss, grad norm and updated weights after two updates.

    The batch exercises clipping (grad_clip below the norm), KL to the reference, entropy, r2 replay of the
    old pass, two mini-batches (two optimizer steps) and ranks with different micro-batch counts (fillers).
    A second step on two trajectories leaves rank 1 without any sample (a filler-only rank).
    """
    common = dict(grad_clip=0.05, updates_per_step=2, micro_batch_tokens=64)
    algorithm = {"routing_replay": "r2", "kl_coef": 0.1, "entropy_coef": 0.01}
    cfg_one = run_config(**common).model_copy(update={"algorithm": run_config().algorithm.model_copy(update=algorithm)})
    two = cfg_one.learner.model_copy(update=dict(ranks=2, ep_size=2, zero_stage=zero_stage))
    cfg_two = cfg_one.model_copy(update={"learner": two})
    state = initial_state(cfg_one)
    trajectories, advantages = synth_trajectories(cfg_one, 9, seed=1)
    small = synth_trajectories(cfg_one, 2, seed=5)

    # The layout really is uneven: some mini-batch packs into different micro-batch counts on the two ranks.
    minibatches = split_minibatches(samples_from_trajectories(trajectories, advantages), 2)
    counts = [[len(pack(share, 64, 0)) for share in split_for_ranks(mb, 2)] for mb in minibatches]
    assert any(a != b for a, b in counts), counts
    small_minibatches = split_minibatches(samples_from_trajectories(*small), 2)
    assert all([len(share) for share in split_for_ranks(mb, 2)] == [1, 0] for mb in small_minibatches)

    results = {}
    for name, cfg in (("one", cfg_one), ("two", cfg_two)):
        group = LearnerGroup(cfg, state, placement=PLACEMENT)
        try:
            metrics = group.train_step(trajectories, advantages)
            after_first = group.state_dict()
            second = group.train_step(*small)
            results[name] = (metrics, after_first, second, group.state_dict())
        finally:
            group.shutdown()

    (m1, s1, second1, final1), (m2, s2, second2, final2) = results["one"], results["two"]
    assert m1["learner/skipped"] == m2["learner/skipped"] == 0.0
    # The clip is active, so the update depends on the norm too.
    assert m1["learner/grad_norm"] > cfg_one.learner.grad_clip
    for key in ("learner/loss", "loss/total", "loss/kl", "policy/entropy", "learner/grad_norm"):
        assert m2[key] == pytest.approx(m1[key], rel=LOSS_RTOL), key
    assert s1.keys() == state.keys()
    assert changed_keys(state, s1) == set(state), "every weight and router bias moves in two updates"
    assert_states_match(s2, s1)
    for key in ("learner/loss", "learner/grad_norm"):
        assert second2[key] == pytest.approx(second1[key], rel=LOSS_RTOL), key
    assert second1["learner/skipped"] == second2["learner/skipped"] == 0.0
    assert_states_match(final2, final1)


def test_tiny_step_changes_every_trainable_parameter(ray_session):
    """One step on the quickstart preset moves every parameter and every router bias, and keeps them finite."""
    cfg = run_config("tiny", micro_batch_tokens=256)
    state = initial_state(cfg)
    trajectories, advantages = synth_trajectories(cfg, 6, seed=1)
    group = LearnerGroup(cfg, state, placement=PLACEMENT)
    try:
        metrics = group.train_step(trajectories, advantages)
        after = group.state_dict()
    finally:
        group.shutdown()
    assert metrics["learner/skipped"] == 0.0
    assert metrics["learner/tokens"] == sum(t.tokens.shape[0] - 1 for t in trajectories)
    unchanged = set(state) - changed_keys(state, after)
    assert not unchanged, f"not updated: {sorted(unchanged)}"
    assert any(k.endswith("e_score_correction_bias") for k in state)
    assert all(torch.isfinite(v).all() for v in after.values())
    # Each tensor owns exactly its bytes: a view into ZeRO's flat buffer would ship the whole buffer per tensor.
    assert all(v.untyped_storage().nbytes() == v.numel() * v.element_size() for v in after.values())


@pytest.mark.parametrize("which", ["all", "final"])
def test_norm_lr_scale_moves_norm_gains_by_that_multiple_of_the_lr(ray_session, which):
    """Adam's first step moves each weight by about lr (m / sqrt(v) = sign of its gradient): norm gains by
    lr x norm_lr_scale, every other weight by lr; the set of gains is every 1-D *norm.weight, or with
    norm_lr_gains "final" the final norm's alone."""
    lr, scale = 1e-4, 50.0
    cfg = run_config(lr=lr, norm_lr_scale=scale, norm_lr_gains=which, grad_clip=None)
    state = initial_state(cfg)
    group = LearnerGroup(cfg, state, placement=PLACEMENT)
    try:
        group.train_step(*synth_trajectories(cfg, 6, seed=2))
        after = group.state_dict()
    finally:
        group.shutdown()
    every_gain = {k for k, v in state.items() if v.ndim == 1 and k.endswith("norm.weight")}
    assert {"norm.weight"} < every_gain and any("layernorm" in k for k in every_gain)
    gains = every_gain if which == "all" else {"norm.weight"}
    for key, before in state.items():
        if key.endswith("e_score_correction_bias"):
            continue  # moved by the balancing rule, not the optimizer
        step = (after[key] - before).abs()
        moved = step[step > 0]
        want = lr * scale if key in gains else lr
        # |m / (sqrt(v) + eps)| = |g| / (|g| + eps) <= 1, and near 1 unless |g| is within ~100x of eps (the
        # indexer's norm bias has gradients ~1e-7 here: 0.6-0.99 of a step); slack is the fp32 rounding of
        # w - step (an ulp of dt_bias ~ 4.7 is 4.8e-7).
        slack = 2 * torch.finfo(torch.float32).eps * float(before.abs().max())
        assert step.max() <= want + slack, key
        assert moved.numel() and moved.median() >= want * 0.9 - slack, key


def test_nan_guard_skips_the_step_on_every_rank(ray_session):
    """A NaN advantage on one rank's sample: both ranks skip, weights and router biases stay bit-identical."""
    cfg = run_config(ranks=2, ep_size=2, zero_stage=2, warmup_steps=2)
    state = initial_state(cfg)
    trajectories, advantages = synth_trajectories(cfg, 4, seed=2)
    poisoned = list(advantages)
    poisoned[0] = float("nan")
    group = LearnerGroup(cfg, state, placement=PLACEMENT)
    try:
        skipped = group.train_step(trajectories, poisoned)
        after_skip = group.state_dict()
        normal = group.train_step(trajectories, advantages)
        after_normal = group.state_dict()
    finally:
        group.shutdown()
    assert skipped["learner/skipped"] == 1.0
    assert skipped["learner/grad_norm"] == float("inf")
    assert not changed_keys(state, after_skip), "a skipped step must not touch any weight or bias"
    assert normal["learner/skipped"] == 0.0
    assert torch.isfinite(torch.tensor(normal["learner/grad_norm"]))
    assert changed_keys(state, after_normal) == set(state)
    # The skipped step did not advance the warm-up schedule: the next step still runs at its first lr.
    assert skipped["learner/lr"] == normal["learner/lr"] == pytest.approx(cfg.learner.lr / 2)


def test_save_load_continues_bit_for_bit(ray_session, tmp_path):
    """step, save, step == step, (new group) load, step: identical weights, optimizer and schedule (fp32)."""
    # norm_lr_scale gives the norm gains their own optimizer group, which the checkpoint must restore too.
    cfg = run_config(ranks=2, ep_size=2, zero_stage=2, warmup_steps=3, norm_lr_scale=10.0).model_copy(
        update={"algorithm": run_config().algorithm.model_copy(update={"kl_coef": 0.05})}
    )
    state = initial_state(cfg)
    first = synth_trajectories(cfg, 4, seed=3)
    second = synth_trajectories(cfg, 4, seed=4)

    group = LearnerGroup(cfg, state, placement=PLACEMENT)
    try:
        group.train_step(*first)
        group.save(tmp_path / "ckpt")
        uninterrupted = group.train_step(*second)
        expected = group.state_dict()
    finally:
        group.shutdown()
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["learner_rank000.pt", "learner_rank001.pt"]

    # The new group starts from other weights: everything that matters must come from the checkpoint.
    resumed_group = LearnerGroup(cfg, initial_state(cfg), placement=PLACEMENT)
    try:
        resumed_group.load(tmp_path / "ckpt")
        resumed = resumed_group.train_step(*second)
        actual = resumed_group.state_dict()
    finally:
        resumed_group.shutdown()
    assert resumed["learner/lr"] == uninterrupted["learner/lr"] == pytest.approx(cfg.learner.lr * 2 / 3)
    assert resumed["learner/loss"] == uninterrupted["learner/loss"]
    assert not changed_keys(expected, actual)
