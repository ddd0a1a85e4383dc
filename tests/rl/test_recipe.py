"""Recipe loading: located errors, includes, overrides typed through the schema, presets, the resolved dump."""
import textwrap
from pathlib import Path

import pytest
import yaml

import jointrl.model.presets as presets
from jointrl.rl.recipe import RecipeError, dump_config, load_recipe, shipped_recipes_dir


def write(path: Path, text: str) -> Path:
    """Write dedented YAML; line 1 is the first line after the opening triple quote."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def problems(path: Path, overrides=()) -> list[tuple[str, int | None, str, str]]:
    """(file name, line, key path, message) of every problem load_recipe reports."""
    with pytest.raises(RecipeError) as info:
        load_recipe(path, overrides)
    return [(Path(p.location.source).name, p.location.line, p.key, p.message) for p in info.value.problems]


@pytest.fixture(autouse=True)
def _run_in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def preset_dir(tmp_path, monkeypatch):
    """Point file presets (normally recipes/models/) at a temporary folder."""
    folder = tmp_path / "models"
    folder.mkdir()
    monkeypatch.setattr(presets, "_preset_dir", lambda: folder)
    return folder


def test_misspelled_section_names_file_key_and_line(tmp_path):
    path = write(tmp_path / "r.yaml", """
        model:
          preset: tiny
        trainr:
          steps: 3
    """)
    assert problems(path) == [("r.yaml", 3, "trainr", "unknown key 'trainr' (did you mean 'trainer'?)")]
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert str(info.value) == "r.yaml:3: trainr: unknown key 'trainr' (did you mean 'trainer'?)"


def test_misspelled_nested_key(tmp_path):
    path = write(tmp_path / "r.yaml", """
        model: {preset: tiny}
        rollout:
          workers: 2
          tiers:
            low: 64
            hihg: 128
    """)
    assert problems(path) == [("r.yaml", 6, "rollout.tiers.hihg", "unknown key 'hihg' (did you mean 'high'?)")]


def test_wrong_type_names_the_expected_type(tmp_path):
    path = write(tmp_path / "r.yaml", """
        model: {preset: tiny}
        trainer:
          seed: 1
          steps: ten
        rollout:
          mxfp4_experts: maybe
          temperature: hot
          tier_selection: {ratios: {lo: 0.5}}
    """)
    assert problems(path) == [
        ("r.yaml", 4, "trainer.steps", "expected int, got 'ten'"),
        ("r.yaml", 6, "rollout.mxfp4_experts", "expected bool (true or false), got 'maybe'"),
        ("r.yaml", 7, "rollout.temperature", "expected float, got 'hot'"),
        (
            "r.yaml", 8, "rollout.tier_selection.ratios.lo",
            "expected one of 'low', 'high', 'max', got 'lo' (did you mean 'low'?)",
        ),
    ]


def test_bad_values(tmp_path):
    path = write(tmp_path / "r.yaml", """
        model: {preset: tiny}
        rollout:
          group_size: 0
        algorithm:
          name: grpoo
        envs:
          mix:
            - {glob: "swe/*", weight: 1}
            - {glob: "cad/*", weight: -2}
    """)
    names = "'grpo', 'dr_grpo', 'rloo', 'reinforce_pp', 'ppo', 'gspo'"
    assert problems(path) == [
        ("r.yaml", 3, "rollout.group_size", "must be >= 1, got 0"),
        ("r.yaml", 5, "algorithm.name", f"expected one of {names}, got 'grpoo' (did you mean 'grpo'?)"),
        ("r.yaml", 9, "envs.mix[1].weight", "must be > 0, got -2"),
    ]


def test_cross_field_error_points_at_the_key(tmp_path):
    path = write(tmp_path / "r.yaml", """
        model: {preset: tiny}
        learner:
          ranks: 4
          ep_size: 3
    """)
    assert problems(path) == [("r.yaml", 4, "learner.ep_size", "ep_size=3 does not divide ranks=4")]


def test_missing_model_and_partial_model(tmp_path):
    no_model = write(tmp_path / "a.yaml", "trainer: {steps: 3}\n")
    assert problems(no_model) == [("a.yaml", 1, "", "missing required key 'model'")]
    [(name, line, key, message)] = problems(write(tmp_path / "b.yaml", "trainer: {}\nmodel: {dim: 64}\n"))
    assert (name, line, key) == ("b.yaml", 2, "model")
    assert "'vocab_size'" in message and "'n_experts'" in message and "preset" in message


def test_yaml_syntax_error_has_the_line(tmp_path):
    path = write(tmp_path / "r.yaml", """
        model: {preset: tiny}
        trainer:
          steps: 3
           seed: 1
    """)
    [(name, line, key, message)] = problems(path)
    assert (name, line, key) == ("r.yaml", 4, "")
    assert message.startswith("invalid YAML")


def test_duplicate_key(tmp_path):
    path = write(tmp_path / "r.yaml", """
        model: {preset: tiny}
        trainer:
          steps: 3
          steps: 4
    """)
    assert problems(path) == [("r.yaml", 4, "trainer.steps", "duplicate key (first at line 3)")]


def test_missing_file(tmp_path):
    assert problems(tmp_path / "nope.yaml") == [("nope.yaml", None, "", "recipe file not found")]


def test_include_merges_underneath(tmp_path):
    write(tmp_path / "base" / "one.yaml", """
        model: {preset: debug}
        trainer: {steps: 5, seed: 7}
        rollout: {tiers: {low: 64, high: 128}}
    """)
    write(tmp_path / "base" / "two.yaml", """
        trainer: {seed: 8, prompts_per_step: 3}
    """)
    path = write(tmp_path / "run.yaml", """
        include: [base/one.yaml, base/two.yaml]
        trainer: {steps: 10}
        rollout: {tiers: {high: 256}}
    """)
    cfg = load_recipe(path)
    # The including file wins over its includes; a later include wins over an earlier one.
    assert (cfg.trainer.steps, cfg.trainer.seed, cfg.trainer.prompts_per_step) == (10, 8, 3)
    assert (cfg.rollout.tiers.low, cfg.rollout.tiers.high) == (64, 256)
    assert cfg.model.dim == 64


def test_include_is_relative_to_the_including_file(tmp_path):
    write(tmp_path / "sub" / "inner.yaml", "trainer: {steps: 2}\n")
    write(tmp_path / "sub" / "outer.yaml", "include: inner.yaml\nmodel: {preset: tiny}\n")
    path = write(tmp_path / "top.yaml", "include: sub/outer.yaml\n")
    assert load_recipe(path).trainer.steps == 2


def test_include_falls_back_to_shipped_recipes(tmp_path):
    path = write(tmp_path / "mine.yaml", "include: quickstart.yaml\ntrainer: {steps: 1}\n")
    cfg = load_recipe(path)
    assert cfg.trainer.steps == 1
    assert cfg.model.name == "mini"  # from the shipped quickstart


def test_include_cycle(tmp_path):
    write(tmp_path / "a.yaml", "include: b.yaml\nmodel: {preset: tiny}\n")
    write(tmp_path / "b.yaml", "trainer: {steps: 1}\ninclude: a.yaml\n")
    [(name, line, key, message)] = problems(tmp_path / "a.yaml")
    assert (name, line, key) == ("b.yaml", 2, "include")
    assert message == "include cycle: a.yaml -> b.yaml -> a.yaml"


def test_missing_include(tmp_path):
    path = write(tmp_path / "a.yaml", "model: {preset: tiny}\ninclude: gone.yaml\n")
    [(name, line, key, message)] = problems(path)
    assert (name, line, key) == ("a.yaml", 2, "include")
    assert "'gone.yaml' not found" in message


def test_errors_inside_an_include_report_that_file(tmp_path):
    write(tmp_path / "base.yaml", """
        trainer:
          steps: ten
        algorithm: {kl_estimatr: k2}
    """)
    path = write(tmp_path / "run.yaml", "include: base.yaml\nmodel: {preset: tiny}\nlearner: {lr: -1}\n")
    assert problems(path) == [
        ("base.yaml", 2, "trainer.steps", "expected int, got 'ten'"),
        ("base.yaml", 3, "algorithm.kl_estimatr", "unknown key 'kl_estimatr' (did you mean 'kl_estimator'?)"),
        ("run.yaml", 3, "learner.lr", "must be > 0, got -1"),
    ]


def test_overriding_a_key_moves_its_location(tmp_path):
    write(tmp_path / "base.yaml", "trainer: {steps: ten}\n")
    path = write(tmp_path / "run.yaml", "include: base.yaml\nmodel: {preset: tiny}\ntrainer:\n  steps: eleven\n")
    assert problems(path) == [("run.yaml", 4, "trainer.steps", "expected int, got 'eleven'")]


@pytest.fixture
def recipe(tmp_path):
    return write(tmp_path / "r.yaml", """
        model: {preset: tiny}
        envs:
          mix:
            - {glob: "terminal/*", weight: 1.0}
    """)


def test_overrides_are_typed_by_the_schema(recipe):
    cfg = load_recipe(recipe, [
        "trainer.steps=12",
        "algorithm.kl_coef=0.05",
        "learner.lr=3e-5",
        "rollout.mxfp4_experts=true",
        "rollout.tiers.low=64",
        "envs.mix=[{glob: 'swe/*:hard', weight: 2}, {glob: 'cad/*'}]",
        "learner.betas=[0.8, 0.9]",
    ])
    assert cfg.trainer.steps == 12 and type(cfg.trainer.steps) is int
    assert cfg.algorithm.kl_coef == 0.05
    assert cfg.learner.lr == pytest.approx(3e-5)
    assert cfg.rollout.mxfp4_experts is True
    assert cfg.rollout.tiers.low == 64
    assert [(m.glob, m.weight) for m in cfg.envs.mix] == [("swe/*:hard", 2.0), ("cad/*", 1.0)]
    assert cfg.learner.betas == (0.8, 0.9)


def test_override_into_a_list_item(recipe):
    assert load_recipe(recipe, ["envs.mix[0].weight=4"]).envs.mix[0].weight == 4.0


def test_later_override_wins(recipe):
    assert load_recipe(recipe, ["trainer.steps=1", "trainer.steps=2"]).trainer.steps == 2


def test_bad_overrides_name_the_override(recipe):
    overrides = ["trainer.stepz=3", "trainer.steps=ten", "trainr.steps=1", "steps", "envs.mix[5].weight=1"]
    assert problems(recipe, overrides) == [
        ("override 'trainer.stepz=3'", None, "trainer.stepz", "unknown key 'stepz' (did you mean 'steps'?)"),
        ("override 'trainer.steps=ten'", None, "trainer.steps", "expected int, got 'ten'"),
        ("override 'trainr.steps=1'", None, "trainr", "unknown key 'trainr' (did you mean 'trainer'?)"),
        ("override 'steps'", None, "", "expected KEY=VALUE with a dotted key, e.g. trainer.steps=10"),
        ("override 'envs.mix[5].weight=1'", None, "envs.mix[5]", "index 5 is past the end of a list of 1"),
    ]


def test_preset_with_field_override(tmp_path):
    path = write(tmp_path / "r.yaml", "model:\n  preset: tiny\n  dim: 256\n")
    cfg = load_recipe(path)
    assert (cfg.model.name, cfg.model.dim, cfg.model.n_experts) == ("tiny", 256, 8)
    cfg = load_recipe(path, ["model.preset=debug"])
    assert (cfg.model.name, cfg.model.dim, cfg.model.n_experts) == ("debug", 256, 8)


def test_model_field_errors_and_unknown_preset(tmp_path, preset_dir):
    path = write(tmp_path / "r.yaml", "model:\n  preset: tiny\n  dimm: 256\n")
    assert problems(path) == [("r.yaml", 3, "model.dimm", "unknown key 'dimm' (did you mean 'dim'?)")]
    # ModelConfig's own cross-field check lands on the section.
    path = write(tmp_path / "q.yaml", "trainer: {}\nmodel:\n  preset: tiny\n  n_active: 99\n")
    assert problems(path) == [("q.yaml", 2, "model", "n_active=99 exceeds n_experts=8")]
    path = write(tmp_path / "s.yaml", "trainer: {}\nmodel:\n  preset: tinyy\n")
    assert problems(path) == [("s.yaml", 3, "model.preset", "unknown model preset 'tinyy' (did you mean 'tiny'?)")]


def test_errors_inside_a_file_preset_report_its_line(tmp_path, preset_dir):
    fields = presets.PRESETS["debug"].model_dump() | {"name": "wide", "dim": 96}
    (preset_dir / "wide.yaml").write_text(yaml.safe_dump({"model": fields}, sort_keys=False))
    path = write(tmp_path / "r.yaml", "model:\n  preset: wide\n  n_active: 3\n")
    cfg = load_recipe(path)
    assert (cfg.model.name, cfg.model.dim, cfg.model.n_active) == ("wide", 96, 3)

    fields["kda_heads"] = "four"
    (preset_dir / "wide.yaml").write_text(yaml.safe_dump({"model": fields}, sort_keys=False))
    line = 2 + list(fields).index("kda_heads")  # line 1 is `model:`
    assert problems(path) == [("wide.yaml", line, "model.kda_heads", "expected int, got 'four'")]

    (preset_dir / "wide.yaml").write_text("model:\n  dim: [1\n")
    [(name, line, key, message)] = problems(path)
    assert (name, key) == ("wide.yaml", "") and message.startswith("invalid YAML")


def test_dump_is_stable_and_reloads_to_the_same_config(tmp_path, recipe):
    cfg = load_recipe(recipe, ["trainer.steps=7", "learner.lr=1e-5"])
    text = dump_config(cfg)
    assert list(yaml.safe_load(text)) == [
        "model", "tokenizer", "envs", "rewards", "rollout", "algorithm", "learner", "trainer", "tracking", "checkpoint",
        "plan", "ray",
    ]
    assert dump_config(load_recipe(recipe, ["learner.lr=1e-5", "trainer.steps=7"])) == text
    again = load_recipe(write(tmp_path / "dumped.yaml", text))
    assert again == cfg


SHIPPED = sorted(p.name for p in shipped_recipes_dir().glob("*.yaml"))


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_recipes_are_valid(name, prepared_recipe):
    prepared_recipe(name)
    load_recipe(shipped_recipes_dir() / name)


def test_quickstart_is_shipped_and_small():
    assert "quickstart.yaml" in SHIPPED
    cfg = load_recipe("quickstart")
    assert cfg.model.name == "mini" and cfg.algorithm.name == "grpo"
    # 64 steps of ~2.1 s fit its ten minutes on 2 cores with the cold start (docs/learning.md, session 18).
    assert cfg.trainer.steps <= 64
    # Two domains: the tool-using domains besides terminal run 1-2k-token episodes a sub-million-parameter model cannot
    # learn in the quickstart's minutes on CPU (joint_grpo.yaml has all of them).
    assert len({m.glob.split("/")[0] for m in cfg.envs.mix}) >= 2
