"""Per-token loss terms and their aggregation against numbers worked out by hand in each test."""
import math

import pytest
import torch

from jointrl.rl.algorithms.losses import (
    aggregate,
    gspo_loss,
    kl_penalty,
    mismatch_metrics,
    ppo_clip_loss,
    truncated_importance_weights,
    value_loss,
)


def t(values):
    return torch.tensor(values, dtype=torch.float32)


def log_ratios(ratios):
    """logprobs [1, K] with grad whose ratios to old log-probs of 0 are exactly `ratios` in fp32."""
    logprobs = t([[math.log(r) for r in ratios]]).requires_grad_()
    # these ratios are exactly representable and exp(log(r)) round-trips in fp32: the edge tests rely on it
    assert torch.exp(logprobs.detach()).tolist()[0] == ratios
    return logprobs


def ppo(ratios, advantages, eps_low=0.5, eps_high=0.25, dual_clip_c=None):
    """(loss, info, d loss / d logprobs) for one row of tokens with old log-probs 0."""
    logprobs = log_ratios(ratios)
    loss, info = ppo_clip_loss(logprobs, torch.zeros_like(logprobs), t([advantages]), eps_low, eps_high, dual_clip_c)
    loss.sum().backward()
    return loss[0].tolist(), {k: v[0].tolist() for k, v in info.items()}, logprobs.grad[0].tolist()


def test_ppo_clip_upper_edge_positive_advantage():
    # clip range [0.5, 1.25], A = 2: on the edge 1.25 both branches give 2.5 and the gradient is d(rA)/dlogp
    # = rA; just above, the clipped branch holds the value at 2.5 with no gradient; just below, unclipped.
    above, below = 1.25 + 2**-20, 1.25 - 2**-20
    loss, info, grad = ppo([1.25, above, below, 0.25], [2.0, 2.0, 2.0, 2.0])
    assert loss == pytest.approx([-2.5, -2.5, -2 * below, -0.5], abs=1e-6)
    assert info["clipped"] == [0, 1, 0, 0]
    assert info["ratio"] == pytest.approx([1.25, above, below, 0.25])
    # a positive advantage below 1 - eps_low is not clipped: min picks the smaller, unclipped 0.25 * 2
    assert grad == pytest.approx([-2.5, 0, -2 * below, -0.5], abs=1e-6)


def test_ppo_clip_lower_edge_negative_advantage():
    # A = -2: below 0.5 the clipped branch (0.5 * -2) is the min, loss 1, no gradient; on the edge 0.5 both
    # agree; above 1 + eps_high a negative advantage keeps the unclipped (larger) loss 1.5 * 2 = 3.
    loss, info, grad = ppo([0.25, 0.5, 1.5], [-2.0, -2.0, -2.0])
    assert loss == pytest.approx([1.0, 1.0, 3.0])
    assert info["clipped"] == [1, 0, 0]
    assert info["dual_clipped"] == [0, 0, 0]
    assert grad == pytest.approx([0, 1.0, 3.0])


def test_dual_clip_only_for_negative_advantages_with_large_ratio():
    # c = 3: a negative-advantage loss is capped at -c A = 6.
    # r=4, A=-2: 8 -> 6 (engaged, no gradient); r=1.5, A=-2: 3 < 6; r=3, A=-2: exactly 6, not engaged;
    # r=4, A=+2: clipped at -1.25 * 2, dual-clip does not apply to positive advantages.
    loss, info, grad = ppo([4.0, 1.5, 3.0, 4.0], [-2.0, -2.0, -2.0, 2.0], dual_clip_c=3.0)
    assert loss == pytest.approx([6.0, 3.0, 6.0, -2.5])
    assert info["dual_clipped"] == [1, 0, 0, 0]
    assert info["clipped"] == [0, 0, 0, 1]
    assert grad == pytest.approx([0, 3.0, 6.0, 0])


def test_ppo_clip_errors():
    x = t([[0.0]])
    with pytest.raises(ValueError, match="eps_low"):
        ppo_clip_loss(x, x, x, -0.1, 0.2)
    with pytest.raises(ValueError, match="eps_high"):
        ppo_clip_loss(x, x, x, 0.2, -0.1)
    with pytest.raises(ValueError, match="dual_clip_c"):
        ppo_clip_loss(x, x, x, 0.2, 0.2, dual_clip_c=1.0)
    with pytest.raises(ValueError, match="advantages shape"):
        ppo_clip_loss(x, x, t([[0.0, 1.0]]), 0.2, 0.2)


GSPO_MASK = t([[1, 1, 1, 0], [0, 1, 1, 1]])
# log ratios; the masked entries (5.0 padding, 9.0 prompt) must not count
GSPO_LOG_RATIO = [[0.3, -0.1, 0.4, 5.0], [9.0, -0.2, -0.3, -0.1]]


def gspo_example():
    old = t([[-1.0, -2.0, -0.5, -3.0], [-1.5, -0.7, -1.1, -2.2]])
    logprobs = (old + t(GSPO_LOG_RATIO)).requires_grad_()
    return logprobs, old


def test_gspo_ratio_is_the_geometric_mean_of_token_ratios():
    logprobs, old = gspo_example()
    loss, info = gspo_loss(logprobs, old, t([1.0, -1.0]), GSPO_MASK, 0.2, 0.2)
    s0 = (math.exp(0.3) * math.exp(-0.1) * math.exp(0.4)) ** (1 / 3)  # = exp(0.2) = 1.2214
    s1 = (math.exp(-0.2) * math.exp(-0.3) * math.exp(-0.1)) ** (1 / 3)  # = exp(-0.2) = 0.8187
    assert info["ratio"].tolist() == [pytest.approx([s0] * 4, rel=1e-6), pytest.approx([s1] * 4, rel=1e-6)]
    # sequence 0: s0 > 1.2 with A = 1 -> clipped, -1.2; sequence 1: s1 > 0.8 with A = -1 -> unclipped, s1
    assert loss.tolist() == [pytest.approx([-1.2] * 4, rel=1e-6), pytest.approx([s1] * 4, rel=1e-6)]
    assert info["clipped"].tolist() == [[1] * 4, [0] * 4]
    assert info["dual_clipped"].tolist() == [[0] * 4, [0] * 4]


def test_gspo_sequence_aggregation_gives_the_paper_objective_and_gradient():
    logprobs, old = gspo_example()
    advantages = t([1.0, -1.0])
    loss, _ = gspo_loss(logprobs, old, advantages, GSPO_MASK, 0.2, 0.2)
    value = aggregate(loss, GSPO_MASK, "sequence", total_tokens=6, total_sequences=2)
    value.backward()

    # the paper's sequence form: s_i = exp(mean of masked log ratios), J = -(1/G) sum_i min(s_i A_i, clip(s_i) A_i)
    paper_logprobs = logprobs.detach().clone().requires_grad_()
    terms = []
    for i in range(2):
        kept = [j for j in range(4) if GSPO_MASK[i, j] == 1]
        s = torch.exp(sum(paper_logprobs[i, j] - old[i, j] for j in kept) / len(kept))
        a = advantages[i]
        terms.append(-torch.minimum(s * a, s.clamp(0.8, 1.2) * a))
    paper = sum(terms) / 2
    paper.backward()

    s1 = math.exp(-0.2)
    assert value.item() == pytest.approx((-1.2 + s1) / 2, rel=1e-6)
    assert value.item() == pytest.approx(paper.item(), rel=1e-6)
    # by hand: the clipped sequence 0 has no gradient; sequence 1: d/dlogp_t of -s1 A / 2 = s1 / (3 * 2)
    expected = [[0, 0, 0, 0], [0, s1 / 6, s1 / 6, s1 / 6]]
    assert logprobs.grad.tolist() == [pytest.approx(row, abs=1e-7) for row in expected]
    assert torch.allclose(logprobs.grad, paper_logprobs.grad, atol=1e-7)


def test_gspo_errors():
    logprobs, old = gspo_example()
    with pytest.raises(ValueError, match="one per sequence"):
        gspo_loss(logprobs, old, t([[1.0] * 4, [1.0] * 4]), GSPO_MASK, 0.2, 0.2)
    with pytest.raises(ValueError, match="mask shape"):
        gspo_loss(logprobs, old, t([1.0, 1.0]), t([[1.0]]), 0.2, 0.2)


def test_kl_estimators_by_hand():
    # l = logp - ref = 0.5, -0.5, 0
    logprobs = t([[-1.0, -2.0, -0.7]]).requires_grad_()
    ref = t([[-1.5, -1.5, -0.7]])
    assert kl_penalty(logprobs, ref, "k1").tolist()[0] == pytest.approx([0.5, -0.5, 0])
    assert kl_penalty(logprobs, ref, "k2").tolist()[0] == pytest.approx([0.125, 0.125, 0])
    k3 = kl_penalty(logprobs, ref, "k3")
    # exp(-l) + l - 1
    assert k3.tolist()[0] == pytest.approx([math.exp(-0.5) - 0.5, math.exp(0.5) - 1.5, 0], abs=1e-6)
    assert k3.tolist()[0][0] == pytest.approx(0.1065307, abs=1e-6)
    k3.sum().backward()
    # d/dl (exp(-l) + l - 1) = 1 - exp(-l)
    assert logprobs.grad.tolist()[0] == pytest.approx([1 - math.exp(-0.5), 1 - math.exp(0.5), 0], abs=1e-6)
    with pytest.raises(ValueError, match="unknown KL estimator 'k4'"):
        kl_penalty(logprobs, ref, "k4")


def test_k1_and_k3_are_unbiased_and_k3_is_non_negative():
    # exact expectation under pi over a 3-token vocabulary (no sampling noise)
    pi = t([0.6, 0.3, 0.1])
    ref = t([0.2, 0.5, 0.3])
    kl = sum(p * math.log(p / q) for p, q in zip(pi.tolist(), ref.tolist()))
    logp, logref = pi.log()[None], ref.log()[None]
    k1, k2, k3 = (kl_penalty(logp, logref, k)[0] for k in ("k1", "k2", "k3"))
    assert (pi * k1).sum().item() == pytest.approx(kl, rel=1e-5)
    assert (pi * k3).sum().item() == pytest.approx(kl, rel=1e-5)
    assert (pi * k2).sum().item() != pytest.approx(kl, rel=1e-2)
    # single samples: k1 is negative where ref is likelier than pi, k3 never is
    assert k1[1].item() < 0 and k1[0].item() > 0
    assert (k3 >= 0).all()
    wide = kl_penalty(torch.randn(64, 8) * 3, torch.randn(64, 8) * 3, "k3")
    assert (wide >= 0).all()


def test_value_loss_clipping_by_hand():
    values = t([[1.0, 1.0, 0.0, 0.0]]).requires_grad_()
    old = t([[0.5, 0.9, 0.0, 1.0]])
    returns = t([[2.0, 0.0, 0.5, 0.0]])
    # 0: unclipped 1, clipped 0.5 + 0.2 -> (0.7 - 2)^2 = 1.69 wins   1: clipped 1.0, both 1
    # 2: no move, 0.25                                               3: unclipped 0, clipped 0.8^2 = 0.64 wins
    loss = value_loss(values, old, returns, clip=0.2)
    assert loss.tolist()[0] == pytest.approx([0.845, 0.5, 0.125, 0.32])
    loss.sum().backward()
    # where the clipped branch wins it is constant in v: no gradient; elsewhere v - R
    assert values.grad.tolist()[0] == pytest.approx([0, 1.0, -0.5, 0])
    assert value_loss(values, old, returns, clip=None).tolist()[0] == pytest.approx([0.5, 0.5, 0.125, 0])
    with pytest.raises(ValueError, match="value clip"):
        value_loss(values, old, returns, clip=0.0)


def test_tis_token_level_truncates_at_the_cap():
    old = t([[math.log(1.5), math.log(4.0), math.log(0.5), 9.0]])
    behavior = t([[0.0, 0.0, 0.0, 0.0]])
    m = t([[1, 1, 1, 0]])
    w = truncated_importance_weights(old, behavior, m, cap=2.0)
    assert w.tolist()[0] == pytest.approx([1.5, 2.0, 0.5, 0])
    assert not w.requires_grad


def test_tis_sequence_level_truncates_the_product():
    ln = math.log
    old = t([[ln(1.5), ln(1.2), 7.0], [ln(1.5), ln(2.0), ln(1.0)], [200.0, 0.0, 0.0]])
    behavior = torch.zeros(3, 3)
    m = t([[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    w = truncated_importance_weights(old, behavior, m, cap=2.0, level="sequence")
    # row 0: 1.5 * 1.2 = 1.8 < 2; row 1: 1.5 * 2 * 1 = 3 -> 2; row 2: exp(200) overflows fp32, still the cap
    assert w.tolist() == [pytest.approx([1.8, 1.8, 0], rel=1e-6), [2.0, 2.0, 2.0], [2.0, 0, 0]]


def test_tis_errors():
    x = t([[0.0]])
    with pytest.raises(ValueError, match="cap must be >= 1"):
        truncated_importance_weights(x, x, x, cap=0.5)
    with pytest.raises(ValueError, match="unknown TIS level 'batch'"):
        truncated_importance_weights(x, x, x, cap=2.0, level="batch")


# Two micro-batches of one step: 5 mask tokens in 3 sequences that have any (the last row is empty).
LOSS_1, MASK_1 = t([[1, 2, 3], [4, 5, 6]]), t([[1, 1, 0], [1, 0, 0]])
LOSS_2, MASK_2 = t([[7, 8, 9], [float("inf"), 0, 0]]), t([[0, 1, 1], [0, 0, 0]])


def test_aggregate_token_level_split_sums_to_the_batch_mean():
    # (1 + 2 + 4 + 8 + 9) / 5
    a = aggregate(LOSS_1, MASK_1, "token", total_tokens=5, total_sequences=3).item()
    b = aggregate(LOSS_2, MASK_2, "token", total_tokens=5, total_sequences=3).item()
    assert (a, b) == (pytest.approx(7 / 5), pytest.approx(17 / 5))
    assert a + b == pytest.approx(24 / 5)


def test_aggregate_sequence_level_split_sums_to_the_batch_mean():
    # per-sequence means 1.5, 4, 8.5; the empty row adds 0
    a = aggregate(LOSS_1, MASK_1, "sequence", total_tokens=5, total_sequences=3).item()
    b = aggregate(LOSS_2, MASK_2, "sequence", total_tokens=5, total_sequences=3).item()
    assert (a, b) == (pytest.approx(5.5 / 3), pytest.approx(8.5 / 3))
    assert a + b == pytest.approx(14 / 3)


def test_aggregate_token_sum_constant_divides_by_sequences_times_the_budget():
    # Dr. GRPO: (1/G) sum_i sum_t l_it / L_max with G = 3 sequences and L_max = 10 generated tokens, whatever
    # the batch's token count: (1 + 2 + 4 + 8 + 9) / (3 * 10).
    a = aggregate(LOSS_1, MASK_1, "token_sum_constant", total_tokens=5, total_sequences=3, token_budget=10).item()
    b = aggregate(LOSS_2, MASK_2, "token_sum_constant", total_tokens=5, total_sequences=3, token_budget=10).item()
    assert (a, b) == (pytest.approx(7 / 30), pytest.approx(17 / 30))
    # Doubling the tokens of the batch does not change a token's weight (the token mean would halve it).
    double = aggregate(torch.cat([LOSS_1, LOSS_1]), torch.cat([MASK_1, MASK_1]), "token_sum_constant",
                       total_tokens=6, total_sequences=3, token_budget=10).item()
    assert double == pytest.approx(2 * 7 / 30)
    with pytest.raises(ValueError, match="needs a token_budget > 0, got None"):
        aggregate(LOSS_1, MASK_1, "token_sum_constant", 5, 3)


def test_aggregate_errors():
    with pytest.raises(ValueError, match="unknown loss aggregation 'batch'"):
        aggregate(LOSS_1, MASK_1, "batch", 5, 3)
    with pytest.raises(ValueError, match="total_tokens must be > 0, got 0"):
        aggregate(LOSS_1, MASK_1, "token", 0, 3)
    with pytest.raises(ValueError, match="total_sequences must be > 0, got 0"):
        aggregate(LOSS_1, MASK_1, "sequence", 5, 0)
    with pytest.raises(ValueError, match="mask shape"):
        aggregate(LOSS_1, MASK_1[:1], "token", 5, 3)


def test_mismatch_metrics_by_hand():
    ln = math.log
    old = t([[ln(2.0), ln(0.5), 5.0]])
    behavior = torch.zeros(1, 3)
    m = t([[1, 1, 0]])
    # k3 with l = old - behaviour: exp(l) - 1 - l -> 1 - ln 2 and -0.5 + ln 2, mean 0.25
    got = mismatch_metrics(old, behavior, m)
    assert got["mismatch/kl"] == pytest.approx(0.25, abs=1e-6)
    assert got["mismatch/abs_logdiff"] == pytest.approx(ln(2.0), abs=1e-6)
    assert got["mismatch/max_ratio_max"] == pytest.approx(2.0)
    shared = mismatch_metrics(old, behavior, m, total_tokens=4)
    assert shared["mismatch/kl"] == pytest.approx(0.5 / 4, abs=1e-6)
    assert shared["mismatch/abs_logdiff"] == pytest.approx(2 * ln(2.0) / 4, abs=1e-6)
    assert shared["mismatch/max_ratio_max"] == pytest.approx(2.0)
    empty = mismatch_metrics(old, behavior, torch.zeros_like(m))
    assert empty == {"mismatch/kl": 0.0, "mismatch/abs_logdiff": 0.0, "mismatch/max_ratio_max": 0.0}
