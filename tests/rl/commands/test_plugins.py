"""Plugins through real entry points: tests/plugins/jointrl_test_plugin is pip-installed into a folder that only
the subprocesses here see, so the envs and rewards it declares are found by importlib.metadata as a user's
installed package would be (the README's env and reward, and a plugin whose registration raises)."""
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "plugins" / "jointrl_test_plugin"
BROKEN_LINE = (
    "env plugin 'broken' (jointrl_test_plugin.broken:register_envs) failed to register and is skipped: "
    "RuntimeError: cannot read broken.toml: no such file"
)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A folder holding the installed plugin (its dist-info with entry_points.txt), for PYTHONPATH."""
    # Built from a copy: an in-tree build would leave build/ and egg-info in the repository.
    source = tmp_path_factory.mktemp("src") / PACKAGE.name
    shutil.copytree(PACKAGE, source)
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(source)], check=True, capture_output=True, timeout=300)
    return target


def run(site: Path, *args: str, cwd: Path | None = None, script: str | None = None) -> subprocess.CompletedProcess:
    """`jointrl ARGS` (or a Python script) in a fresh process that sees the installed plugin."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-c", script] if script else [sys.executable, "-m", "jointrl.rl.commands.cli", *args]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def recipe(tmp_path: Path, reward_term: str) -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(textwrap.dedent(f"""\
        model: {{preset: tiny}}
        envs:
          mix: [{{glob: "toy/*"}}]
        rewards:
          domains:
            toy:
              - {{name: correctness}}
              - {reward_term}
    """))
    return path


def test_a_broken_plugin_is_one_line_and_the_other_envs_still_list(site):
    listed = run(site, "envs", "list", "*:easy")
    assert listed.returncode == 0, listed.stderr
    ids = [line.split("\t")[0] for line in listed.stdout.splitlines()]
    # The plugin's env and the built-in ones are there; the env the broken plugin registered before raising is not.
    assert "toy/word-length-v0:easy" in ids and "browse/lookup-v0:easy" in ids
    assert not [i for i in ids if i.startswith("broken/")]
    assert listed.stderr.splitlines() == [BROKEN_LINE]


def test_a_plugin_reward_is_listed_with_where_it_comes_from(site):
    listed = run(site, "rewards", "list")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in listed.stdout.splitlines()}
    assert rows["short_answer"] == [
        "max_chars=20", "plugin 'short_answer' (jointrl-test-plugin 0.1): jointrl_test_plugin.rewards",
        "1.0 when the final answer has at most max_chars characters.",
    ]
    assert rows["correctness"][1] == "jointrl.rewards.correctness"


def test_recipe_check_accepts_a_plugin_reward_and_checks_its_params(site, tmp_path):
    good = run(site, "recipe", "check", str(recipe(tmp_path, "{name: short_answer, weight: 0.1, params: {max_chars: 10}}")))
    assert good.returncode == 0, good.stderr
    assert "name: short_answer" in good.stdout and "max_chars: 10" in good.stdout

    bad = run(site, "recipe", "check", str(recipe(tmp_path, "{name: short_answr, params: {max_chars: ten}}")), cwd=tmp_path)
    assert bad.returncode == 1
    assert "toy.yaml:8: rewards.domains.toy[1].name: unknown reward 'short_answr' (did you mean 'short_answer'?)" in bad.stderr


def test_a_recipe_scores_episodes_with_the_plugin_reward(site, tmp_path):
    path = recipe(tmp_path, "{name: short_answer, weight: 0.1, params: {max_chars: 3}}")
    script = textwrap.dedent(f"""
        import doctest, json
        import jointrl_test_plugin.rewards
        from jointrl.envs import registry
        from jointrl.envs.episode import Episode
        from jointrl.rewards import RewardTable
        from jointrl.rl.recipe import load_recipe

        table = RewardTable.from_config(load_recipe({str(path)!r}).rewards)
        scores = []
        # The plugin env played by its demo (answer "6"), then a wrong, long answer.
        for answer in (None, "eleven"):
            env = registry.make("toy/word-length-v0:easy")
            env.reset(1)
            env.demo() if answer is None else env.answer(answer)
            episode = Episode(env.spec.id, "toy", "word-length", "easy", 1, "low", final_answer=env.final_answer,
                              signals=env.signals())
            scores.append(table.score(episode))
        print(json.dumps([doctest.testmod(jointrl_test_plugin.rewards).failed, scores]))
    """)
    done = run(site, script=script)
    assert done.returncode == 0, done.stderr
    failed, scores = json.loads(done.stdout.splitlines()[-1])
    assert failed == 0  # the README example in the reward's docstring holds
    assert scores == [{"correctness": 1.0, "short_answer": 1.0}, {"correctness": 0.0, "short_answer": 0.0}]


def test_envs_check_runs_the_contract_and_the_audit_on_a_plugin_env(site):
    contract = run(site, "envs", "check", "toy/word-length-v0:easy", "--no-audit")
    assert contract.returncode == 0, contract.stdout + contract.stderr
    assert contract.stdout.splitlines() == ["toy/word-length-v0:easy: the env contract on 3 seeds: ok"]
    # Three words: answering "6" to every task passes two seeds in three, which the audit refuses.
    audited = run(site, "envs", "check", "toy/word-length-v0:easy")
    assert audited.returncode == 1
    assert "FAIL toy/word-length-v0:easy: audit: constant 0.67 > 0.05" in audited.stdout.splitlines()
