"""Learnability-weighted mixing: hand-computed pass rates and factors, the cap, the sampler's draws, exact resume."""
import json
import random
from collections import Counter
from types import SimpleNamespace

import pytest

from jointrl.envs import registry
from jointrl.envs.base import EnvSpec
from jointrl.rl.config.run import RunConfig
from jointrl.rl.rollout.learnability import Learnability, cap_shares
from jointrl.rl.rollout.pipeline import RolloutPipeline
from jointrl.rl.rollout.task_sampler import TaskSampler
from tests.rl.rollout.loop import run_steps

IDS = ["learn/a-v0:easy", "learn/b-v0:easy", "learn/c-v0:easy", "learn/d-v0:easy", "other/x-v0:easy"]


@pytest.fixture
def specs():
    for env_id in IDS:
        registry.register(EnvSpec(id=env_id, entry_point="tests.envs.planted_envs:Honest"))
    yield
    for env_id in IDS:
        registry._SPECS.pop(env_id, None)


def test_pass_rate_and_factor_by_hand():
    learn = Learnability(floor=0.1, cap=1.0, decay=0.5, prior_episodes=2.0)
    assert learn.pass_rate("unseen") == 0.5 and learn.factor("unseen") == 1.0
    learn.record([("a", 1.0), ("a", 1.0), ("b", 0.0), ("b", 1.0)])
    # a: (2 + 1) / (2 + 2) = 0.75, factor 4 * 0.75 * 0.25 = 0.75; b: (1 + 1) / (2 + 2) = 0.5, factor 1.
    assert learn.pass_rate("a") == 0.75 and learn.factor("a") == 0.75 and learn.factor("b") == 1.0
    learn.record([("a", 1.0)])
    # decay 0.5: a has 1 + 1 episodes and 1 + 1 successes: (2 + 1) / (2 + 2).
    assert learn.pass_rate("a") == 0.75 and learn.pass_rate("b") == (0.5 + 1) / (1 + 2)
    episodes = successes = 2.0
    for _ in range(30):
        learn.record([("a", 1.0)] * 8)
        episodes, successes = episodes * 0.5 + 8, successes * 0.5 + 8
    p = (successes + 1) / (episodes + 2)  # about 17/18: the prior keeps a mastered id just above the floor...
    assert learn.factor("a") == pytest.approx(4 * p * (1 - p)) and 0.1 < learn.factor("a") < 0.25
    slow = Learnability(floor=0.1, decay=0.9)
    for _ in range(60):
        slow.record([("c", 0.0)] * 8)
    assert slow.factor("c") == 0.1  # ...and with longer memory an unsolved id sits at the floor, not at 0


def _naive_cap(weights, cap):
    """Water-filling by bisection on the scale of the uncapped ids: an independent route to the same shares."""
    cap = max(cap, 1 / len(weights))
    lo, hi = 0.0, 1e9
    for _ in range(200):
        scale = (lo + hi) / 2
        total = sum(min(cap, scale * w) for w in weights.values())
        lo, hi = (scale, hi) if total < 1 else (lo, scale)
    return {k: min(cap, lo * w) for k, w in weights.items()}


@pytest.mark.parametrize("seed", range(20))
def test_capped_shares_match_water_filling(seed):
    rng = random.Random(seed)
    weights = {f"id{i}": rng.choice([0.01, 0.1, 1.0, 5.0]) * rng.random() + 1e-3 for i in range(rng.randint(1, 8))}
    cap = rng.choice([0.2, 0.3, 0.5, 1.0])
    shares = cap_shares(weights, cap)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert max(shares.values()) <= max(cap, 1 / len(weights)) + 1e-12
    assert shares == pytest.approx(_naive_cap(weights, cap), abs=1e-9)


def _sampler(learnability=None, seed=0):
    return TaskSampler([("learn/*", 1.0), ("other/*", 1.0)], train_seeds=range(0, 1000), eval_seeds=range(2000, 2100),
                       group_size=2, prompts_per_step=10, seed=seed, domain_shares={"learn": 0.5, "other": 0.5},
                       learnability=learnability)


def test_the_sampler_draws_learnable_ids_more_and_keeps_domain_shares(specs):
    sampler = _sampler(Learnability(floor=0.1, cap=0.9, decay=0.9))
    before = sampler.probabilities()
    assert before["learn/a-v0:easy"] == pytest.approx(0.5 / 4)  # nothing recorded: the fixed mix
    # a is mastered, b is learnable, c and d unsolved.
    outcomes = [("learn/a-v0:easy", 1.0)] * 40 + [("learn/b-v0:easy", i % 2) for i in range(40)]
    outcomes += [("learn/c-v0:easy", 0.0)] * 40 + [("learn/d-v0:easy", 0.0)] * 40
    sampler.record(outcomes)
    probs = sampler.probabilities()
    factors = {k: sampler.learnability.factor(k) for k in IDS[:4]}
    assert factors["learn/b-v0:easy"] == pytest.approx(1.0) and factors["learn/a-v0:easy"] < 0.1 + 1e-9
    total = sum(factors.values())
    for env_id in IDS[:4]:
        assert probs[env_id] == pytest.approx(0.5 * factors[env_id] / total)
    assert probs["other/x-v0:easy"] == pytest.approx(0.5)
    counts = Counter(t.env_id for _ in range(300) for t in sampler.next_step()[::2])
    assert counts["other/x-v0:easy"] == 1500  # the domain share is exact, learnability or not
    assert counts["learn/b-v0:easy"] / 1500 == pytest.approx(probs["learn/b-v0:easy"] / 0.5, abs=0.04)


def test_a_fixed_schedule_ignores_outcomes(specs):
    sampler = _sampler()
    before = sampler.probabilities()
    sampler.record([("learn/a-v0:easy", 1.0)] * 50)
    assert sampler.probabilities() == before and "learnability" not in sampler.state_dict()


def test_resume_after_a_json_round_trip_draws_the_same_tasks(specs):
    def outcomes(tasks):
        # Outcomes that depend on the tasks only, as a deterministic rollout's would.
        return [(t.env_id, float((t.seed + len(t.env_id)) % 3 == 0)) for t in tasks]

    full = _sampler(Learnability(decay=0.7))
    seen = []
    for step in range(6):
        tasks = full.next_step()
        full.record(outcomes(tasks))
        seen.append(tasks)
        if step == 2:
            saved = json.loads(json.dumps(full.state_dict()))
    resumed = _sampler(Learnability(decay=0.7))
    resumed.load_state_dict(saved)
    for step in range(3, 6):
        tasks = resumed.next_step()
        resumed.record(outcomes(tasks))
        assert tasks == seen[step]
    with pytest.raises(ValueError, match="mix_schedule"):
        _sampler().load_state_dict(saved)


def test_config_builds_a_learnability_sampler_and_checks_its_knobs():
    cfg = RunConfig(model={"preset": "tiny"}, envs={"mix": [{"glob": "reasoning/*"}], "mix_schedule": "learnability",
                                                   "learnability": {"floor": 0.2, "cap": 0.3}})
    sampler = TaskSampler.from_config(cfg)
    assert (sampler.learnability.floor, sampler.learnability.cap, sampler.learnability.decay) == (0.2, 0.3, 0.8)
    with pytest.raises(ValueError, match="floor"):
        RunConfig(model={"preset": "tiny"}, envs={"learnability": {"floor": 0.0}})
    with pytest.raises(ValueError, match="cap must be"):
        Learnability(cap=1.5)


def test_each_step_batch_carries_the_mix_its_tasks_were_drawn_from(specs):
    """The pipeline hands the trainer each step's draw probabilities (logged as mix/<env id>)."""

    def success(task):
        # a always passes (mastered), b on odd seeds (learnable), c and d never.
        return {"learn/a-v0:easy": 1.0, "learn/b-v0:easy": float(task.seed % 2)}.get(task.env_id, 0.0)

    class Manager:
        chunk_timeout_s = 5.0

        def push_weights(self, state, version):
            pass

        def run(self, tasks, seed=0):
            episodes = [SimpleNamespace(env_id=t.env_id, signals={"success": success(t)}, failed=False) for t in tasks]
            return [SimpleNamespace(episode=episode) for episode in episodes]

    pipeline = RolloutPipeline(Manager(), _sampler(Learnability(floor=0.1, cap=0.9, decay=0.9)), run_seed=0,
                               max_staleness=0, start_step=0, steps=4)
    batches = run_steps(pipeline, 4, 0.0)
    # Nothing recorded before step 0: the fixed mix, each learn id 1/4 of its domain's half.
    assert batches[0].mix == pytest.approx({**{i: 0.125 for i in IDS[:4]}, "other/x-v0:easy": 0.5})
    for batch in batches:
        assert sum(batch.mix.values()) == pytest.approx(1.0) and batch.mix["other/x-v0:easy"] == pytest.approx(0.5)
    assert {"learn/a-v0:easy", "learn/b-v0:easy"} <= {t.env_id for b in batches[:3] for t in b.tasks}
    # The mastered id loses share to the learnable one once their outcomes are in.
    assert batches[3].mix["learn/a-v0:easy"] < 0.125 < batches[3].mix["learn/b-v0:easy"]
