"""The env audit on planted envs whose shortcut rates, overlap and determinism are known by construction."""
import json

import pytest

from jointrl.envs.audit import audit
from jointrl.rl.commands.cli import main
from tests.envs import planted_envs

SETUP = ("tests.envs.planted_envs:register",)


@pytest.fixture(scope="module")
def rows():
    planted_envs.register()
    try:
        yield {row.env_id: row for row in audit("test/*", seeds=10, setup=SETUP)}
    finally:
        planted_envs.unregister()


def test_a_constant_answer_is_found_and_scored_on_held_out_seeds(rows):
    row = rows["test/constant-v0:easy"]
    # Train seeds 0..9 and held-out 1e6..1e6+9: one multiple of 10 in each, so "1" is right 9 times in 10.
    assert (row.demo, row.constant, row.constant_answer, row.common) == (1.0, 0.9, "1", 0.9)
    assert row.no_tools == 1.0  # held-out seed i has train seed i's answer (same residue mod 10)
    assert row.multi == 0.0 and row.no_op == 0.0
    assert row.worst_shortcut() == ("no_tools", 1.0)


def test_held_out_tasks_that_repeat_train_tasks_show_as_overlap(rows):
    row = rows["test/memorised-v0:easy"]
    assert row.overlap == 1.0 and row.prompts == 0.3 and row.answers == 0.3
    # 1e6 = 1 (mod 3): held-out seed i is train seed i+1's task, so i's memorised answer is wrong...
    assert row.no_tools == 0.0
    # ...but the most frequent train answer (k = 1: seeds 0, 3, 6, 9) is right for held-out seeds with k = 1.
    assert row.common == pytest.approx(0.3)


def test_a_prompt_that_depends_on_the_hash_seed_is_not_deterministic(rows):
    assert rows["test/unstable-v0:easy"].deterministic is False
    assert rows["test/honest-v0:easy"].deterministic is True


def test_an_honest_env_leaves_every_shortcut_at_zero(rows):
    row = rows["test/honest-v0:easy"]
    assert row.demo == 1.0 and row.worst_shortcut()[1] == 0.0
    assert (row.prompts, row.answers, row.overlap) == (1.0, 1.0, 0.0)
    assert row.seconds >= 0 and not row.errors


def test_the_command_prints_the_table_and_writes_json(tmp_path, capsys):
    planted_envs.register()
    try:
        out = tmp_path / "audit.json"
        assert main(["envs", "audit", "test/constant*", "--seeds", "10", "--json", str(out), "--no-determinism"]) == 0
    finally:
        planted_envs.unregister()
    printed = capsys.readouterr().out
    assert "test/constant-v0:easy" in printed and "worst shortcut: test/constant-v0:easy no_tools 1.00" in printed
    (row,) = json.loads(out.read_text())
    assert row["constant"] == 0.9 and row["constant_answer"] == "1" and row["deterministic"] is None
    assert main(["envs", "audit", "nothing/*"]) == 1


def test_swe_overlap_is_measured_on_the_injected_bug_not_the_issue_text():
    from jointrl.envs.audit import play_demo
    from jointrl.envs.swe import task

    run = play_demo("swe/strings-v0:easy", 3)
    built = task.build("strings", "easy", 3)
    bug = built.bugs[0]
    assert bug.module in run.task_key and json.dumps(bug.fix_new)[1:-1] in run.task_key
    assert run.task_key != run.prompt and run.task_key == play_demo("swe/strings-v0:easy", 3).task_key
