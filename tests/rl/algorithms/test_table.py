"""The algorithm table, sequence advantages and rl_loss: hand numbers, a naive per-token reference, and
split invariance (two micro-batches sum to the unsplit batch)."""
import math
import typing

import pytest
import torch

from jointrl.rl.algorithms.table import ALGORITHMS, POLICY_LOSSES, LossInputs, rl_loss, sequence_advantages
from jointrl.rl.config.training import AlgorithmConfig, AlgorithmName


def t(values):
    return torch.tensor(values, dtype=torch.float32)


def test_every_configurable_algorithm_has_an_entry():
    assert set(ALGORITHMS) == set(typing.get_args(AlgorithmName))
    assert all(a.policy_loss in POLICY_LOSSES for a in ALGORITHMS.values())
    assert [name for name, a in ALGORITHMS.items() if a.critic] == ["ppo"]
    assert ALGORITHMS["ppo"].advantages is None


# One group of four with rewards [1, 0, 1, 1] (mean 0.75, population std sqrt(0.1875)) and a group of two
# with [2, 4] (mean 3, std 1).
REWARDS = [1.0, 0.0, 1.0, 1.0, 2.0, 4.0]
GROUPS = [0, 0, 0, 0, 1, 1]
VALID = [True] * 6
S = math.sqrt(0.1875)
# REINFORCE++: centred [.25, -.75, .25, .25, -1, 1] has mean 0 and population variance 2.75 / 6
W = math.sqrt(2.75 / 6)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("grpo", [0.25 / S, -0.75 / S, 0.25 / S, 0.25 / S, -1, 1]),
        ("gspo", [0.25 / S, -0.75 / S, 0.25 / S, 0.25 / S, -1, 1]),
        ("dr_grpo", [0.25, -0.75, 0.25, 0.25, -1, 1]),
        ("rloo", [1 / 3, -1, 1 / 3, 1 / 3, -2, 2]),
        ("reinforce_pp", [0.25 / W, -0.75 / W, 0.25 / W, 0.25 / W, -1 / W, 1 / W]),
    ],
)
def test_sequence_advantages_by_hand(name, expected):
    assert sequence_advantages(name, REWARDS, GROUPS, VALID).tolist() == pytest.approx(expected, abs=1e-5)
    as_tensors = sequence_advantages(name, t(REWARDS), torch.tensor(GROUPS), torch.tensor(VALID))
    assert as_tensors.tolist() == pytest.approx(expected, abs=1e-5)


def test_sequence_advantages_errors():
    with pytest.raises(ValueError, match="'ppo' takes its advantages from GAE"):
        sequence_advantages("ppo", REWARDS, GROUPS, VALID)
    with pytest.raises(ValueError, match="unknown algorithm 'a2c'"):
        sequence_advantages("a2c", REWARDS, GROUPS, VALID)


def random_batch(n=4, seq=6, critic=False):
    """A micro-batch with prompt positions, a tool-result gap, an empty row, and ratios that reach every clip."""
    g = torch.Generator().manual_seed(1)
    old = -torch.rand(n, seq, generator=g) * 3
    mask = t([[0, 1, 1, 0, 1, 1], [0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]])[:n]
    logprobs = (old + torch.randn(n, seq, generator=g) * 0.4).requires_grad_()
    x = LossInputs(
        logprobs=logprobs,
        old_logprobs=old,
        behavior_logprobs=old + torch.randn(n, seq, generator=g) * 0.5,
        advantages=torch.randn(n, 1, generator=g).expand(n, seq).clone(),
        mask=mask,
        entropy=torch.rand(n, seq, generator=g).requires_grad_(),
        ref_logprobs=old + torch.randn(n, seq, generator=g) * 0.3,
    )
    if critic:
        x.values = torch.randn(n, seq, generator=g).requires_grad_()
        x.old_values = x.values.detach() + torch.randn(n, seq, generator=g) * 0.3
        x.returns = torch.randn(n, seq, generator=g)
        x.advantages = torch.randn(n, seq, generator=g)
    return x


def totals(mask):
    return mask.sum().item(), (mask.sum(-1) > 0).sum().item()


def test_rl_loss_matches_a_naive_per_token_loop():
    # grpo, token mean, clip-higher, dual-clip, token TIS, k3 KL loss and an entropy bonus
    cfg = AlgorithmConfig(
        name="grpo", clip_eps_low=0.2, clip_eps_high=0.28, dual_clip_c=1.8, tis_cap=1.5,
        kl_coef=0.1, kl_estimator="k3", entropy_coef=0.01,
    )
    x = random_batch()
    n_tok, n_seq = totals(x.mask)
    loss, metrics = rl_loss(cfg, x, n_tok, n_seq)

    policy = kl = entropy = 0.0
    lp, old, beh, ref = (v.tolist() for v in (x.logprobs.detach(), x.old_logprobs, x.behavior_logprobs, x.ref_logprobs))
    for i, row in enumerate(x.mask.tolist()):
        for j, m in enumerate(row):
            if not m:
                continue
            a = x.advantages[i, j].item()
            r = math.exp(lp[i][j] - old[i][j])
            surrogate = min(r * a, min(max(r, 0.8), 1.28) * a)
            if a < 0:
                surrogate = max(surrogate, 1.8 * a)
            weight = min(math.exp(old[i][j] - beh[i][j]), 1.5)
            policy += -surrogate * weight
            kl += math.exp(ref[i][j] - lp[i][j]) - (ref[i][j] - lp[i][j]) - 1
            entropy += x.entropy[i, j].item()
    expected = (policy + 0.1 * kl - 0.01 * entropy) / n_tok
    # the batch takes every branch: clipped, dual-clipped and truncated tokens
    assert min(metrics["policy/clip_frac"], metrics["policy/dual_clip_frac"], metrics["policy/tis_truncated_frac"]) > 0
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert metrics["loss/total"] == pytest.approx(expected, rel=1e-5)
    assert metrics["loss/policy"] == pytest.approx(policy / n_tok, rel=1e-5)
    assert metrics["loss/kl"] == pytest.approx(0.1 * kl / n_tok, rel=1e-5)
    assert metrics["loss/entropy"] == pytest.approx(-0.01 * entropy / n_tok, rel=1e-5)
    assert metrics["policy/kl_ref"] == pytest.approx(kl / n_tok, rel=1e-5)


def test_rl_loss_kl_reward_mode_shifts_the_advantage_by_hand():
    # ratio 1 everywhere (no clipping, TIS weight 1); k1 = logp - ref = 0.5, 0.3; A = 1 - 0.1 * k1 = 0.95, 0.97
    cfg = AlgorithmConfig(name="grpo", kl_coef=0.1, kl_mode="reward", kl_estimator="k1")
    logprobs = t([[-1.0, -2.0]]).requires_grad_()
    x = LossInputs(
        logprobs=logprobs, old_logprobs=logprobs.detach(), behavior_logprobs=logprobs.detach(),
        advantages=t([[1.0, 1.0]]), mask=t([[1, 1]]), ref_logprobs=t([[-1.5, -2.3]]),
    )
    loss, metrics = rl_loss(cfg, x, total_tokens=2, total_sequences=1)
    assert loss.item() == pytest.approx(-(0.95 + 0.97) / 2)
    assert "loss/kl" not in metrics
    assert metrics["policy/kl_ref"] == pytest.approx(0.4)
    loss.backward()
    # the KL reward is a constant: the gradient is -A_t * r_t / 2 only
    assert logprobs.grad.tolist()[0] == pytest.approx([-0.475, -0.485])


def test_rl_loss_gspo_aggregates_per_sequence_whatever_loss_agg_says():
    # two sequences of 1 and 3 tokens, log ratio 0.1 on each token (s = exp(0.1), inside [0.8, 1.2])
    cfg = AlgorithmConfig(name="gspo", loss_agg="token", tis_cap=None)
    old = t([[-1.0, -1.0, -1.0], [-1.0, -1.0, -1.0]])
    x = LossInputs(
        logprobs=(old + 0.1).requires_grad_(), old_logprobs=old, behavior_logprobs=old,
        advantages=t([[2.0, 2.0, 2.0], [-1.0, -1.0, -1.0]]), mask=t([[1, 0, 0], [1, 1, 1]]),
    )
    loss, _ = rl_loss(cfg, x, total_tokens=4, total_sequences=2)
    s = math.exp(0.1)
    # per-sequence mean: (-2 s + s) / 2; a token mean would be (-2 s + 3 s) / 4
    assert loss.item() == pytest.approx((-2 * s + s) / 2, rel=1e-6)


def test_rl_loss_gspo_kl_reward_uses_the_sequence_mean_kl():
    # ratio 1; the prompt position (advantage 5, k1 2.0) is masked; k1 = 0.5, 0.3 on the two policy tokens:
    # sequence advantage 1 - 0.1 * (0.5 + 0.3) / 2 = 0.96, loss -0.96, gradient -0.96 / 2 per policy token
    cfg = AlgorithmConfig(name="gspo", kl_coef=0.1, kl_mode="reward", kl_estimator="k1", tis_cap=None)
    logprobs = t([[-0.5, -1.0, -2.0]]).requires_grad_()
    x = LossInputs(
        logprobs=logprobs, old_logprobs=logprobs.detach(), behavior_logprobs=logprobs.detach(),
        advantages=t([[5.0, 1.0, 1.0]]), mask=t([[0, 1, 1]]), ref_logprobs=t([[-2.5, -1.5, -2.3]]),
    )
    loss, _ = rl_loss(cfg, x, total_tokens=2, total_sequences=1)
    assert loss.item() == pytest.approx(-0.96)
    loss.backward()
    assert logprobs.grad.tolist()[0] == pytest.approx([0, -0.48, -0.48])


def test_rl_loss_ppo_adds_the_value_term_by_hand():
    cfg = AlgorithmConfig(name="ppo", tis_cap=None, value_coef=0.5, value_clip=None)
    lp = t([[-1.0, -1.0]]).requires_grad_()
    x = LossInputs(
        logprobs=lp, old_logprobs=lp.detach(), behavior_logprobs=lp.detach(), advantages=t([[1.0, -2.0]]),
        mask=t([[1, 1]]), values=t([[1.0, 2.0]]).requires_grad_(), old_values=t([[1.0, 2.0]]),
        returns=t([[0.0, 4.0]]),
    )
    loss, metrics = rl_loss(cfg, x, total_tokens=2, total_sequences=1)
    # policy: -(1 - 2) / 2 = 0.5; value: 0.5 * mean(0.5 * 1, 0.5 * 4) = 0.625
    assert metrics["loss/policy"] == pytest.approx(0.5)
    assert metrics["loss/value"] == pytest.approx(0.625)
    assert metrics["value/mean"] == pytest.approx(1.5)
    assert loss.item() == pytest.approx(1.125)


def test_dr_grpo_defaults_to_its_constant_normaliser_and_the_others_to_the_token_mean():
    x = random_batch(critic=False)
    x.logprobs = x.old_logprobs.clone().requires_grad_()  # ratio 1: the PPO term of a token is -A
    n_tok, n_seq = totals(x.mask)
    grpo, _ = rl_loss(AlgorithmConfig(name="grpo", tis_cap=None), x, n_tok, n_seq, token_budget=50)
    dr, _ = rl_loss(AlgorithmConfig(name="dr_grpo", tis_cap=None), x, n_tok, n_seq, token_budget=50)
    per_token = torch.where(x.mask > 0, -x.advantages, 0.0).sum()
    assert grpo.item() == pytest.approx((per_token / n_tok).item(), rel=1e-6)
    assert dr.item() == pytest.approx((per_token / (n_seq * 50)).item(), rel=1e-6)
    explicit, _ = rl_loss(AlgorithmConfig(name="dr_grpo", loss_agg="token", tis_cap=None), x, n_tok, n_seq, 50)
    assert explicit.item() == pytest.approx(grpo.item(), rel=1e-6)


SPLIT_CONFIGS = {
    "grpo-token": AlgorithmConfig(name="grpo", kl_coef=0.05, entropy_coef=0.01, dual_clip_c=1.8),
    "dr_grpo-sequence-tis": AlgorithmConfig(
        name="dr_grpo", loss_agg="sequence", tis_level="sequence", tis_cap=1.2, kl_coef=0.1, kl_estimator="k2"
    ),
    "dr_grpo-default": AlgorithmConfig(name="dr_grpo", kl_coef=0.1, entropy_coef=0.01),
    "gspo-kl-reward": AlgorithmConfig(name="gspo", kl_coef=0.1, kl_mode="reward", entropy_coef=0.02),
    "ppo-critic": AlgorithmConfig(name="ppo", kl_coef=0.05, kl_estimator="k1", value_clip=0.1, entropy_coef=0.01),
}


def rows(x: LossInputs, index: slice) -> LossInputs:
    """The micro-batch of rows `index`, sharing leaves with x so gradients land on the same tensors."""
    fields = {k: (None if v is None else v[index]) for k, v in vars(x).items()}
    return LossInputs(**fields)


@pytest.mark.parametrize("name", list(SPLIT_CONFIGS))
def test_rl_loss_two_micro_batches_sum_to_the_unsplit_batch(name):
    cfg = SPLIT_CONFIGS[name]
    x = random_batch(critic=ALGORITHMS[cfg.name].critic)
    n_tok, n_seq = totals(x.mask)
    whole, whole_metrics = rl_loss(cfg, x, n_tok, n_seq, token_budget=20)
    whole.backward()
    whole_grad = x.logprobs.grad.clone()
    x.logprobs.grad = None

    parts = [rl_loss(cfg, rows(x, index), n_tok, n_seq, token_budget=20) for index in (slice(0, 1), slice(1, 4))]
    sum(loss for loss, _ in parts).backward()
    assert sum(loss.item() for loss, _ in parts) == pytest.approx(whole.item(), rel=1e-5, abs=1e-7)
    assert torch.allclose(x.logprobs.grad, whole_grad, atol=1e-7)
    assert parts[0][1].keys() == whole_metrics.keys()
    for key, value in whole_metrics.items():
        combined = max if key.endswith("_max") else sum
        assert combined(m[key] for _, m in parts) == pytest.approx(value, rel=1e-5, abs=1e-7), key


def test_rl_loss_metric_names():
    cfg = SPLIT_CONFIGS["ppo-critic"]
    x = random_batch(critic=True)
    _, metrics = rl_loss(cfg, x, *totals(x.mask))
    assert set(metrics) == {
        "loss/policy", "loss/kl", "loss/entropy", "loss/value", "loss/total", "policy/ratio_mean",
        "policy/clip_frac", "policy/dual_clip_frac", "policy/tis_weight_mean", "policy/tis_truncated_frac",
        "policy/entropy", "policy/kl_ref", "mismatch/kl", "mismatch/abs_logdiff", "mismatch/max_ratio_max",
        "value/mean",
    }
    terms = ("loss/policy", "loss/kl", "loss/entropy", "loss/value")
    assert sum(metrics[k] for k in terms) == pytest.approx(metrics["loss/total"], rel=1e-5)


def test_rl_loss_tis_metrics_by_hand():
    # old - behaviour = ln 3, ln 0.5, ln 1.5 on three tokens, cap 2 -> weights 2, 0.5, 1.5
    cfg = AlgorithmConfig(name="grpo", tis_cap=2.0)
    lp = t([[-1.0, -1.0, -1.0, 0.0]]).requires_grad_()
    x = LossInputs(
        logprobs=lp, old_logprobs=lp.detach(),
        behavior_logprobs=lp.detach() - t([[math.log(3), math.log(0.5), math.log(1.5), 4.0]]),
        advantages=t([[1.0, 1.0, 1.0, 1.0]]), mask=t([[1, 1, 1, 0]]),
    )
    loss, metrics = rl_loss(cfg, x, total_tokens=3, total_sequences=1)
    assert loss.item() == pytest.approx(-(2 + 0.5 + 1.5) / 3, rel=1e-6)
    assert metrics["policy/tis_weight_mean"] == pytest.approx(4 / 3, rel=1e-6)
    assert metrics["policy/tis_truncated_frac"] == pytest.approx(1 / 3)
    assert metrics["mismatch/max_ratio_max"] == pytest.approx(3.0, rel=1e-6)


def test_rl_loss_errors():
    x = random_batch()
    n_tok, n_seq = totals(x.mask)
    without_ref = rows(x, slice(0, 4))
    without_ref.ref_logprobs = None
    with pytest.raises(ValueError, match="ref_logprobs is None but kl_coef=0.1"):
        rl_loss(AlgorithmConfig(kl_coef=0.1), without_ref, n_tok, n_seq)
    without_entropy = rows(x, slice(0, 4))
    without_entropy.entropy = None
    with pytest.raises(ValueError, match="entropy is None but entropy_coef=0.01"):
        rl_loss(AlgorithmConfig(entropy_coef=0.01), without_entropy, n_tok, n_seq)
    with pytest.raises(ValueError, match="values is None but algorithm 'ppo'"):
        rl_loss(AlgorithmConfig(name="ppo"), x, n_tok, n_seq)
    with pytest.raises(ValueError, match="dual_clip_c=2.0 is not defined for gspo"):
        rl_loss(AlgorithmConfig(name="gspo", dual_clip_c=2.0), x, n_tok, n_seq)
    bad_shape = rows(x, slice(0, 4))
    bad_shape.advantages = bad_shape.advantages[:, :3]
    with pytest.raises(ValueError, match="LossInputs.advantages has shape"):
        rl_loss(AlgorithmConfig(), bad_shape, n_tok, n_seq)
    with pytest.raises(ValueError, match="total_tokens must be > 0"):
        rl_loss(AlgorithmConfig(), x, 0, n_seq)
