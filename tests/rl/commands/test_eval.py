"""Evaluation: pass@k and per-domain/tier statistics against hand-computed values, and `jointrl eval` end to end.

The end-to-end tests play a small test env ("say a word"; success when the answer has an even number of
characters) with a debug model briefly fitted to its demos, so sampled answers pass and fail in a mix.
"""
import json
import shutil
import textwrap
from collections import defaultdict

import pytest
import torch

from jointrl.envs import registry
from jointrl.envs.base import Action, Env, EnvSpec
from jointrl.envs.episode import Episode
from jointrl.model.chat import render_text
from jointrl.model.checkpoint import save_pretrained
from jointrl.model.pretrained import load_tokenizer
from jointrl.model.presets import PRESETS
from jointrl.model.tokenizer import train_tokenizer
from jointrl.model.transformer import Transformer
from jointrl.rl.commands.cli import main
from jointrl.rl.config.run import RunConfig
from jointrl.rl.evaluate import EvalSummary, k_values, pass_at_k, raw_rewards, summarize
from jointrl.rl.sft import Conversation, encode, train_sft
from jointrl.rl.trajectory import Trajectory

PARITY = "evaltest/parity-v0:easy"
ANSWERS = ["ok", "yes", "sure", "no", "fine", "maybe"]
RECIPE = textwrap.dedent(f"""
    model: {{preset: debug}}
    envs:
      mix: [{{glob: "{PARITY}"}}]
      train_seeds: {{start: 0, stop: 500}}
      eval_seeds: {{start: 1000000, stop: 1000020}}
    rollout:
      max_turns: 2
      max_new_tokens_per_turn: 16
      max_new_tokens_per_episode: 32
      tiers: {{low: 8, high: 16, max: 32}}
""")


class Parity(Env):
    """Say a word; success when the answer has an even, non-zero number of characters."""

    def _reset(self, seed):
        return [{"role": "user", "content": "Say a word."}]

    def _signals(self):
        answer = self.final_answer or ""
        return {"success": float(bool(answer) and len(answer) % 2 == 0)}

    def _solution(self):
        yield Action(None, answer=ANSWERS[self.seed % len(ANSWERS)], reasoning="Hm.")


def fit_parity_policy(directory):
    """Save a debug model fitted for a few steps to the parity demos, with its tokenizer, to directory."""
    conversations = []
    for seed in range(len(ANSWERS)):
        env = Parity()
        obs = env.reset(seed)
        conversations.append(Conversation(obs.messages + env.demo(), obs.tools, "low"))
    tokenizer = train_tokenizer([render_text(c.messages, c.tools, c.tier) for c in conversations] * 20, 512)
    torch.manual_seed(0)
    model = Transformer(PRESETS["debug"])
    examples = encode(tokenizer, conversations, 512) * 2
    train_sft(model, examples, epochs=6, lr=1e-2, batch_size=6, pad_id=tokenizer.pad_id)
    save_pretrained(model.eval(), directory, tokenizer=tokenizer)
    return directory


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    """(checkpoint dir, recipe path) with the parity env registered for the module."""
    registry.register(EnvSpec(id=PARITY, entry_point=f"{__name__}:Parity"))
    root = tmp_path_factory.mktemp("parity")
    checkpoint = fit_parity_policy(root / "ckpt")
    recipe = root / "recipe.yaml"
    recipe.write_text(RECIPE)
    yield checkpoint, recipe
    registry._SPECS.pop(PARITY, None)


def _trajectory(env_id, tier, seed, group, success, think=0, budget=None, failed=False):
    domain = env_id.split("/")[0]
    episode = Episode(env_id, domain, "fam", "easy", seed=seed, tier=tier, group_id=group, think_tokens=think,
                      think_budget=budget, failed=failed, signals={} if failed else {"success": success})
    return Trajectory(episode, torch.zeros(0, dtype=torch.long), torch.zeros(0), torch.zeros(0),
                      torch.zeros(0, dtype=torch.long))


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(5, 0, 1) == 0.0
    assert pass_at_k(5, 5, 3) == 1.0
    assert pass_at_k(5, 2, 1) == pytest.approx(2 / 5)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)  # 1 - C(7,5)/C(10,5)
    assert pass_at_k(3, 1, 3) == 1.0  # any pass among all samples
    # Large n stays exact where float binomials would overflow.
    assert pass_at_k(2000, 1, 1) == pytest.approx(1 / 2000)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)
    assert [k_values(n) for n in (1, 2, 4, 6)] == [[1], [1, 2], [1, 2, 4], [1, 2, 4, 6]]


def test_summary_per_domain_tier_and_env_by_hand():
    trajectories = [
        # swe task A, low tier, two samples: one pass; think 10 and 20 against a budget of 16.
        _trajectory("swe/a-v0:easy", "low", 1, 0, 1.0, think=10, budget=16),
        _trajectory("swe/a-v0:easy", "low", 1, 0, 0.0, think=20, budget=16),
        # swe task B, high tier: a fail and an env crash.
        _trajectory("swe/b-v0:easy", "high", 2, 1, 0.0, think=30, budget=64),
        _trajectory("swe/b-v0:easy", "high", 2, 1, 0.0, think=99, budget=64, failed=True),
        # cad task C, low tier: two passes, no budget.
        _trajectory("cad/c-v0:easy", "low", 3, 2, 1.0, think=4),
        _trajectory("cad/c-v0:easy", "low", 3, 2, 1.0, think=6),
    ]
    rewards = [1.0, 0.0, 0.5, None, 2.0, 1.0]
    s = summarize(trajectories, rewards, {"samples": 2})
    assert (s.overall.episodes, s.overall.tasks, s.overall.pass_rate) == (6, 3, 0.5)
    assert s.overall.mean_reward == pytest.approx(4.5 / 5)
    assert s.overall.think_tokens == pytest.approx((10 + 20 + 30 + 4 + 6) / 5)
    assert s.overall.within_budget == pytest.approx(2 / 3)  # 10 <= 16, 20 > 16, 30 <= 64
    # pass@2 per task: A 1, B 0, C 1.
    assert s.overall.pass_at_k == pytest.approx({1: 0.5, 2: 2 / 3})
    assert s.pass_rate == {"cad": 1.0, "swe": 0.25, "all": 0.5}
    assert s.domains["swe"].pass_at_k == pytest.approx({1: 0.25, 2: 0.5})
    assert s.tiers["low"].pass_rate == 0.75 and s.tiers["high"].pass_rate == 0.0
    assert s.think_tokens == pytest.approx({"high": 30.0, "low": 10.0})
    assert s.domain_tiers["swe"]["low"].within_budget == 0.5
    assert s.domain_tiers["swe"]["high"].mean_reward == 0.5
    assert s.domain_tiers["cad"]["low"].within_budget is None
    assert s.envs["swe/b-v0:easy"].pass_at_k == {1: 0.0, 2: 0.0}
    metrics = s.metrics()
    assert metrics["pass_rate/all"] == 0.5 and metrics["pass_at_2/swe"] == 0.5
    assert metrics["tier/low/think_tokens"] == 10.0 and metrics["tier/low/within_budget"] == 0.5
    data = json.loads(json.dumps(s.to_json()))
    assert data["domain_tiers"]["swe"]["high"]["pass_at_k"] == {"1": 0.0, "2": 0.0}
    assert [e["passed"] for e in data["episodes"]] == [True, False, False, False, True, True]
    # Read back from its JSON, the summary recomputes the same statistics from the episodes alone.
    assert json.loads(json.dumps(EvalSummary.from_json(data).to_json())) == data
    del data["episodes"][3]["family"]
    with pytest.raises(ValueError, match="episode 3 has no 'family'"):
        EvalSummary.from_json(data)


def test_raw_rewards_follow_the_recipe_table():
    cfg = RunConfig(model={"preset": "debug"}, rewards={
        "normalization": "group",
        "domains": {"cad": [{"name": "correctness"}, {"name": "iou", "weight": 0.5}]},
    })
    cad = _trajectory("cad/c-v0:easy", "low", 1, 0, 1.0).episode
    cad.signals["iou"] = 0.8
    crashed = _trajectory("swe/a-v0:easy", "low", 1, 0, 0.0, failed=True).episode
    # Raw, whatever the recipe's normalisation: 1.0 + 0.5 * 0.8; the crashed episode is not scored.
    assert raw_rewards(cfg, [cad, crashed]) == [pytest.approx(1.4), None]


def _eval(capsys, *argv):
    code = main(["eval", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_eval_command_writes_the_json_summary(parity, tmp_path, capsys):
    checkpoint, recipe = parity
    out_file = tmp_path / "eval" / "summary.json"
    code, out, err = _eval(capsys, checkpoint, recipe, "--envs", PARITY, "--seeds", "1000000:1000003", "--tiers", "low,high",
                           "--samples", 3, "--temperature", 1.0, "--seed", 5, "--out", out_file)
    assert code == 0, err
    assert "pass@3" in out and "pass rate" in out
    data = json.loads(out_file.read_text())
    assert set(data) == {"settings", "overall", "domains", "tiers", "domain_tiers", "envs", "episodes"}
    settings = data["settings"]
    assert settings["env_ids"] == [PARITY] and settings["seeds"] == [1000000, 1000001, 1000002]
    assert settings["tiers"] == ["low", "high"] and settings["samples"] == 3
    assert settings["temperature"] == 1.0 and settings["seed"] == 5

    episodes = data["episodes"]
    assert len(episodes) == 1 * 3 * 2 * 3
    assert {(e["seed"], e["tier"]) for e in episodes} == {(s, t) for s in (1000000, 1000001, 1000002) for t in ("low", "high")}
    # Independent of the estimator: pass@1 is the pass rate, pass@n the share of tasks with any pass.
    tasks = defaultdict(list)
    for e in episodes:
        tasks[(e["seed"], e["tier"], e["group_id"])].append(e["passed"])
    assert len(tasks) == 6 and all(len(v) == 3 for v in tasks.values())
    overall = data["overall"]
    assert overall["pass_rate"] == pytest.approx(sum(e["passed"] for e in episodes) / 18)
    assert overall["pass_at_k"]["1"] == pytest.approx(overall["pass_rate"])
    assert overall["pass_at_k"]["3"] == pytest.approx(sum(any(v) for v in tasks.values()) / 6)
    # The sampled answers really differ: some pass, some fail.
    assert 0 < overall["pass_rate"] < 1
    for tier in ("low", "high"):
        mine = [e for e in episodes if e["tier"] == tier]
        cell = data["domain_tiers"]["evaltest"][tier]
        assert cell["episodes"] == 9
        assert cell["pass_rate"] == pytest.approx(sum(e["passed"] for e in mine) / 9)
        assert cell["think_tokens"] == pytest.approx(sum(e["think_tokens"] for e in mine) / 9)
        budget = {"low": 8, "high": 16}[tier]
        assert all(e["think_budget"] == budget for e in mine)
        assert cell["within_budget"] == pytest.approx(sum(e["think_tokens"] <= budget for e in mine) / 9)
        assert data["tiers"][tier]["pass_rate"] == cell["pass_rate"]
    assert data["domains"]["evaltest"]["pass_rate"] == overall["pass_rate"]
    assert data["envs"][PARITY]["episodes"] == 18
    # The recipe's reward table is correctness: the raw reward is the success signal.
    assert all(e["reward"] == e["signals"]["success"] for e in episodes)
    assert all(e["passed"] == (bool(e["final_answer"]) and len(e["final_answer"]) % 2 == 0) for e in episodes)


def test_sampling_is_reproducible_with_seed_and_a_run_checkpoint_uses_its_recipe(parity, tmp_path, capsys):
    checkpoint, recipe = parity
    # A run checkpoint: the model under model/ and the resolved recipe beside it.
    run_ckpt = tmp_path / "step-00000010"
    shutil.copytree(checkpoint, run_ckpt / "model")
    shutil.copy(recipe, run_ckpt / "recipe.yaml")
    runs = {}
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        out_file = tmp_path / f"{name}.json"
        code, _, err = _eval(capsys, run_ckpt, "--seeds", "1000010:1000012", "--samples", 4, "--seed", seed, "--out", out_file)
        assert code == 0, err
        runs[name] = json.loads(out_file.read_text())
    assert runs["a"]["settings"]["recipe"].endswith("recipe.yaml")
    # samples > 1 without --temperature samples at the recipe's rollout temperature.
    assert runs["a"]["settings"]["temperature"] == 1.0
    assert runs["a"]["episodes"] == runs["b"]["episodes"]
    answers = {name: [e["final_answer"] for e in run["episodes"]] for name, run in runs.items()}
    assert answers["a"] != answers["c"]


def _task_rates(episodes):
    tasks = defaultdict(list)
    for e in episodes:
        tasks[(e["seed"], e["tier"])].append(e["passed"])
    return {task: sum(passes) / len(passes) for task, passes in tasks.items()}


def test_against_plays_the_same_tasks_and_reports_the_paired_change(parity, tmp_path, capsys):
    checkpoint, recipe = parity
    # An untrained policy with the same tokenizer: it rarely ends a turn within 16 tokens, so it passes less.
    blank = tmp_path / "blank"
    torch.manual_seed(1)
    save_pretrained(Transformer(PRESETS["debug"]).eval(), blank, tokenizer=load_tokenizer(checkpoint))
    common = ("--envs", PARITY, "--seeds", "1000000:1000010", "--samples", 3, "--seed", 2)
    code, out, err = _eval(capsys, checkpoint, recipe, *common, "--against", blank, "--out", tmp_path / "vs.json")
    assert code == 0, err
    assert "paired bootstrap 95% CI" in out and str(blank) in out
    data = json.loads((tmp_path / "vs.json").read_text())
    # BASE's episodes are those `jointrl eval BASE` plays alone with the same seed.
    code, _, err = _eval(capsys, blank, recipe, *common, "--out", tmp_path / "blank.json")
    assert code == 0, err
    alone = json.loads((tmp_path / "blank.json").read_text())
    assert data["against"]["episodes"] == alone["episodes"]
    assert data["against"]["settings"]["checkpoint"] == str(blank)

    # The change by hand: per task, the checkpoint's pass rate minus BASE's, averaged over the 10 tasks.
    base, mine = _task_rates(alone["episodes"]), _task_rates(data["episodes"])
    assert base.keys() == mine.keys() and len(base) == 10
    by_hand = sum(mine[t] - base[t] for t in base) / len(base)
    changes = {c["group"]: c for c in data["changes"]}
    assert set(changes) == {"evaltest/parity", "all"}
    for change in changes.values():
        assert change["tasks"] == 10 and change["episodes_a"] == change["episodes_b"] == 30
        assert change["a"] == pytest.approx(sum(base.values()) / 10)
        assert change["b"] == pytest.approx(sum(mine.values()) / 10)
        assert change["change"] == pytest.approx(by_hand)
        assert change["low"] <= change["change"] <= change["high"]
        assert change["significant"] == (change["low"] > 0 or change["high"] < 0)
    # The fitted policy passes where the blank one does not, on these tasks.
    assert by_hand > 0


def test_seeds_outside_the_held_out_range_are_refused(parity, capsys):
    checkpoint, recipe = parity
    code, out, err = _eval(capsys, checkpoint, recipe, "--seeds", "999998:1000002")
    assert code == 1
    assert err.count("\n") == 1
    assert "seeds [999998, 999999] are outside the held-out range [1000000, 1000020)" in err


def test_bad_arguments_are_one_line_errors(parity, tmp_path, capsys):
    checkpoint, recipe = parity
    for argv, message in (
        ((checkpoint, recipe, "--seeds", "5-9"), "--seeds '5-9'"),
        ((checkpoint, recipe, "--tiers", "low,huge"), "--tiers 'low,huge'"),
        ((checkpoint, recipe, "--samples", 0), "--samples must be >= 1"),
        ((tmp_path, recipe), "is not a checkpoint"),
        ((checkpoint, recipe, "--against", tmp_path), "is not a checkpoint"),
    ):
        code, _, err = _eval(capsys, *argv)
        assert code == 1 and message in err and err.count("\n") == 1, err


def test_overrides_without_a_recipe_apply_to_the_default_one(parity, tmp_path, capsys):
    checkpoint, _ = parity
    # No recipe is stored with this checkpoint, so the quickstart recipe applies, with the override.
    # The range shrinks below the recipe's 128 evaluation seeds per env, which the config refuses unless lowered too.
    overrides = ["envs.eval_seeds.start=1000010", "trainer.eval_seeds_per_env=8"]
    code, _, err = _eval(capsys, checkpoint, *overrides, "--envs", PARITY, "--seeds", "1000000:1000001")
    assert code == 1 and "outside the held-out range [1000010, 1000128)" in err
    code, _, err = _eval(capsys, checkpoint, overrides[0], "--envs", PARITY, "--seeds", "1000000:1000001")
    assert code == 1 and "trainer.eval_seeds_per_env: eval_seeds_per_env=128 is more than the 118 held-out" in err
