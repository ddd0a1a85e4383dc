"""`jointrl recipe list` and `jointrl recipe explain` against the shipped recipes and the schema itself."""
from jointrl.rl.commands.cli import main
from jointrl.rl.config.run import RunConfig
from jointrl.rl.config.training import LearnerConfig, TrainerConfig
from jointrl.rl.recipe import shipped_recipes_dir


def test_recipe_list_names_every_shipped_recipe_with_its_first_comment_line(capsys):
    assert main(["recipe", "list"]) == 0
    rows = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    shipped = sorted(p.stem for p in shipped_recipes_dir().glob("*.yaml"))
    assert sorted(rows) == shipped and "quickstart" in rows
    first = (shipped_recipes_dir() / "quickstart.yaml").read_text().splitlines()[0]
    assert rows["quickstart"] == first.removeprefix("# ")


def test_recipe_explain_gives_type_default_and_description(capsys):
    assert main(["recipe", "explain", "trainer.steps"]) == 0
    field = TrainerConfig.model_fields["steps"]
    assert capsys.readouterr().out.splitlines() == [
        "trainer.steps", "  type: int (>= 0)", f"  default: {field.default}", f"  {field.description}",
    ]
    # A list position reads as the list's item; a section lists its keys.
    assert main(["recipe", "explain", "learner.betas"]) == 0
    assert capsys.readouterr().out.splitlines()[1:3] == ["  type: tuple[float, float]", "  default: (0.9, 0.95)"]
    assert main(["recipe", "explain", "envs.mix[1].weight"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "  type: float (> 0)"
    assert main(["recipe", "explain", "learner"]) == 0
    out = capsys.readouterr().out.splitlines()
    description = RunConfig.model_fields["learner"].description
    assert out[2:5] == ["  default: a section (its keys below)", f"  {description}", "  keys:"]
    assert [line.split()[0] for line in out[5:]] == list(LearnerConfig.model_fields)


def test_recipe_explain_of_an_unknown_key_is_one_line_with_a_suggestion(capsys):
    assert main(["recipe", "explain", "trainer.stepz"]) == 1
    assert capsys.readouterr().err == "jointrl: error: trainer has no key 'stepz' (did you mean 'steps'?)\n"
    assert main(["recipe", "explain", "trainer.steps.x"]) == 1
    assert capsys.readouterr().err == "jointrl: error: trainer.steps has type int: there is no key 'x' below it\n"
