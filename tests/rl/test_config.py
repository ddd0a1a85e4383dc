"""The run schema: documented fields, defaults that make a short config valid, presets, cross-field checks."""
import typing

import pytest
import yaml
from pydantic import BaseModel, ValidationError

import jointrl.model.presets as presets
from jointrl.envs.episode import Episode
from jointrl.model.config import ModelConfig
from jointrl.rewards import RewardMixer
from jointrl.rewards.alarms import AlarmConfig
from jointrl.rl.config.envs import SeedRange
from jointrl.rl.config.run import RunConfig


def _models_under(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every pydantic model reachable from root through field annotations (lists, dicts, optionals)."""
    found: dict[str, type[BaseModel]] = {}

    def visit(ann):
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            if ann.__name__ not in found:
                found[ann.__name__] = ann
                for field in ann.model_fields.values():
                    visit(field.annotation)
        for arg in typing.get_args(ann):
            visit(arg)

    visit(root)
    return found


MODELS = _models_under(RunConfig)


def test_walk_reaches_every_section():
    expected = {
        "RunConfig", "ModelConfig", "TokenizerConfig", "EnvsConfig", "EnvMixEntry", "SeedRange", "RewardsConfig",
        "RewardTerm", "RolloutConfig", "TierBudgets", "TierSelection", "AlgorithmConfig", "LearnerConfig",
        "TrainerConfig", "SFTConfig", "TrackingConfig", "CheckpointConfig", "PlanConfig", "AlarmConfig",
    }
    assert expected <= set(MODELS)


def test_every_field_has_a_description():
    undocumented = [
        f"{name}.{field}"
        for name, model in MODELS.items()
        for field, info in model.model_fields.items()
        if not (info.description and info.description.strip())
    ]
    assert undocumented == []


def test_every_section_forbids_unknown_keys():
    assert [name for name, model in MODELS.items() if model.model_config.get("extra") != "forbid"] == []


def test_a_preset_alone_is_a_complete_config():
    cfg = RunConfig(model={"preset": "tiny"})
    assert isinstance(cfg.model, ModelConfig)
    # The tiny preset's published shape.
    assert (cfg.model.name, cfg.model.dim, cfg.model.vocab_size, cfg.model.n_experts) == ("tiny", 192, 4096, 8)
    assert cfg.model.layer_pattern == "KKKSKKKS"
    assert cfg.algorithm.name == "grpo"
    assert cfg.rollout.tiers.low < cfg.rollout.tiers.high < cfg.rollout.tiers.max


def test_fields_next_to_the_preset_override_it():
    cfg = RunConfig(model={"preset": "tiny", "dim": 256, "n_experts": 32})
    assert (cfg.model.dim, cfg.model.n_experts) == (256, 32)
    assert cfg.model.kda_heads == 4  # untouched tiny field


def test_a_model_config_instance_is_accepted():
    cfg = RunConfig(model=presets.PRESETS["debug"])
    assert cfg.model.dim == 64


def test_a_model_without_preset_needs_every_field():
    with pytest.raises(ValidationError) as info:
        RunConfig(model={"dim": 64})
    missing = {e["loc"] for e in info.value.errors() if e["type"] == "missing"}
    assert ("model", "vocab_size") in missing and ("model", "n_experts") in missing


@pytest.fixture
def preset_dir(tmp_path, monkeypatch):
    """Point file presets (normally recipes/models/) at an empty temporary folder."""
    folder = tmp_path / "models"
    folder.mkdir()
    monkeypatch.setattr(presets, "_preset_dir", lambda: folder)
    return folder


def test_file_preset_with_override(preset_dir):
    fields = presets.PRESETS["debug"].model_dump() | {"name": "wide", "dim": 96}
    (preset_dir / "wide.yaml").write_text(yaml.safe_dump({"model": fields}))
    cfg = RunConfig(model={"preset": "wide", "n_active": 3})
    assert (cfg.model.name, cfg.model.dim, cfg.model.n_active, cfg.model.n_experts) == ("wide", 96, 3, 8)


def test_unknown_preset_suggests_the_closest(preset_dir):
    with pytest.raises(ValidationError) as info:
        RunConfig(model={"preset": "tinyy"})
    (error,) = info.value.errors()
    assert error["loc"] == ("model", "preset")
    assert "unknown model preset 'tinyy'" in error["msg"] and "'tiny'" in error["msg"]


BAD = [
    ({"learner": {"ranks": 4, "ep_size": 3}}, ("learner", "ep_size"), "does not divide ranks=4"),
    ({"learner": {"ranks": 3, "ep_size": 3}}, ("learner", "ep_size"), "does not divide model.n_experts=8"),
    ({"rollout": {"group_size": 1}}, ("rollout", "group_size"), "needs group_size >= 2"),
    ({"envs": {"eval_seeds": {"start": 10, "stop": 20}}}, ("envs", "eval_seeds", "start"), "at or above 1000000"),
    ({"envs": {"train_seeds": {"start": 0, "stop": 1000001}}}, ("envs", "train_seeds", "stop"), "below 1000000"),
    ({"envs": {"train_seeds": {"start": 5, "stop": 5}}}, ("envs", "train_seeds", "stop"), "greater than start"),
    (
        {"trainer": {"eval_seeds_per_env": 65}, "envs": {"eval_seeds": {"start": 1000000, "stop": 1000064}}},
        ("trainer", "eval_seeds_per_env"),
        "eval_seeds_per_env=65 is more than the 64 held-out seeds of envs.eval_seeds (1000000..1000064)",
    ),
    ({"rollout": {"tiers": {"low": 600, "high": 500}}}, ("rollout", "tiers", "high"), "below low"),
    (
        {"rollout": {"tier_selection": {"mode": "ratios", "ratios": {"low": 0.5, "high": 0.4}}}},
        ("rollout", "tier_selection", "ratios"),
        "summing to 1",
    ),
    (
        {"rollout": {"max_new_tokens_per_turn": 900, "max_new_tokens_per_episode": 800}},
        ("rollout", "max_new_tokens_per_turn"),
        "exceeds",
    ),
    ({"envs": {"domain_shares": {"swe": 0.3, "cad": 0.4}}}, ("envs", "domain_shares"), "sum to 1"),
    (
        {"envs": {"mix": [{"glob": "swe/*"}], "domain_shares": {"swe": 0.5, "cad": 0.5}}},
        ("envs", "domain_shares", "cad"),
        "no glob",
    ),
    ({"rewards": {"domains": {"swe": []}}}, ("rewards", "domains", "swe"), "at least one"),
    ({"learner": {"betas": [0.9, 1.0]}}, ("learner", "betas", 1), "[0, 1)"),
    ({"algorithm": {"dual_clip_c": 1.0}}, ("algorithm", "dual_clip_c"), "greater than 1"),
    ({"algorithm": {"name": "a2c"}}, ("algorithm", "name"), "'grpo'"),
    ({"learner": {"zero_stage": 3}}, ("learner", "zero_stage"), "1 or 2"),
    ({"learner": {"ranks": 2, "ep_size": 2, "share_openings": True}}, ("learner", "share_openings"), "all-to-all"),
    ({"learner": {"share_openings": True}, "algorithm": {"name": "ppo"}}, ("learner", "share_openings"), "critic"),
]


@pytest.mark.parametrize("sections,loc,fragment", BAD, ids=[".".join(map(str, b[1])) for b in BAD])
def test_bad_values_are_located(sections, loc, fragment):
    with pytest.raises(ValidationError) as info:
        RunConfig(model={"preset": "tiny"}, **sections)
    errors = info.value.errors()
    assert [e["loc"] for e in errors] == [loc]
    assert fragment in errors[0]["msg"]


GOOD = [
    {"rollout": {"group_size": 1}, "algorithm": {"name": "ppo"}},
    {"rollout": {"group_size": 1}, "algorithm": {"name": "reinforce_pp"}},
    # Half-open ranges that touch do not overlap.
    {"envs": {"train_seeds": {"start": 0, "stop": 1000000}, "eval_seeds": {"start": 1000000, "stop": 1000100}}},
    {"learner": {"ranks": 4, "ep_size": 2}},
    {"rollout": {"tier_selection": {"mode": "ratios", "ratios": {"low": 0.1, "high": 0.2, "max": 0.7}}}},
    {"envs": {"mix": [{"glob": "*/*:easy"}], "domain_shares": {"terminal": 0.5, "swe": 0.5}}},
]


@pytest.mark.parametrize("sections", GOOD, ids=range(len(GOOD)))
def test_edge_values_are_accepted(sections):
    RunConfig(model={"preset": "tiny"}, **sections)


def test_accepted_seed_ranges_sit_on_their_side_of_the_held_out_start_and_never_share_a_seed():
    edge = 1_000_000  # envs.base.HELD_OUT_START, written out so a change to it shows here
    bounds = [edge - 2, edge - 1, edge, edge + 1, edge + 2]
    ranges = [SeedRange(start=a, stop=b) for a in bounds for b in bounds if b > a]
    for train in ranges:
        for held in ranges:
            envs = {"train_seeds": train.model_dump(), "eval_seeds": held.model_dump()}
            try:
                # One evaluation seed per env: these held-out ranges hold one or two.
                RunConfig(model={"preset": "tiny"}, envs=envs, trainer={"eval_seeds_per_env": 1})
                accepted = True
            except ValidationError:
                accepted = False
            assert accepted == (train.stop <= edge <= held.start), (train, held)
            if accepted:
                assert not set(range(train.start, train.stop)) & set(range(held.start, held.stop))


def test_assignment_is_validated():
    cfg = RunConfig(model={"preset": "tiny"})
    with pytest.raises(ValidationError):
        cfg.trainer.steps = -1


REWARD_BAD = [
    (
        {"default": [{"name": "corectness"}]},
        ("default", 0, "name"),
        "unknown reward 'corectness' (did you mean 'correctness'?)",
    ),
    (
        {"domains": {"cad": [{"name": "iou", "params": {"treshold": 0.5}}]}},
        ("domains", "cad", 0, "params", "treshold"),
        "reward 'iou' has no parameter 'treshold' (accepted: threshold)",
    ),
    (
        {"domains": {"cad": [{"name": "iou", "params": {"threshold": "high"}}]}},
        ("domains", "cad", 0, "params", "threshold"),
        "must be a finite number or null",
    ),
    (
        {"default": [{"name": "overlong_penalty", "params": {"window": 10}}]},
        ("default", 0, "params"),
        "needs parameter 'max_tokens'",
    ),
    (
        {"default": [{"name": "overlong_penalty", "params": {"max_tokens": 10, "window": 20}}]},
        ("default", 0, "params"),
        "window <= max_tokens",
    ),
    (
        {"domains": {"swe": [{"name": "resolved"}, {"name": "format"}, {"name": "resolved", "weight": 2}]}},
        ("domains", "swe", 2, "name"),
        "'resolved' is listed more than once",
    ),
    ({"envs": {"cad/*:hard": []}}, ("envs", "cad/*:hard"), "at least one"),
    ({"decay": 1.5}, ("decay",), "less than or equal to 1"),
]


@pytest.mark.parametrize("rewards,loc,fragment", REWARD_BAD, ids=[".".join(map(str, b[1])) for b in REWARD_BAD])
def test_reward_terms_are_checked_against_the_registry(rewards, loc, fragment):
    with pytest.raises(ValidationError) as info:
        RunConfig(model={"preset": "tiny"}, rewards=rewards)
    errors = info.value.errors()
    assert [e["loc"] for e in errors] == [("rewards", *loc)]
    assert fragment in errors[0]["msg"]


def test_rewards_section_builds_the_mixer():
    cfg = RunConfig(model={"preset": "tiny"}, rewards={
        "normalization": "domain", "decay": 0.5, "by_tier": False,
        "domains": {"cad": [{"name": "iou", "weight": 2.0, "params": {"threshold": 0.9}}]},
        "envs": {"cad/*:hard": [{"name": "iou"}]},
    })
    mixer = RewardMixer.from_config(cfg.rewards)
    assert (mixer.normalization, mixer.domain.decay, mixer.domain.by_tier) == ("domain", 0.5, False)
    easy = Episode("cad/plate-v1:easy", "cad", "plate", "easy", seed=0, tier="low", signals={"iou": 0.95})
    hard = Episode("cad/plate-v1:hard", "cad", "plate", "hard", seed=0, tier="low", signals={"iou": 0.95})
    other = Episode("terminal/grep-v1:easy", "terminal", "grep", "easy", seed=0, tier="low", signals={"success": 0.0})
    # cad: iou >= 0.9 weighted 2; cad/*:hard overrides with raw iou; other domains fall back to correctness.
    assert RewardMixer(mixer.table, normalization="none").mix([easy, hard, other]).raw == [2.0, 0.95, 0.0]


def test_the_recipe_alarm_section_is_the_rewards_alarm_config():
    cfg = RunConfig(model={"preset": "debug"}, rewards={"alarms": {"gap_margin": 0.2, "stop_on": ["verifier_gap"]}})
    alarms = cfg.rewards.alarms
    assert isinstance(alarms, AlarmConfig)
    assert alarms.gap_margin == 0.2 and alarms.stop_on == ("verifier_gap",)
    assert alarms.drift_window == AlarmConfig().drift_window == 10  # unset keys keep the rewards package's defaults
    with pytest.raises(ValidationError, match="unknown kinds"):
        RunConfig(model={"preset": "debug"}, rewards={"alarms": {"stop_on": ["panic"]}})


@pytest.mark.parametrize("algorithm", ["dr_grpo", "rloo"])
def test_self_baselined_algorithms_refuse_group_normalisation(algorithm):
    with pytest.raises(ValidationError, match="would std-scale"):
        RunConfig(model={"preset": "debug"}, algorithm={"name": algorithm}, rewards={"normalization": "group"})
    RunConfig(model={"preset": "debug"}, algorithm={"name": algorithm}, rewards={"normalization": "domain"})


@pytest.mark.parametrize("key", ["checkpoint.export_mxfp4", "rollout.gpu_mem_gib", "learner.gpu_mem_gib", "rollout.max_context"])
def test_keys_nothing_reads_are_gone_from_their_old_sections(key):
    section, field = key.split(".")
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        RunConfig(model={"preset": "debug"}, **{section: {field: 1}})


def test_async_rollouts_need_truncated_importance_weights():
    with pytest.raises(ValidationError, match="max_staleness=2 trains on tokens sampled by older policies") as info:
        RunConfig(model={"preset": "debug"}, rollout={"max_staleness": 2}, algorithm={"tis_cap": None})
    assert info.value.errors()[0]["loc"] == ("algorithm", "tis_cap")
    RunConfig(model={"preset": "debug"}, rollout={"max_staleness": 2}, algorithm={"tis_cap": 2.0})
    RunConfig(model={"preset": "debug"}, rollout={"max_staleness": 0}, algorithm={"tis_cap": None})


def test_the_configs_critic_algorithms_are_the_tables():
    from jointrl.rl.algorithms.table import ALGORITHMS
    from jointrl.rl.config.training import CRITIC_ALGORITHMS

    assert CRITIC_ALGORITHMS == {name for name, algorithm in ALGORITHMS.items() if algorithm.critic}
