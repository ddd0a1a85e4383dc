"""Task sampler and tier selection: weights and shares, group structure, seed ranges, determinism, resume."""
import fnmatch
import json
import random
from collections import Counter

import pytest

from jointrl.envs import registry
from jointrl.envs.base import EnvSpec
from jointrl.rl.rollout.agent import Task
from jointrl.rl.config.run import RunConfig
from jointrl.rl.recipe import load_recipe
from jointrl.rl.rollout.task_sampler import TaskSampler
from jointrl.rl.rollout.tiers import TierSelector, budgets

QUICK_MIX = [("terminal/*:easy", 2.0), ("office/*:easy", 1.0), ("reasoning/*", 1.0)]
QUICK_SHARES = {"terminal": 0.5, "office": 0.25, "reasoning": 0.25}


def make(mix=QUICK_MIX, shares=QUICK_SHARES, *, seed=0, prompts=8, group=4, train=range(0, 1000), tiers=None):
    return TaskSampler(
        mix, train_seeds=train, eval_seeds=range(5000, 5100), group_size=group, prompts_per_step=prompts,
        seed=seed, tiers=tiers, domain_shares=shares,
    )


def groups(tasks: list[Task]) -> list[Task]:
    """One task per group, in order (the G copies of a group are adjacent)."""
    return tasks[:: tasks.count(tasks[0])] if tasks else []


def domain(task: Task) -> str:
    return task.env_id.split("/", 1)[0]


def test_probabilities_without_shares_follow_the_glob_weights():
    # 10 terminal families x 3 difficulties, 10 office families: the counts the hand numbers use.
    assert len(registry.env_ids("terminal/*")) == 31  # 10 families x 3 difficulties + release:long
    assert len(registry.env_ids("terminal/*:easy")) == len(registry.env_ids("office/*:easy")) == 10
    sampler = make([("terminal/*:easy", 2.0), ("terminal/*", 1.0), ("office/*:easy", 1.0)], shares=None)
    probs = sampler.probabilities()
    # Total weight 4: an easy terminal id has 2/10 + 1/31, another terminal id 1/31, an easy office id 1/10.
    assert probs["terminal/archive-v0:easy"] == pytest.approx((2 / 10 + 1 / 31) / 4)
    assert probs["terminal/archive-v0:hard"] == pytest.approx((1 / 31) / 4)
    assert probs["office/argmax-v0:easy"] == pytest.approx((1 / 10) / 4)
    assert "office/argmax-v0:hard" not in probs
    assert len(probs) == 41 and sum(probs.values()) == pytest.approx(1.0)
    assert sampler.shares == pytest.approx({"office": 0.25, "terminal": 0.75})


def test_probabilities_with_shares_distribute_the_glob_weights_within_a_domain():
    mix = [("terminal/*:easy", 2.0), ("terminal/*", 1.0), ("office/*:easy", 1.0)]
    probs = make(mix, shares={"terminal": 0.6, "office": 0.4}).probabilities()
    # Terminal holds weight 3 in all: an easy id 2/10 + 1/31 of it, another id 1/31.
    assert probs["terminal/archive-v0:easy"] == pytest.approx(0.6 * (2 / 10 + 1 / 31) / 3)
    assert probs["terminal/archive-v0:medium"] == pytest.approx(0.6 * (1 / 31) / 3)
    assert probs["office/argmax-v0:easy"] == pytest.approx(0.4 / 10)
    assert sum(probs.values()) == pytest.approx(1.0)


def test_each_step_gets_exactly_the_domain_shares_when_they_divide_it():
    sampler = make()
    for _ in range(250):  # 2000 prompts
        counts = Counter(domain(t) for t in groups(sampler.next_step()))
        assert counts == {"terminal": 4, "office": 2, "reasoning": 2}


def test_a_smaller_draw_gives_that_many_whole_groups_with_fresh_ids_and_keeps_the_shares():
    # Partial rollouts draw fewer prompts when carried groups fill part of the batch.
    sampler = make()
    sizes = [3, 8, 1, 0, 4]
    draws = [sampler.next_step(n) for n in sizes]
    assert [len(d) for d in draws] == [4 * n for n in sizes]
    ids = [t.group_id for d in draws for t in d]
    assert ids == sorted(ids) and len(set(ids)) == sum(sizes) and Counter(ids) == {i: 4 for i in set(ids)}
    counts = Counter(domain(t) for d in draws for t in groups(d))
    assert counts == {"terminal": 8, "office": 4, "reasoning": 4}  # 16 prompts at the 0.5 / 0.25 / 0.25 shares


def test_domain_counts_stay_within_one_prompt_of_their_share():
    shares = {"terminal": 0.55, "office": 0.3, "reasoning": 0.15}
    sampler = make(shares=shares, prompts=7)
    counts, n = Counter(), 0
    while n < 2000:
        step = groups(sampler.next_step())
        counts.update(domain(t) for t in step)
        n += len(step)
        for name, share in shares.items():
            assert abs(counts[name] - share * n) < 1, (name, counts[name], n)
    for name, share in shares.items():
        assert abs(counts[name] / n - share) <= 0.03


def test_glob_weights_split_a_domain_and_nothing_outside_the_mix_is_drawn():
    mix = [("terminal/*:easy", 3.0), ("terminal/*:hard", 1.0), ("office/*", 1.0)]
    sampler = make(mix, shares={"terminal": 0.5, "office": 0.5}, prompts=20)
    drawn = [t for _ in range(300) for t in groups(sampler.next_step())]  # 6000 prompts
    terminal = [t.env_id.rsplit(":", 1)[1] for t in drawn if domain(t) == "terminal"]
    office = [t.env_id.rsplit(":", 1)[1] for t in drawn if domain(t) == "office"]
    assert len(terminal) == len(office) == 3000
    assert set(terminal) == {"easy", "hard"}
    assert abs(terminal.count("easy") / 3000 - 0.75) <= 0.03
    # office/* holds 10 ids per difficulty and one long id: 10/31 each, 1/31 long.
    for difficulty in ("easy", "medium", "hard"):
        assert abs(office.count(difficulty) / 3000 - 10 / 31) <= 0.03
    assert abs(office.count("long") / 3000 - 1 / 31) <= 0.015
    assert {t.env_id for t in drawn} <= set(sampler.probabilities())


def test_group_structure_and_group_ids_across_steps():
    sampler = make(prompts=5, group=3)
    for step in range(4):
        tasks = sampler.next_step()
        assert len(tasks) == 15
        for g in range(5):
            copies = tasks[3 * g : 3 * g + 3]
            assert len(set(copies)) == 1  # same env, seed, tier and group id
            assert copies[0].group_id == 5 * step + g
    assert sampler.step == 4 and sampler.next_group_id == 20


def test_train_seeds_come_from_the_train_range_only():
    sampler = make(train=range(5, 8))
    seeds = Counter(t.seed for _ in range(100) for t in groups(sampler.next_step()))
    assert set(seeds) == {5, 6, 7}
    assert sum(seeds.values()) == 800


def test_same_seed_same_tasks_other_seed_other_tasks():
    ratios = TierSelector("ratios", ratios={"low": 0.5, "high": 0.5})
    a, b, c = make(tiers=ratios), make(tiers=ratios), make(seed=1, tiers=ratios)
    steps_a = [a.next_step() for _ in range(5)]
    assert steps_a == [b.next_step() for _ in range(5)]
    assert steps_a != [c.next_step() for _ in range(5)]


@pytest.mark.parametrize("stop_at", [0, 1, 6, 11])
def test_resume_after_a_json_round_trip_continues_the_same_tasks(stop_at):
    ratios = TierSelector("ratios", ratios={"low": 0.3, "high": 0.5, "max": 0.2})
    shares = {"terminal": 0.55, "office": 0.3, "reasoning": 0.15}  # non-dividing: the counts carry over
    whole = make(shares=shares, prompts=7, tiers=ratios)
    expected = [whole.next_step() for _ in range(12)]

    first = make(shares=shares, prompts=7, tiers=ratios)
    before = [first.next_step() for _ in range(stop_at)]
    saved = json.loads(json.dumps(first.state_dict()))
    resumed = make(shares=shares, prompts=7, tiers=ratios)
    resumed.load_state_dict(saved)
    after = [resumed.next_step() for _ in range(12 - stop_at)]
    assert before + after == expected


def test_state_from_another_run_is_refused():
    state = make().state_dict()
    with pytest.raises(ValueError, match="run seed 0"):
        make(seed=3).load_state_dict(state)
    with pytest.raises(ValueError, match="domains"):
        make([("terminal/*", 1.0)], shares=None).load_state_dict(state)


def test_a_glob_that_selects_nothing_is_named():
    with pytest.raises(ValueError, match=r"'swe/\*:medum'"):
        make([("terminal/*", 1.0), ("swe/*:medum", 1.0)], shares=None)


def test_shares_and_mix_must_cover_the_same_domains():
    with pytest.raises(ValueError, match="'swe'"):
        make([("terminal/*", 1.0)], shares={"terminal": 0.5, "swe": 0.5})
    with pytest.raises(ValueError, match="office"):
        make([("terminal/*", 1.0), ("office/*", 1.0)], shares={"terminal": 1.0})


def test_overlapping_seed_ranges_are_refused():
    with pytest.raises(ValueError, match="overlap"):
        TaskSampler(QUICK_MIX, train_seeds=range(0, 100), eval_seeds=range(50, 150), group_size=2,
                    prompts_per_step=1, seed=0)


def test_eval_tasks_cover_glob_seeds_and_tiers_from_the_eval_range():
    sampler = make()
    tasks = sampler.eval_tasks("cad/bracket-v0:*", [5000, 5099], tiers=["low", "max"], samples=2)
    ids = registry.env_ids("cad/bracket-v0:*")
    assert len(ids) == 3 and len(tasks) == 3 * 2 * 2 * 2
    combos = {(t.env_id, t.seed, t.tier) for t in tasks}
    assert combos == {(i, s, tier) for i in ids for s in (5000, 5099) for tier in ("low", "max")}
    assert [t.group_id for t in tasks] == [g for g in range(12) for _ in range(2)]
    # Without tiers, each task takes the run's selection: fixed mode without globs = the spec default.
    defaults = sampler.eval_tasks("cad/bracket-v0:*", [5001])
    assert [(t.env_id, t.tier) for t in defaults] == [
        ("cad/bracket-v0:easy", "low"), ("cad/bracket-v0:hard", "max"), ("cad/bracket-v0:medium", "high")
    ]


def test_eval_tasks_refuse_train_seeds_unknown_tiers_and_leave_training_alone():
    sampler, fresh = make(), make()
    with pytest.raises(ValueError, match="seed 999 is outside the eval seed range"):
        sampler.eval_tasks("cad/*", [5000, 999])
    with pytest.raises(ValueError, match="seed 5100"):
        sampler.eval_tasks("cad/*", [5100])
    with pytest.raises(ValueError, match="'medium'"):
        sampler.eval_tasks("cad/*", [5000], tiers=["medium"])
    with pytest.raises(ValueError, match=r"'cad/\*:nope'"):
        sampler.eval_tasks("cad/*:nope", [5000])
    sampler.eval_tasks("cad/*", [5000])
    assert sampler.next_step() == fresh.next_step()


def test_fixed_tiers_first_matching_glob_wins_else_the_spec_default():
    selector = TierSelector("fixed", fixed={"reasoning/ab-v0:*": "max", "reasoning/*": "low"})
    rng = random.Random(0)
    assert selector.choose("reasoning/ab-v0:hard", rng) == "max"  # both globs match: the first wins
    assert selector.choose("reasoning/arc_1d-v0:hard", rng) == "low"  # its spec default is high
    assert selector.choose("cad/bracket-v0:hard", rng) == "max"  # no glob: spec default
    assert selector.choose("office/aggregate-v0:medium", rng) == "low"
    assert selector.choose("terminal/archive-v0:medium", rng) == "high"


def test_fixed_tier_errors_name_the_glob_or_tier():
    with pytest.raises(ValueError, match=r"'reasonin/\*'"):
        TierSelector("fixed", fixed={"reasonin/*": "low"})
    with pytest.raises(ValueError, match="'huge'"):
        TierSelector("fixed", fixed={"reasoning/*": "huge"})
    with pytest.raises(ValueError, match="'random'"):
        TierSelector("random")


def test_ratio_tiers_follow_the_ratios_deterministically():
    assert {TierSelector("ratios", ratios={"high": 1.0}).choose("cad/bracket-v0:easy", random.Random(s))
            for s in range(50)} == {"high"}
    a = TierSelector("ratios", ratios={"low": 0.2, "max": 0.8, "high": 0.0})
    b = TierSelector("ratios", ratios={"max": 0.8, "low": 0.2})  # same ratios, other order: same draws
    rng_a, rng_b = random.Random(7), random.Random(7)
    draws = [a.choose("cad/bracket-v0:easy", rng_a) for _ in range(5000)]
    assert draws == [b.choose("cad/bracket-v0:easy", rng_b) for _ in range(5000)]
    assert set(draws) == {"low", "max"}
    assert abs(draws.count("max") / 5000 - 0.8) <= 0.03
    with pytest.raises(ValueError, match="no tier"):
        TierSelector("ratios", ratios={"low": 0.0})


def test_auto_tiers_follow_difficulty(monkeypatch):
    auto, rng = TierSelector("auto"), random.Random(0)
    assert auto.choose("terminal/archive-v0:easy", rng) == "low"
    assert auto.choose("reasoning/ab-v0:default", rng) == "low"
    assert auto.choose("office/aggregate-v0:medium", rng) == "high"  # its spec default is low
    assert auto.choose("terminal/archive-v0:hard", rng) == "max"  # its spec default is high
    assert auto.choose("reasoning/ab-v0:hard", rng) == "max"
    # A difficulty outside the rule's table keeps the spec's default tier.
    plugin = EnvSpec(id="plug/thing-v0:brutal", entry_point="plug:Thing", default_tier="high")
    monkeypatch.setattr(registry, "spec", lambda env_id: plugin)
    assert auto.choose(plugin.id, rng) == "high"


def test_from_config_reads_envs_rollout_and_trainer():
    config = RunConfig(
        model={"preset": "debug"},
        envs={
            "mix": [{"glob": g, "weight": w} for g, w in QUICK_MIX],
            "domain_shares": QUICK_SHARES,
            "train_seeds": {"start": 10, "stop": 20},
            "eval_seeds": {"start": 1_000_020, "stop": 1_000_030},
        },
        rollout={
            "group_size": 3,
            "tiers": {"low": 100, "high": 200, "max": 300},
            "tier_selection": {"mode": "fixed", "fixed": {"reasoning/*": "max"}},
        },
        trainer={"seed": 4, "prompts_per_step": 8},
    )
    assert budgets(config) == {"low": 100, "high": 200, "max": 300}
    sampler = TaskSampler.from_config(config)
    assert sampler.train_seeds == range(10, 20) and sampler.eval_seeds == range(1_000_020, 1_000_030)
    tasks = sampler.next_step()
    assert tasks == make(seed=4, group=3, train=range(10, 20), tiers=TierSelector("fixed", {"reasoning/*": "max"})
                         ).next_step()
    assert len(tasks) == 8 * 3
    assert Counter(domain(t) for t in groups(tasks)) == {"terminal": 4, "office": 2, "reasoning": 2}
    for task in tasks:
        assert task.tier == ("max" if domain(task) == "reasoning" else registry.spec(task.env_id).default_tier)
        assert 10 <= task.seed < 20


def test_the_shipped_quickstart_recipe_builds_a_sampler():
    config = load_recipe("quickstart")
    tasks = TaskSampler.from_config(config).next_step()
    assert len(tasks) == config.trainer.prompts_per_step * config.rollout.group_size
    globs = [entry.glob for entry in config.envs.mix]
    assert all(any(fnmatch.fnmatchcase(t.env_id, g) for g in globs) for t in tasks)
