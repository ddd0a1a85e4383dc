"""Batch statistics for logging: every family of metric names, with hand-computed values."""
import pytest

from jointrl.rewards.mixer import RewardMixer
from jointrl.rewards.spec import RewardTable


def test_batch_metrics_by_hand(episode):
    table = RewardTable(default=[{"name": "correctness"}, {"name": "tool_error_penalty", "weight": 0.5}])
    env = "swe/fix-v1:easy"
    episodes = [
        # components (1, 0): raw 1.0
        episode(env, tier="high", think_tokens=100, think_budget=200,
                signals={"success": 1.0, "verified": 1.0, "tool_calls": 4.0, "tool_errors": 0.0}),
        # components (0, -0.5): raw -0.25
        episode(env, tier="high", think_tokens=300, think_budget=200,
                signals={"success": 0.0, "verified": 0.0, "tool_calls": 4.0, "tool_errors": 2.0}),
        # failed: no reward, and its signals and think tokens stay out of the statistics
        episode(env, tier="high", think_tokens=1000, think_budget=200, failed=True,
                signals={"success": 1.0, "tool_calls": 4.0, "tool_errors": 4.0}),
        episode("cad/bracket-v1:easy", tier="low", think_tokens=50, signals={"success": 1.0}),
    ]
    m = RewardMixer(table, normalization="none").mix(episodes).metrics

    assert m["reward/swe/count"] == 3.0
    assert m["reward/swe/abstained"] == pytest.approx(1 / 3)
    assert (m["reward/swe/mean"], m["reward/swe/std"]) == pytest.approx((0.375, 0.625))
    assert (m["reward/swe/normalized_mean"], m["reward/swe/normalized_std"]) == pytest.approx((0.375, 0.625))
    assert m["reward/swe/component/correctness/mean"] == 0.5
    assert m["reward/swe/component/tool_error_penalty/mean"] == -0.25
    assert m["reward/swe/component/correctness/abstained"] == pytest.approx(1 / 3)
    # Mean |weighted contribution| over the 3 episodes: correctness 1/3, penalty 0.25/3 -> shares 0.8, 0.2.
    assert m["reward/swe/component/correctness/share"] == pytest.approx(0.8)
    assert m["reward/swe/component/tool_error_penalty/share"] == pytest.approx(0.2)
    assert m["signal/swe/success"] == 0.5 and m["signal/swe/verified"] == 0.5
    assert m["signal/swe/tool_errors"] == 1.0

    assert m["tier/high/count"] == 3.0
    assert m["tier/high/think_tokens"] == 200.0
    assert m["tier/high/within_budget"] == 0.5
    assert m["tier/high/reward_mean"] == 0.375
    assert m["tier/low/think_tokens"] == 50.0 and "tier/low/within_budget" not in m  # no budget applied

    assert m["env/swe/fix-v1:easy/reward_std"] == pytest.approx(0.625)
    assert "env/cad/bracket-v1:easy/reward_std" not in m  # one scored episode says nothing about variance
    # CAD is scored by the same two terms, but the penalty always abstains: it holds no share.
    assert m["reward/cad/component/tool_error_penalty/abstained"] == 1.0
    assert m["reward/cad/component/correctness/share"] == 1.0
    assert m["reward/cad/component/tool_error_penalty/share"] == 0.0
    assert m["reward/valid_fraction"] == 0.75


def test_tamper_signals_become_hack_metrics_by_hand(episode):
    env = "swe/fix-v1:easy"
    episodes = [
        episode(env, signals={"success": 1.0, "hack_tests_modified": 1.0, "hack_runner_tampering": 0.0}),
        episode(env, signals={"success": 0.0, "hack_tests_modified": 0.0, "hack_runner_tampering": 1.0}),
        episode(env, signals={"success": 0.0, "hack_tests_modified": 0.0, "hack_runner_tampering": 0.0}),
        episode(env, signals={"success": 0.0}),  # reports no tamper signal: counts as clean
        episode(env, failed=True, signals={"hack_tests_modified": 1.0}),  # failed: left out
        episode("cad/bracket-v1:easy", signals={"success": 1.0}),
    ]
    m = RewardMixer(RewardTable(default=[{"name": "correctness"}]), normalization="none").mix(episodes).metrics
    assert m["hack/swe/tests_modified"] == 0.25 and m["hack/swe/runner_tampering"] == 0.25
    assert m["hack/swe/any"] == 0.5
    assert not any(k.startswith("hack/cad") for k in m)
