"""Paired bootstrap intervals: hand-computed cases, agreement with the paired normal interval, refusal of unpaired data;
the hierarchical pooling of several runs."""
import math
import random
from types import SimpleNamespace

import numpy as np
import pytest

from jointrl.envs.episode import Episode
from jointrl.rl.significance import compare, compare_runs, domain_of, paired_interval, pooled_interval


def _summary(outcomes):
    """A stand-in evaluation: (env_id, seed, success) per episode."""
    episodes = []
    for env_id, seed, success in outcomes:
        domain, rest = env_id.split("/")
        family, difficulty = rest.split("-v0:")
        episodes.append(Episode(env_id=env_id, domain=domain, family=family, difficulty=difficulty, seed=seed,
                                tier="low", signals={"success": float(success)}))
    return SimpleNamespace(trajectories=[SimpleNamespace(episode=e) for e in episodes])


def test_a_constant_change_has_a_zero_width_interval():
    low, high = paired_interval(np.zeros(50), np.full(50, 0.25))
    assert low == pytest.approx(0.25) and high == pytest.approx(0.25)


def test_samples_are_averaged_per_task_and_families_are_grouped():
    before = _summary([("t/a-v0:easy", 1, 0), ("t/a-v0:easy", 1, 0), ("t/a-v0:easy", 2, 1), ("t/a-v0:easy", 2, 0),
                       ("t/b-v0:easy", 1, 0)])
    after = _summary([("t/a-v0:easy", 1, 1), ("t/a-v0:easy", 1, 0), ("t/a-v0:easy", 2, 1), ("t/a-v0:easy", 2, 1),
                      ("t/b-v0:easy", 1, 1)])
    a, b, everything = compare(before, after)
    # family a: task 1 goes 0 -> 0.5, task 2 0.5 -> 1: mean change 0.5 over 2 tasks, 4 episodes each side.
    assert (a.group, a.tasks, a.episodes_a, a.a, a.b, a.change) == ("t/a", 2, 4, 0.25, 0.75, 0.5)
    assert (b.group, b.change, b.low, b.high) == ("t/b", 1.0, 1.0, 1.0)
    assert everything.group == "all" and everything.tasks == 3 and everything.change == pytest.approx(2 / 3)
    (domain, total) = compare(before, after, domain_of)
    assert domain.group == "t" and domain.tasks == 3 and total.group == "all"


def test_the_bootstrap_matches_the_paired_normal_interval_on_many_tasks():
    rng = random.Random(0)
    skill = [rng.random() for _ in range(2000)]  # each task's own difficulty, shared by both policies
    a = np.array([float(rng.random() < s) for s in skill])
    b = np.array([float(rng.random() < min(1.0, s + 0.05)) for s in skill])
    low, high = paired_interval(a, b, resamples=20_000)
    diff = b - a
    half = 1.96 * diff.std(ddof=1) / math.sqrt(diff.size)  # the textbook paired standard error
    assert low == pytest.approx(diff.mean() - half, abs=0.15 * half)
    assert high == pytest.approx(diff.mean() + half, abs=0.15 * half)


def test_a_zero_change_on_noisy_tasks_is_not_significant():
    rng = random.Random(1)
    outcomes_a = [("t/a-v0:easy", s, rng.random() < 0.4) for s in range(300)]
    outcomes_b = [("t/a-v0:easy", s, rng.random() < 0.4) for s in range(300)]
    change = compare(_summary(outcomes_a), _summary(outcomes_b))[0]
    assert change.low < 0 < change.high and not change.significant


def test_evaluations_of_different_tasks_are_refused():
    with pytest.raises(ValueError, match="different tasks"):
        compare(_summary([("t/a-v0:easy", 1, 1)]), _summary([("t/a-v0:easy", 2, 1)]))
    with pytest.raises(ValueError, match="different groups"):
        compare(_summary([("t/a-v0:easy", 1, 1)]), _summary([("t/b-v0:easy", 1, 1)]))


def test_one_run_pools_to_the_paired_bootstrap_over_its_tasks():
    rng = random.Random(2)
    a = [float(rng.random() < 0.3) for _ in range(80)]
    b = [float(rng.random() < 0.5) for _ in range(80)]
    family, _ = compare_runs([(_summary([("t/a-v0:easy", s, ok) for s, ok in enumerate(a)]),
                               _summary([("t/a-v0:easy", s, ok) for s, ok in enumerate(b)]))])
    assert (family.low, family.high) == paired_interval(np.array(a), np.array(b))
    assert family.change == pytest.approx(sum(b) / 80 - sum(a) / 80)


def test_runs_that_disagree_widen_the_interval_to_their_spread():
    # Run 1 gains 0.2 on every task, run 2 nothing: resampling tasks alone would give a zero-width interval at 0.1.
    # Resampling the two runs draws (1, 1) -> 0.2, (2, 2) -> 0.0 a quarter of the time each, else 0.1.
    low, high = pooled_interval([(np.zeros(40), np.full(40, 0.2)), (np.zeros(40), np.zeros(40))], resamples=4000)
    assert (low, high) == (pytest.approx(0.0), pytest.approx(0.2))


def test_many_runs_match_the_normal_interval_over_run_means():
    # Each run's change is the same on all its tasks, so only the runs' spread is left: the textbook interval of a mean.
    rng = np.random.default_rng(3)
    effects = rng.normal(0.05, 0.1, size=300)
    low, high = pooled_interval([(np.zeros(20), np.full(20, e)) for e in effects], resamples=4000)
    half = 1.96 * effects.std(ddof=1) / math.sqrt(effects.size)
    assert low == pytest.approx(effects.mean() - half, abs=0.1 * half)
    assert high == pytest.approx(effects.mean() + half, abs=0.1 * half)


def test_pooled_changes_average_the_runs_and_sum_their_tasks():
    def evaluation(*successes):
        return _summary([("t/a-v0:easy", seed, success) for seed, success in enumerate(successes, 1)])

    family, everything = compare_runs([(evaluation(0, 0), evaluation(1, 1)), (evaluation(1, 0), evaluation(1, 0))])
    # Run 1: 0 -> 1 (change 1); run 2: 0.5 -> 0.5 (change 0); pooled: a = 0.25, b = 0.75, change 0.5 over 4 tasks.
    assert (family.group, family.tasks, family.episodes_a, family.a, family.b) == ("t/a", 4, 4, 0.25, 0.75)
    assert family.change == 0.5
    assert everything.change == 0.5 and (family.low, family.high) == (pytest.approx(0.0), pytest.approx(1.0))


def test_runs_of_different_groups_are_refused():
    run1 = (_summary([("t/a-v0:easy", 1, 1)]), _summary([("t/a-v0:easy", 1, 1)]))
    run2 = (_summary([("t/b-v0:easy", 1, 1)]), _summary([("t/b-v0:easy", 1, 1)]))
    with pytest.raises(ValueError, match="runs cover different groups"):
        compare_runs([run1, run2])
