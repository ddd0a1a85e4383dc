"""Strict recipes: env globs and reward names resolved against the registries, numbers never coerced, and
includes whose mappings a `name!:` key replaces instead of merging into."""
import textwrap
from pathlib import Path

import pytest

from jointrl.rl.recipe import RecipeError, load_recipe


def write(path: Path, text: str) -> Path:
    """Write dedented YAML; line 1 is the first line after the opening triple quote."""
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


def test_env_globs_that_select_nothing_are_located_with_a_suggestion(tmp_path):
    path = write(tmp_path / "r.yaml", """
        model: {preset: tiny}
        envs:
          mix:
            - {glob: "terminal/text-count-v0:eazy"}
            - {glob: "reasoning/*"}
            - {glob: "sw/*:hard", weight: 2}
    """)
    assert problems(path) == [
        ("r.yaml", 4, "envs.mix[0].glob", "unknown env id 'terminal/text-count-v0:eazy' (did you mean "
         "'terminal/text-count-v0:easy' or 'terminal/text-count-v0:*' or 'terminal/text-count-v0:hard'?)"),
        ("r.yaml", 6, "envs.mix[2].glob",
         "no registered env id matches 'sw/*:hard' (did you mean 'swe/*:hard' or '*:hard' or 'cad/*:hard'?)"),
    ]
    # An override is checked the same way and named as the override.
    with pytest.raises(RecipeError) as info:
        load_recipe(path, ["envs.mix=[{glob: 'nowhere/*'}]"])
    assert str(info.value) == (
        "override \"envs.mix=[{glob: 'nowhere/*'}]\": envs.mix[0].glob: no registered env id matches 'nowhere/*'"
    )


def test_unknown_reward_names_are_located_with_a_suggestion(tmp_path):
    path = write(tmp_path / "r.yaml", """
        model: {preset: tiny}
        rewards:
          domains:
            terminal:
              - {name: correctness}
              - {name: state_chek, weight: 0.5}
    """)
    assert problems(path) == [
        ("r.yaml", 6, "rewards.domains.terminal[1].name", "unknown reward 'state_chek' (did you mean 'state_check'?)"),
    ]


def test_bools_and_floats_are_not_coerced_to_numbers(tmp_path):
    path = write(tmp_path / "r.yaml", """
        model: {preset: tiny, dim: 64.0}
        trainer:
          steps: true
          seed: 3.0
        learner:
          lr: true
          zero_stage: true
          betas: [false, 0.9]
        rollout:
          tiers: {low: 1.5}
    """)
    assert problems(path) == [
        ("r.yaml", 1, "model.dim", "expected int, got 64.0"),
        ("r.yaml", 3, "trainer.steps", "expected int, got True"),
        ("r.yaml", 4, "trainer.seed", "expected int, got 3.0"),
        ("r.yaml", 6, "learner.lr", "expected float, got True"),
        ("r.yaml", 7, "learner.zero_stage", "expected int, got True"),
        ("r.yaml", 8, "learner.betas[0]", "expected float, got False"),
        ("r.yaml", 10, "rollout.tiers.low", "expected int, got 1.5"),
    ]
    plain = write(tmp_path / "plain.yaml", "model: {preset: tiny}")
    assert problems(plain, ["trainer.steps=true"]) == [
        ("override 'trainer.steps=true'", None, "trainer.steps", "expected int, got True"),
    ]


def test_an_int_where_a_float_belongs_is_still_a_number(tmp_path):
    path = write(tmp_path / "r.yaml", """
        model: {preset: tiny}
        rollout: {temperature: 1}
        learner: {betas: [0, 0]}
        envs: {mix: [{glob: "reasoning/*", weight: 3}]}
    """)
    cfg = load_recipe(path)
    assert (cfg.rollout.temperature, cfg.learner.betas, cfg.envs.mix[0].weight) == (1.0, (0.0, 0.0), 3.0)


def test_a_bang_key_replaces_an_included_mapping_instead_of_merging(tmp_path):
    write(tmp_path / "base.yaml", """
        model: {preset: tiny}
        envs:
          mix:
            - {glob: "terminal/*:easy"}
            - {glob: "reasoning/*"}
          domain_shares: {terminal: 0.5, reasoning: 0.5}
        trainer: {steps: 5, seed: 7}
    """)
    merged = write(tmp_path / "merged.yaml", """
        include: base.yaml
        envs:
          domain_shares: {terminal: 1.0}
    """)
    # Merging keeps the included reasoning share, so the shares no longer sum to 1.
    assert problems(merged) == [("merged.yaml", 3, "envs.domain_shares", "shares must sum to 1, got 1.5")]
    replaced = write(tmp_path / "replaced.yaml", """
        include: base.yaml
        envs:
          domain_shares!: {terminal: 1.0}
        trainer!: {steps: 2}
    """)
    cfg = load_recipe(replaced)
    assert cfg.envs.domain_shares == {"terminal": 1.0}
    assert [m.glob for m in cfg.envs.mix] == ["terminal/*:easy", "reasoning/*"]
    # The replaced trainer mapping lost the included seed: it is back at its default.
    assert (cfg.trainer.steps, cfg.trainer.seed) == (2, 0)


def test_errors_under_a_replaced_key_point_at_the_replacing_file(tmp_path):
    write(tmp_path / "base.yaml", """
        model: {preset: tiny}
        rollout: {tiers: {low: 64, high: 128}}
    """)
    path = write(tmp_path / "r.yaml", """
        include: base.yaml
        rollout:
          tiers!:
            hihg: 256
        trainer!: {steps: 1}
        trainer: {seed: 1}
    """)
    assert problems(path) == [
        ("r.yaml", 4, "rollout.tiers.hihg", "unknown key 'hihg' (did you mean 'high'?)"),
        ("r.yaml", 6, "trainer", "duplicate key (first at line 5)"),
    ]
