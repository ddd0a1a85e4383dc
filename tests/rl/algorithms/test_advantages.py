"""Advantages and batch filters against numbers worked out by hand in each test."""
import math

import pytest
import torch

from jointrl.rl.algorithms.advantages import (
    gae,
    group_advantages,
    overlong_keep,
    reinforce_pp_advantages,
    rloo_advantages,
    whiten,
    zero_variance_groups,
)

T, F = True, False


def t(values):
    return torch.tensor(values, dtype=torch.float32)


def ids(values):
    return torch.tensor(values, dtype=torch.long)


def mask(values):
    return torch.tensor(values, dtype=torch.bool)


# Two groups with an invalid member and a lone member: group 0 = {1, 0}, group 1 valid = {2, 4} (5 is
# invalid), group 2 = {7} alone.
REWARDS = [1.0, 0.0, 5.0, 2.0, 4.0, 7.0]
GROUPS = [0, 0, 1, 1, 1, 2]
VALID = [T, T, F, T, T, T]


def test_grpo_one_group_by_hand():
    # mean 0.75, population std sqrt((3 * 0.25^2 + 0.75^2) / 4) = sqrt(0.1875)
    std = math.sqrt(0.1875)
    got = group_advantages(t([1, 0, 1, 1]), ids([0, 0, 0, 0]), mask([T, T, T, T]))
    expected = [0.25 / (std + 1e-6), -0.75 / (std + 1e-6), 0.25 / (std + 1e-6), 0.25 / (std + 1e-6)]
    assert got.tolist() == pytest.approx(expected, rel=1e-6)
    assert expected[0] == pytest.approx(0.5773503, rel=1e-5)


def test_grpo_excludes_invalid_and_zeroes_lone_members():
    # group 0: mean 0.5, std 0.5 -> +-1; group 1: mean 3, std 1 -> -1, +1; invalid and lone -> 0
    got = group_advantages(t(REWARDS), ids(GROUPS), mask(VALID))
    assert got.tolist() == pytest.approx([1, -1, 0, -1, 1, 0], abs=1e-5)


def test_dr_grpo_is_the_centred_reward():
    got = group_advantages(t(REWARDS), ids(GROUPS), mask(VALID), scale_std=False)
    assert got.tolist() == pytest.approx([0.5, -0.5, 0, -1, 1, 0], abs=1e-7)


def test_group_ids_need_not_be_sorted_or_contiguous():
    got = group_advantages(t([3.0, 10.0, 1.0, 20.0]), ids([7, -2, 7, -2]), mask([T, T, T, T]), scale_std=False)
    assert got.tolist() == pytest.approx([1, -5, -1, 5])


def test_rloo_one_group_by_hand():
    # r_i - mean of the other three: 1 - 2/3, 0 - 1, 1 - 2/3, 1 - 2/3
    got = rloo_advantages(t([1, 0, 1, 1]), ids([0, 0, 0, 0]), mask([T, T, T, T]))
    assert got.tolist() == pytest.approx([1 / 3, -1, 1 / 3, 1 / 3], abs=1e-6)


def test_rloo_invalid_and_lone_members():
    # group 0: 1 - 0, 0 - 1; group 1 valid {2, 4}: 2 - 4, 4 - 2
    got = rloo_advantages(t(REWARDS), ids(GROUPS), mask(VALID))
    assert got.tolist() == pytest.approx([1, -1, 0, -2, 2, 0], abs=1e-6)


def test_reinforce_pp_centres_per_group_then_whitens_the_batch():
    # centred valid values: 0.5, -0.5, -1, 1, 0 -> batch mean 0, population variance 2.5 / 5 = 0.5
    s = math.sqrt(0.5)
    got = reinforce_pp_advantages(t(REWARDS), ids(GROUPS), mask(VALID))
    assert got.tolist() == pytest.approx([0.5 / s, -0.5 / s, 0, -1 / s, 1 / s, 0], abs=1e-5)
    valid = mask(VALID)
    assert got[valid].mean().item() == pytest.approx(0, abs=1e-6)
    assert got[valid].std(unbiased=False).item() == pytest.approx(1, abs=1e-5)


def test_whiten_by_hand():
    # kept values 1, 2, 3: mean 2, population std sqrt(2/3)
    x = t([[1.0, 2.0], [3.0, 100.0]])
    m = t([[1, 1], [1, 0]])
    s = math.sqrt(2 / 3)
    assert whiten(x, m).tolist() == [pytest.approx([-1 / s, 0], abs=1e-6), pytest.approx([1 / s, 0], abs=1e-6)]
    assert whiten(x, torch.zeros_like(m)).tolist() == [[0, 0], [0, 0]]
    with pytest.raises(ValueError, match="mask shape"):
        whiten(x, t([1, 1]))


def test_gae_skips_a_tool_result_gap_by_hand():
    # row 0: prompt, two policy tokens, a two-token tool result, one policy token, padding.
    # Steps t=1 (r 0, V .5), t=2 (r .5, V .4), t=5 (r 1, V .8); gamma .9, lambda .8 (gamma * lambda = .72):
    #   k=2: delta = 1 - .8 = .2                 A = .2       R = 1.0
    #   k=1: delta = .5 + .9*.8 - .4 = .82       A = .82 + .72*.2 = .964      R = 1.364
    #   k=0: delta = 0 + .9*.4 - .5 = -.14       A = -.14 + .72*.964 = .55408 R = 1.05408
    # row 1: nothing to train.
    m = t([[0, 1, 1, 0, 0, 1, 0], [0, 0, 0, 0, 0, 0, 0]])
    rewards = t([[0, 0, 0.5, 0, 0, 1, 0], [0] * 7])
    values = t([[9, 0.5, 0.4, 9, 9, 0.8, 9], [3] * 7])
    adv, ret = gae(rewards, values, m, gamma=0.9, lam=0.8)
    assert adv[0].tolist() == pytest.approx([0, 0.55408, 0.964, 0, 0, 0.2, 0], abs=1e-6)
    assert ret[0].tolist() == pytest.approx([0, 1.05408, 1.364, 0, 0, 1.0, 0], abs=1e-6)
    assert adv[1].tolist() == [0] * 7 and ret[1].tolist() == [0] * 7


def test_gae_with_unit_gamma_and_lambda_is_reward_to_go_minus_value():
    adv, ret = gae(t([[0, 0, 1]]), t([[0.2, 0.3, 0.4]]), t([[1, 1, 1]]), gamma=1.0, lam=1.0)
    assert adv[0].tolist() == pytest.approx([0.8, 0.7, 0.6])
    assert ret[0].tolist() == pytest.approx([1, 1, 1])


def test_gae_outputs_carry_no_grad():
    values = t([[0.2, 0.3]]).requires_grad_()
    adv, ret = gae(t([[0, 1]]), values, t([[1, 1]]), gamma=1.0, lam=0.5)
    assert not adv.requires_grad and not ret.requires_grad


def test_gae_errors():
    r, v, m = t([[0, 1]]), t([[0, 0]]), t([[1, 0]])
    with pytest.raises(ValueError, match="non-zero entries where mask is 0"):
        gae(r, v, m, gamma=1.0, lam=1.0)
    with pytest.raises(ValueError, match="gamma"):
        gae(r, v, t([[1, 1]]), gamma=0.0, lam=1.0)
    with pytest.raises(ValueError, match="lam"):
        gae(r, v, t([[1, 1]]), gamma=1.0, lam=1.5)
    with pytest.raises(ValueError, match="values shape"):
        gae(r, t([[0, 0, 0]]), t([[1, 1]]), gamma=1.0, lam=1.0)


def test_zero_variance_groups_by_hand():
    rewards = t([1, 1, 0, 1, 0.5, 0.5, 3, 2])
    groups = ids([0, 0, 1, 1, 2, 2, 3, 4])
    valid = mask([T, T, T, T, T, T, T, F])
    # group 0 agrees, group 1 differs, group 2 agrees, group 3 is alone, group 4 has no valid member
    assert zero_variance_groups(rewards, groups, valid).tolist() == [F, F, T, T, F, F, F, F]


def test_zero_variance_ignores_invalid_members_and_uses_the_tolerance():
    # the invalid 0 would make the group vary; only the valid 1s count
    assert zero_variance_groups(t([1, 1, 0]), ids([0, 0, 0]), mask([T, T, F])).tolist() == [F, F, F]
    r = torch.tensor([0.5, 0.5 + 1e-13, 0.5, 0.5 + 1e-6], dtype=torch.float64)
    assert zero_variance_groups(r, ids([0, 0, 1, 1]), mask([T, T, T, T])).tolist() == [F, F, T, T]


def test_overlong_keep():
    assert overlong_keep(mask([T, F, F])).tolist() == [F, T, T]
    with pytest.raises(ValueError, match="bool"):
        overlong_keep(ids([1, 0]))


@pytest.mark.parametrize("fn", [group_advantages, rloo_advantages, reinforce_pp_advantages, zero_variance_groups])
def test_batch_errors(fn):
    with pytest.raises(ValueError, match="group_ids must have shape"):
        fn(t([1, 2]), ids([0]), mask([T, T]))
    with pytest.raises(ValueError, match="integer"):
        fn(t([1, 2]), t([0, 0]), mask([T, T]))
    with pytest.raises(ValueError, match="bool"):
        fn(t([1, 2]), ids([0, 0]), t([1, 1]))
    with pytest.raises(ValueError, match="1-D"):
        fn(t([[1, 2]]), ids([0, 0]), mask([T, T]))
