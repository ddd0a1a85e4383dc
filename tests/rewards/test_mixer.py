"""The mixer: combining components (abstention), each normalisation mode by hand, three domains of different
scales brought to matched statistics, and resuming the running moments from a saved state."""
import json
import math

import pytest

from jointrl.rewards.mixer import RewardMixer
from jointrl.rewards.normalize import DomainNormalizer, RunningMoments
from jointrl.rewards.spec import RewardTable

EPS = 1e-6
# A table whose raw reward is 10 * signal x: lets a test choose raw values directly.
SCALED_X = RewardTable(default=[{"name": "partial_credit", "weight": 10.0, "params": {"signal": "x"}}])


def test_weighted_sum_over_present_components_without_renormalising(episode):
    table = RewardTable(default=[{"name": "correctness"}, {"name": "tool_error_penalty", "weight": 0.5}])
    batch = RewardMixer(table, normalization="none").mix([
        episode(signals={"success": 1.0, "tool_calls": 4.0, "tool_errors": 2.0}),  # 1 + 0.5 * (-2/4)
        episode(signals={"success": 1.0}),  # penalty abstains: 1.0, not rescaled to 1.5 by the weights present
        episode(signals={"success": 1.0, "tool_calls": 1.0, "tool_errors": 0.0}, failed=True),
    ])
    assert batch.raw == [0.75, 1.0, None]
    assert batch.rewards == [0.75, 1.0, 0.0]
    assert batch.valid == [True, True, False]
    assert batch.components[1] == {"correctness": 1.0, "tool_error_penalty": None}
    assert batch.components[2] == {"correctness": None, "tool_error_penalty": None}


def test_group_mode_standardises_within_each_prompt(episode):
    def ep(seed, x, **fields):
        return episode("reasoning/sum-v1:easy", seed=seed, group_id=0, signals={"x": x}, **fields)

    # Two prompts that both kept group_id 0: seeds keep them apart. Raw rewards 10 * x.
    episodes = [ep(1, 0.1), ep(1, 0.0), ep(1, 0.0), ep(1, 0.1), ep(1, 0.1, failed=True), ep(2, 0.1), ep(2, 0.1)]
    batch = RewardMixer(SCALED_X, normalization="group").mix(episodes)
    # Prompt 1: raw [1, 0, 0, 1], mean 0.5, std 0.5; prompt 2: raw [1, 1], std 0 -> zeros.
    unit = 0.5 / (0.5 + EPS)
    assert batch.rewards == pytest.approx([unit, -unit, -unit, unit, 0.0, 0.0, 0.0], abs=1e-12)
    assert batch.valid == [True] * 4 + [False] + [True] * 2


def test_batch_mode_standardises_over_all_valid_episodes(episode):
    episodes = [episode(signals={"x": x}) for x in (0.0, 0.1, 0.2, 0.5)] + [episode(signals={})]
    batch = RewardMixer(SCALED_X, normalization="batch").mix(episodes)
    # Raw [0, 1, 2, 5] (the last abstains): mean 2, population variance (4 + 1 + 0 + 9) / 4 = 3.5.
    std = math.sqrt(3.5)
    assert batch.rewards == pytest.approx([-2 / (std + EPS), -1 / (std + EPS), 0.0, 3 / (std + EPS), 0.0])


def test_domain_mode_running_moments_by_hand(episode):
    mixer = RewardMixer(SCALED_X, normalization="domain", decay=0.5, by_tier=True)
    first = mixer.mix([
        episode("swe/fix-v1:easy", signals={"x": 0.0}),
        episode("swe/fix-v1:easy", signals={"x": 0.2}),
        episode("swe/fix-v1:easy", tier="high", signals={"x": 0.3}),
    ])
    # swe/low: raw [0, 2], mean 1, std 1; swe/high: [3] alone -> 0.
    assert first.rewards == pytest.approx([-1 / (1 + EPS), 1 / (1 + EPS), 0.0])
    assert (first.metrics["norm/swe/low/mean"], first.metrics["norm/swe/low/std"]) == pytest.approx((1.0, 1.0))

    second = mixer.mix([episode("swe/fix-v1:easy", signals={"x": 0.4})])
    # History keeps weight 0.5 * 2 = 1 against the batch's 1: w = 1/2; mean 1 + (4 - 1)/2 = 2.5,
    # var 0.5 * 1 + 0.5 * 0 + 0.25 * 9 = 2.75 (the moments of {0: 1/2, 2: 1/2, 4: 1} with total weight 2).
    assert second.rewards == pytest.approx([(4 - 2.5) / (math.sqrt(2.75) + EPS)])
    assert mixer.domain.cells["swe/low"] == RunningMoments(count=2.0, mean=2.5, var=2.75)


def test_domain_mode_without_tiers_pools_them(episode):
    mixer = RewardMixer(SCALED_X, normalization="domain", by_tier=False)
    batch = mixer.mix([episode("swe/fix-v1:easy", tier=t, signals={"x": x}) for t, x in (("low", 0.0), ("high", 0.3))])
    # One cell: raw [0, 3], mean 1.5, std 1.5.
    assert batch.rewards == pytest.approx([-1.5 / (1.5 + EPS), 1.5 / (1.5 + EPS)])
    assert set(mixer.domain.cells) == {"swe"}


def test_running_moments_decay_zero_forgets_and_one_pools():
    forget, pool = RunningMoments(), RunningMoments()
    for moments, decay in ((forget, 0.0), (pool, 1.0)):
        moments.update([0.0, 2.0], decay)
        moments.update([4.0, 4.0, 10.0], decay)
    assert (forget.mean, forget.var) == pytest.approx((6.0, 8.0))  # [4, 4, 10] alone
    # All five values: mean 4, variance (16 + 4 + 0 + 0 + 36) / 5.
    assert (pool.count, pool.mean, pool.var) == pytest.approx((5.0, 4.0, 11.2))


def _three_domains(episode):
    """Three domains whose raw rewards differ in scale by 10^4: SWE pass fractions, CAD IoU x 100, reasoning x 0.01."""
    swe = [episode("swe/fix-v1:easy", seed=i, signals={"pass_fraction": p}) for i, p in enumerate((0.1, 0.2, 0.3, 0.6))]
    cad = [episode("cad/bracket-v1:easy", seed=i, signals={"iou": v}) for i, v in enumerate((0.5, 0.6, 0.9, 1.0, 0.2))]
    solved = (1.0, 0.0, 0.0, 0.0, 1.0, 1.0)
    reasoning = [episode("reasoning/sum-v1:easy", seed=i, signals={"success": s}) for i, s in enumerate(solved)]
    table = RewardTable(
        default=[{"name": "correctness", "weight": 0.01}],
        domains={"swe": [{"name": "partial_credit"}], "cad": [{"name": "iou", "weight": 100.0}]},
    )
    return table, swe + cad + reasoning


def _by_domain(episodes, values):
    out = {}
    for e, v in zip(episodes, values):
        out.setdefault(e.domain, []).append(v)
    return out


def _mean_std(values):
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def test_three_domains_of_different_scales_get_matched_statistics(episode):
    table, episodes = _three_domains(episode)
    raw = RewardMixer(table, normalization="none").mix(episodes)
    raw_std = {d: _mean_std(v)[1] for d, v in _by_domain(episodes, raw.rewards).items()}
    assert raw_std["cad"] / raw_std["reasoning"] > 1000  # the premise: wildly different scales

    batch = RewardMixer(table, normalization="domain").mix(episodes)
    for domain, values in _by_domain(episodes, batch.rewards).items():
        mean, std = _mean_std(values)
        assert mean == pytest.approx(0.0, abs=1e-9), domain
        assert std == pytest.approx(1.0, abs=1e-3), domain  # eps against a std of 0.005 costs 2e-4
        assert batch.metrics[f"reward/{domain}/normalized_mean"] == pytest.approx(0.0, abs=1e-9)
        assert batch.metrics[f"reward/{domain}/normalized_std"] == pytest.approx(std)

    # Batch normalisation leaves the scales in: the small domains collapse to one value.
    pooled = RewardMixer(table, normalization="batch").mix(episodes)
    assert _mean_std(_by_domain(episodes, pooled.rewards)["reasoning"])[1] < 0.01


def test_state_dict_resumes_the_running_moments(episode):
    table, episodes = _three_domains(episode)
    later = [episode("cad/bracket-v1:easy", seed=9, signals={"iou": 0.7})]
    running = RewardMixer(table, normalization="domain")
    running.mix(episodes)
    state = json.loads(json.dumps(running.state_dict()))  # plain data, as a checkpoint stores it

    resumed = RewardMixer(table, normalization="domain")
    resumed.load_state_dict(state)
    expected = running.mix(later).rewards
    assert resumed.mix(later).rewards == expected
    # Without the state, a lone episode is its own cell's mean: the moments clearly mattered.
    assert RewardMixer(table, normalization="domain").mix(later).rewards == [0.0] and expected[0] != 0.0


def test_state_with_other_cell_keys_is_refused():
    with pytest.raises(ValueError, match="by_tier=True, this run by_tier=False"):
        DomainNormalizer(by_tier=False).load_state_dict(DomainNormalizer(by_tier=True).state_dict())


@pytest.mark.parametrize(
    "kwargs,fragment",
    [({"normalization": "prompt"}, "unknown normalization 'prompt'"), ({"decay": 1.5}, "decay must be in [0, 1]"),
     ({"eps": 0.0}, "eps must be positive")],
)
def test_bad_mixer_settings_are_named(kwargs, fragment):
    with pytest.raises(ValueError) as info:
        RewardMixer(SCALED_X, **kwargs)
    assert fragment in str(info.value)
