"""The `jointrl` command line: recipe check, exit codes, one-line errors, --debug, and command registration."""
import argparse
import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from jointrl.rl.commands import cli
from jointrl.rl.commands import train as train_command
from jointrl.rl.recipe import RecipeError

MISSPELLED = textwrap.dedent("""
    model:
      preset: tiny
    trainr:
      steps: 3
""").lstrip("\n")
EXPECTED_LINE = "bad.yaml:3: trainr: unknown key 'trainr' (did you mean 'trainer'?)"


@pytest.fixture
def bad_recipe(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text(MISSPELLED)
    return "bad.yaml"


def test_misspelled_key_in_process(bad_recipe, capsys):
    assert cli.main(["recipe", "check", bad_recipe]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert EXPECTED_LINE in err.splitlines()[1]
    assert "Traceback" not in err


def test_misspelled_key_through_the_installed_script(bad_recipe, tmp_path):
    script = Path(sys.executable).parent / "jointrl"
    command = [str(script), "recipe", "check", bad_recipe]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stdout == ""
    assert EXPECTED_LINE in done.stderr
    assert "Traceback" not in done.stderr


def test_wrong_type_names_the_type(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.yaml").write_text("model: {preset: tiny}\ntrainer:\n  steps: ten\n")
    assert cli.main(["recipe", "check", "r.yaml"]) == 1
    assert "r.yaml:3: trainer.steps: expected int, got 'ten'" in capsys.readouterr().err


def test_valid_recipe_prints_the_resolved_tree(capsys):
    assert cli.main(["recipe", "check", "quickstart", "trainer.steps=3", "model.dim=256"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    tree = yaml.safe_load(out)
    assert tree["model"]["name"] == "mini"
    assert tree["model"]["dim"] == 256
    assert tree["model"]["n_experts"] == 8  # from the mini preset, not written in the recipe
    assert tree["trainer"]["steps"] == 3
    assert tree["algorithm"]["name"] == "grpo"
    assert "\x1b[" not in out  # not a terminal: plain text


def test_recipe_check_highlights_on_a_terminal(capsys, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert cli.main(["recipe", "check", "quickstart"]) == 0
    out = terminal.getvalue()
    assert "\x1b[" in out
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert yaml.safe_load(plain)["model"]["dim"] == 64


def test_help_lists_the_commands(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\s+recipe\s+validate", out, re.M)
    assert cli.main(["recipe", "--help"]) == 0
    assert re.search(r"^\s+check\s+print", capsys.readouterr().out, re.M)


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert re.fullmatch(r"jointrl \d+\.\d+\.\d+\S*\n", capsys.readouterr().out)


def test_usage_errors_exit_2(capsys):
    assert cli.main([]) == 2
    assert "usage: jointrl" in capsys.readouterr().err
    assert cli.main(["recipe"]) == 2
    assert "usage: jointrl recipe" in capsys.readouterr().err
    assert cli.main(["no-such-command"]) == 2
    assert cli.main(["recipe", "check"]) == 2  # FILE is required


def test_debug_reraises(bad_recipe, capsys):
    with pytest.raises(RecipeError):
        cli.main(["--debug", "recipe", "check", bad_recipe])
    with pytest.raises(RecipeError):
        cli.main(["recipe", "check", bad_recipe, "--debug"])


def _raise_key_error(args: argparse.Namespace) -> int:
    raise KeyError("no env matches 'cad/*:hard'")


def _add_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")


def _echo(args: argparse.Namespace) -> int:
    print(f"hello {args.name}")
    return 3


def test_one_entry_adds_a_command(monkeypatch, capsys):
    extra = [
        cli.Command(("demo", "echo"), "say hello", _add_name, _echo),
        cli.Command(("demo", "boom"), "fail politely", lambda p: None, f"{__name__}:_raise_key_error"),
        cli.Command(("solo",), "a top-level command", _add_name, _echo),
    ]
    monkeypatch.setattr(cli, "COMMANDS", cli.COMMANDS + extra)
    assert cli.main(["demo", "echo", "world"]) == 3
    assert capsys.readouterr().out == "hello world\n"
    assert cli.main(["solo", "x"]) == 3
    capsys.readouterr()

    assert cli.main(["demo", "boom"]) == 1
    err = capsys.readouterr().err
    assert err == "jointrl: error: no env matches 'cad/*:hard'\n"
    with pytest.raises(KeyError):
        cli.main(["--debug", "demo", "boom"])

    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\s+demo\b", out, re.M) and re.search(r"^\s+solo\s+a top-level command", out, re.M)


@pytest.mark.parametrize("error", [ValueError("bad tier 'huge'"), FileNotFoundError("no checkpoint in runs/x")])
def test_user_errors_are_one_line(monkeypatch, capsys, error):
    def fail(args):
        raise error

    monkeypatch.setattr(cli, "COMMANDS", [cli.Command(("fail",), "fail", lambda p: None, fail)])
    assert cli.main(["fail"]) == 1
    assert capsys.readouterr().err == f"jointrl: error: {error}\n"


@pytest.mark.parametrize("argv", [
    ["train", "quickstart", "--init", "ckpt", "trainer.steps=2", "learner.lr=1e-5"],
    ["train", "--init", "ckpt", "quickstart", "trainer.steps=2", "learner.lr=1e-5"],
    ["train", "quickstart", "trainer.steps=2", "--init", "ckpt", "learner.lr=1e-5"],
    ["train", "quickstart", "trainer.steps=2", "learner.lr=1e-5", "--init", "ckpt"],
])
def test_options_and_overrides_come_in_any_order(argv):
    args = cli.build_parser().parse_args(argv)
    assert (args.recipe, args.init, args.overrides) == ("quickstart", "ckpt", ["trainer.steps=2", "learner.lr=1e-5"])


def test_interleaved_arguments_reach_the_command_and_unknown_options_still_fail(monkeypatch, capsys):
    seen = {}

    def _record(args):
        seen.update(vars(args))
        return 0

    monkeypatch.setattr(cli, "COMMANDS", [cli.Command(("train",), "train", train_command.add_arguments, _record)])
    assert cli.main(["train", "r.yaml", "--resume", "a.b=1", "--init", "x", "c.d=2"]) == 0
    assert (seen["recipe"], seen["resume"], seen["init"], seen["overrides"]) == ("r.yaml", True, "x", ["a.b=1", "c.d=2"])
    assert cli.main(["train", "r.yaml", "--no-such-flag", "a.b=1"]) == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err
