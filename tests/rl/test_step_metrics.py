"""Advantages, filters and per-step metrics of the trainer, against hand-computed values."""
import math

import pytest
import torch

from jointrl.envs.episode import Episode
from jointrl.rewards.mixer import MixedBatch
from jointrl.rl.config.training import AlgorithmConfig
from jointrl.rl.algorithms.step import advantages_and_filters
from jointrl.rl.step_metrics import episode_metrics, staleness_metrics
from jointrl.rl.trajectory import Trajectory


def trajectory(group, success=1.0, truncated=False, domain="reasoning", versions=(0, 0), n=4, failed=False):
    episode = Episode(
        env_id=f"{domain}/x-v0:easy", domain=domain, family="x", difficulty="easy", seed=group, tier="low",
        group_id=group, signals={"success": success}, truncated=truncated, failed=failed, turns=1,
    )
    mask = torch.tensor([0.0] * (n - len(versions)) + [1.0] * len(versions))
    version = torch.tensor([-1] * (n - len(versions)) + list(versions))
    return Trajectory(episode, torch.arange(n), mask, torch.zeros(n), version)


def mixed(rewards, raw=None):
    raw = list(rewards) if raw is None else raw
    return MixedBatch(rewards=list(rewards), raw=raw, components=[{} for _ in rewards], metrics={})


def test_grpo_advantages_are_group_standardised_rewards():
    trajs = [trajectory(0), trajectory(0), trajectory(1), trajectory(1)]
    adv = advantages_and_filters(AlgorithmConfig(name="grpo"), trajs, mixed([1.0, 0.0, 2.0, 2.0]))
    # group 0: mean 0.5, population std 0.5 -> +-1 (eps 1e-6 in the denominator); group 1: all equal -> 0
    assert adv.values[0] == pytest.approx(0.5 / (0.5 + 1e-6))
    assert adv.values[1] == pytest.approx(-0.5 / (0.5 + 1e-6))
    assert adv.values[2:] == [0.0, 0.0]
    assert adv.keep == [True] * 4 and adv.metrics["filter/kept"] == 1.0


def test_dr_grpo_keeps_the_scale():
    trajs = [trajectory(0), trajectory(0), trajectory(0)]
    adv = advantages_and_filters(AlgorithmConfig(name="dr_grpo"), trajs, mixed([3.0, 0.0, 0.0]))
    assert adv.values == pytest.approx([2.0, -1.0, -1.0])


def test_dynamic_sampling_drops_zero_variance_groups_and_overlong_filter_drops_cut_episodes():
    trajs = [trajectory(0), trajectory(0), trajectory(1), trajectory(1, truncated=True)]
    cfg = AlgorithmConfig(name="grpo", dynamic_sampling=True, overlong_filter=True)
    adv = advantages_and_filters(cfg, trajs, mixed([0.0, 0.0, 1.0, 0.0], raw=[1.0, 1.0, 1.0, 0.0]))
    assert adv.keep == [False, False, True, False]
    assert adv.values[0] == adv.values[1] == adv.values[3] == 0.0
    assert adv.metrics["filter/zero_variance_dropped"] == 0.5
    assert adv.metrics["filter/overlong_dropped"] == 0.25
    assert adv.metrics["filter/kept"] == 0.25


def test_episodes_without_a_reward_or_tokens_are_not_trained():
    trajs = [trajectory(0), trajectory(0), trajectory(0, n=1, versions=(0,))]
    adv = advantages_and_filters(AlgorithmConfig(name="grpo"), trajs, mixed([1.0, 0.0, 0.0], raw=[1.0, None, 0.0]))
    assert adv.keep == [True, False, False]


def test_ppo_leaves_advantages_to_the_learner():
    trajs = [trajectory(0), trajectory(1)]
    adv = advantages_and_filters(AlgorithmConfig(name="ppo"), trajs, mixed([1.0, 0.0]))
    assert adv.values == [0.0, 0.0] and adv.keep == [True, True]


def test_episode_and_staleness_metrics():
    trajs = [
        trajectory(0, success=1.0, versions=(3, 3)), trajectory(0, success=0.0, versions=(1, 2)),
        trajectory(1, success=1.0, domain="terminal", truncated=True, versions=(3, 3)),
        trajectory(2, success=1.0, domain="terminal", failed=True, versions=(3, 3)),
    ]
    m = episode_metrics(trajs)
    assert m["pass_rate/reasoning"] == 0.5 and m["pass_rate/terminal"] == 0.5 and m["pass_rate/all"] == 0.5
    assert m["episode/truncated"] == 0.25 and m["episode/failed"] == 0.25 and m["episode/sampled_tokens"] == 2.0
    s = staleness_metrics(trajs, learner_version=3)
    # lags: (0, 0), (2, 1), (0, 0), (0, 0) over the 8 sampled tokens
    assert s["staleness/max"] == 2.0 and math.isclose(s["staleness/mean"], 3 / 8)
