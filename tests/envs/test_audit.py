"""The env audit on planted envs whose shortcut rates, overlap and determinism are known by construction."""
import json

import pytest

from jointrl.envs.audit import AuditRow, audit, violations
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
        # The constant env breaks the thresholds, so the command fails as a CI step would want.
        assert main(["envs", "audit", "test/constant*", "--seeds", "10", "--json", str(out), "--no-determinism"]) == 1
        assert main(["envs", "audit", "test/honest*", "--seeds", "4", "--no-determinism"]) == 0
    finally:
        planted_envs.unregister()
    printed = capsys.readouterr().out
    assert "test/constant-v0:easy" in printed and "worst shortcut: test/constant-v0:easy no_tools 1.00" in printed
    assert "FAIL test/constant-v0:easy: no_tools 1.00 > 0.05" in printed and "0 of 1 ids meet the thresholds" in printed
    assert "1 of 1 ids meet the thresholds" in printed  # the honest env
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


def test_the_thresholds_flag_each_planted_flaw_and_pass_the_honest_env(rows):
    assert violations(rows["test/honest-v0:easy"]) == []
    assert "constant 0.90 > 0.05" in violations(rows["test/constant-v0:easy"])
    assert "overlap 1.00 > 0.05" in violations(rows["test/memorised-v0:easy"])
    assert "not deterministic across PYTHONHASHSEEDs" in violations(rows["test/unstable-v0:easy"])


def _row(**values) -> AuditRow:
    base = dict(env_id="x", seeds=20, demo=1.0, no_op=0.0, no_tools=0.0, constant=0.0, constant_answer="",
                common=0.0, replay=0.0, multi=0.0, prompts=1.0, answers=1.0, overlap=0.0, seconds=0.1)
    return AuditRow(**{**base, **values})


def test_a_k_way_choice_may_reach_chance_plus_five_points_and_no_more():
    # Two choices: chance is 0.50, so 0.55 passes and 0.60 does not; without k even 0.10 fails.
    assert violations(_row(constant=0.55, choices=2)) == []
    assert violations(_row(constant=0.60, choices=2)) == ["constant 0.60 > 0.55"]
    assert violations(_row(constant=0.10)) == ["constant 0.10 > 0.05"]
    assert violations(_row(demo=0.95)) == ["demo 0.95 < 1.00"]
