"""Terminal domain: generators against hand-computed rules, the checker's parts, and scoring of real episodes."""
import dataclasses
import hashlib
import io
import json
import os
import random
import subprocess
import sys
import tarfile

import pytest

from jointrl.envs import registry
from jointrl.envs.terminal import FAMILIES, env as terminal_env
from jointrl.envs.terminal.families import GENERATORS
from jointrl.envs.terminal.families.archives import make_tar
from jointrl.envs.terminal.families.gitrepo import resolve_settings
from jointrl.envs.terminal.families.makefile import write_lines
from jointrl.envs.terminal.families.release import makefile as release_makefile, outputs as release_outputs
from jointrl.envs.terminal.families.rewrite import normalise_ini
from jointrl.envs.terminal.gitcheck import parse_batch, tree_names
from jointrl.envs.terminal.task import Answer, File, Git
from jointrl.envs.terminal.verify import Fact, normalise_answer, score, table_facts, tar_facts
from jointrl.envs.terminal.workspace import Workspace
from jointrl.model.tokenizer import train_tokenizer

IDS = registry.env_ids("terminal/*")
DIFFICULTIES = ("easy", "medium", "hard")


def call(name, arguments):
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def task_of(env_id: str, seed: int = 0):
    """The generated task of an id without starting a sandbox (same seeding as the env)."""
    spec = registry.spec(env_id)
    family = spec.kwargs["family"]
    return GENERATORS[family](spec.difficulty, random.Random(f"terminal/{family}/{spec.difficulty}/{seed}"))


@pytest.fixture
def play():
    """Reset an env and run bash commands in it; every env made here is closed afterwards."""
    made = []

    def run(env_id, commands=(), seed=0, answer=None):
        env = registry.make(env_id)
        made.append(env)
        env.reset(seed)
        for command in commands:
            result = env.step(call("bash", {"command": command}))
            assert result.error is None, result.content
        if answer is not None:
            env.answer(answer)
        return env

    yield run
    for env in made:
        env.close()


# Registration and generation.

def test_ten_families_at_three_difficulties_and_one_long_family():
    assert len(FAMILIES) == len(GENERATORS) == 11
    expected = [f"terminal/{f}-v0:{d}" for f in GENERATORS if f != "release" for d in DIFFICULTIES]
    assert IDS == sorted(expected + ["terminal/release-v0:long"])
    for env_id in IDS:
        spec = registry.spec(env_id)
        assert spec.default_tier == ("low" if spec.difficulty == "easy" else "high")
        assert spec.description.startswith("Shell: ")


def _canonical(value):
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return value.hex() if isinstance(value, bytes) else str(value)


def _digest(seeds) -> str:
    """A hash of everything generated for every id at these seeds (prompts, files, steps, setup, checks)."""
    parts = []
    for env_id in IDS:
        for seed in seeds:
            task = task_of(env_id, seed)
            checks = [[type(c).__name__, dataclasses.asdict(c)] for c in task.checks]
            parts.append(json.dumps([task.prompt, task.files, [s.command for s in task.steps], task.setup, checks],
                                    sort_keys=True, default=_canonical))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def test_tasks_are_the_same_in_another_process():
    # A different hash seed changes set and dict-of-set orders: generation must not depend on them.
    code = "from tests.envs.test_terminal import _digest; print(_digest([0, 1]))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.stdout.strip() == _digest([0, 1])


def test_seeds_give_different_tasks():
    for env_id in IDS:
        tasks = {json.dumps([task_of(env_id, s).prompt, task_of(env_id, s).files, task_of(env_id, s).setup], default=bytes.hex)
                 for s in range(3)}
        assert len(tasks) == 3, env_id


HELD_OUT = 1_000_000  # the audit's first held-out seed


def test_held_out_prompts_never_repeat_training_prompts():
    # A memorised task needs a held-out prompt seen in training; per-seed names and values make every prompt new.
    for env_id in IDS:
        train = {task_of(env_id, s).prompt for s in range(20)}
        held = [task_of(env_id, HELD_OUT + s).prompt for s in range(20)]
        assert [p for p in held if p in train] == [], env_id


@pytest.mark.parametrize("spec", ["text-count:easy", "text-count:medium", "text-count:hard", "log-report:easy"])
def test_answers_spread_so_no_remembered_answer_pays(spec):
    # The audit's no_tools and constant shortcuts: train seed i's answer on held-out seed i, and the commonest train answer.
    family, difficulty = spec.split(":")
    env_id = f"terminal/{family}-v0:{difficulty}"

    def answer(seed):
        return next(c.expected for c in task_of(env_id, seed).checks if isinstance(c, Answer))

    train, held = [answer(s) for s in range(60)], [answer(HELD_OUT + s) for s in range(60)]
    assert sum(a == b for a, b in zip(train, held)) <= 3
    commonest = max(set(train), key=lambda a: (train.count(a), a))
    assert held.count(commonest) <= 3


def test_ini_rules_by_hand():
    text = ("[server]\nhost = web.local\n# comment\n\n[database]\n  ; note\nhost=db.local\nport  =   5432\n"
            "options = a=1,b=2\n   \n[cache]\nhost = c.local\n")
    assert normalise_ini(text, "db-new.internal") == (
        "[server]\nhost=web.local\n[database]\nhost=db-new.internal\nport=5432\noptions=a=1,b=2\n[cache]\nhost=c.local\n")


def test_conflict_rule_by_hand():
    base = {"timeout": "10", "retries": "3", "depth": "5", "width": "7"}
    main = {"timeout": "20", "retries": "4", "depth": "5", "width": "8"}
    feature = {"timeout": "30", "retries": "9", "depth": "6", "width": "7"}
    assert resolve_settings(base, main, feature, "timeout") == {"timeout": "20", "retries": "9", "depth": "6", "width": "8"}


def test_makefile_writer_keeps_recipe_tabs(tmp_path):
    lines = ["all: out", "", "out:", "\tprintf '%s\\n' \"a b\" > $@"]
    subprocess.run(["bash", "-c", write_lines("Makefile", lines)], cwd=tmp_path, check=True)
    assert (tmp_path / "Makefile").read_text() == "\n".join(lines) + "\n"


# The checker's parts.

def test_answer_normalisation():
    assert normalise_answer("  `Garden   17`. ") == "garden 17"
    assert normalise_answer('"42"') == "42"
    assert normalise_answer(None) == normalise_answer("") == ""
    assert normalise_answer("42 lines") != "42"


def test_table_rows_compare_numbers_within_tolerance():
    check = File("r.csv", "region,revenue\neast,1200.00\nwest,3.10\n", match="table")
    assert all(f.ok for f in table_facts(check, b"region,revenue\r\neast,1200\nwest,3.1\n\n"))
    facts = table_facts(check, b"region,revenue\neast,1200.01\nwest,3.10\nnorth,1.00\n")
    assert [f.ok for f in facts] == [True, False, True, False]
    assert not any(f.ok for f in table_facts(check, None))


def test_tar_facts_nested_and_extra_members():
    inner = make_tar({"lib/a.py": b"A\n", "lib/b.py": b"B\n"}, compress=False)
    outer = make_tar({"app/x.txt": b"x\n", "app/libs.tar": inner}, compress=True)
    expected = {"app/x.txt": b"x\n", "app/libs.tar": {"lib/a.py": b"A\n", "lib/b.py": b"B\n"}}
    assert all(f.ok for f in tar_facts("t.tgz", outer, expected, keep=False))
    expected["app/libs.tar"] = {"lib/a.py": b"A\n"}
    assert [f.label for f in tar_facts("t.tgz", outer, expected, keep=False) if not f.ok] == ["t.tgz:app/libs.tar holds nothing else (found ['lib/b.py'])"]
    assert not any(f.ok for f in tar_facts("t.tgz", b"not a tar", {"a": b""}, keep=False))


def test_tar_members_ignore_directories_and_dot_prefix():
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        folder = tarfile.TarInfo("./d")
        folder.type = tarfile.DIRTYPE
        archive.addfile(folder)
        info = tarfile.TarInfo("./d/f.txt")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"hi"))
    assert all(f.ok for f in tar_facts("t.tar", buffer.getvalue(), {"d/f.txt": b"hi"}, keep=False))


def test_git_batch_parsing_by_hand():
    oid = "ab" * 20
    tree = b"100644 README.md\0" + bytes(20) + b"40000 src\0" + bytes(range(20))
    data = (f"{oid} blob 6\n".encode() + b"hello\n\n" + b"refs/heads/gone missing\n"
            + f"{oid} tree {len(tree)}\n".encode() + tree + b"\n")
    parsed = parse_batch(data, 4)
    assert parsed[0] == (oid, "blob", b"hello\n") and parsed[1] == "missing" and parsed[3] is None
    assert tree_names(parsed[2][2], 20) == ("README.md", "src")


def test_score_gates_goals_by_kept_facts():
    assert score([]) == (0.0, 0.0)
    assert score([Fact("g", True), Fact("g", False), Fact("k", True, keep=True)]) == (0.0, 0.5)
    assert score([Fact("g", True), Fact("k", True, keep=True), Fact("k", False, keep=True)]) == (0.0, 0.5)
    assert score([Fact("g", True), Fact("k", True, keep=True)]) == (1.0, 1.0)
    assert score([Fact("k", True, keep=True)]) == (0.0, 0.0)


def test_workspace_reader_never_follows_links(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    root = tmp_path / "ws"
    (root / "top" / "d").mkdir(parents=True)
    (root / "top" / "d" / "f").write_text("f")
    (root / "top" / "link").symlink_to(outside / "secret")
    (root / "top" / "dirlink").symlink_to(outside)
    view = Workspace(root)
    assert view.read("top/d/f") == b"f"
    assert view.read("top/link") is None and view.read("top/dirlink/secret") is None
    assert view.read("../outside/secret") is None
    assert view.walk("top") == ({"top/d/f", "top/link", "top/dirlink"}, {"top/d"})
    assert view.walk("top/dirlink") is None and view.lstat("top/dirlink/secret") is None


# Real episodes in the sandbox.

def test_tools_the_tasks_use_are_installed(play):
    env = play("terminal/git-v0:easy")
    tools = "bash git sqlite3 make tar gzip zcat awk sed grep find sort uniq base64 sha256sum xargs cut tr"
    result = env.step(call("bash", {"command": f"for t in {tools}; do command -v $t >/dev/null || echo missing $t; done"}))
    assert "missing" not in result.content, result.content


@pytest.mark.parametrize("env_id", IDS)
def test_start_state_holds_every_guard_and_no_goal(play, env_id):
    facts = play(env_id).facts()
    assert [f.label for f in facts if f.ok != f.keep] == []
    assert score(facts)[1] == 0.0


def test_setup_replayed_from_the_cache_is_the_same_repository(play):
    first = play("terminal/git-v0:hard", seed=7)
    second = play("terminal/git-v0:hard", seed=7)
    assert second.recorded == first.recorded and set(second.recorded) == {"main", "feature"}
    second.demo()
    assert second.signals()["success"] == 1.0


@pytest.mark.parametrize("env_id", ["terminal/text-count-v0:easy", "terminal/text-rewrite-v0:easy",
                                    "terminal/archive-v0:easy"])
def test_demo_commands_write_the_questions_path_as_the_same_tokens(env_id):
    """Every demo command holds the question's first path as the very token ids the question has.

    A bare path after a space starts with a space-prefixed token (`` pepper`` where the question has ``pepper``),
    so the command was no copy a small policy could make (docs/learning.md).
    """
    tasks = [task_of(env_id, seed) for seed in range(40)]
    tokenizer = train_tokenizer([t.prompt + "\n" + "\n".join(s.command for s in t.steps) for t in tasks], 1024)
    for task in tasks[:20]:
        path = task.prompt.split("`")[1]
        question = tokenizer.encode(task.prompt)
        spans = [question[i:j] for i in range(len(question)) for j in range(i + 1, len(question) + 1)
                 if tokenizer.decode(question[i:j]) == path]
        assert spans, f"{path} is no whole tokens of the question"
        for step in task.steps:
            command = tokenizer.encode(step.command)
            assert any(command[i:i + len(spans[0])] == spans[0] for i in range(len(command))), step.command


def test_wrong_answer_scores_zero(play):
    env = play("terminal/text-count-v0:easy")
    (expected,) = [c.expected for c in env.task.checks if isinstance(c, Answer)]
    env.answer(str(int(expected) + 1))
    assert env.signals()["success"] == 0.0 and env.signals()["state_ok"] == 0.0
    env.answer(f"`{expected}`.")
    assert env.signals()["success"] == 1.0


def test_an_answer_is_scored_without_copying_the_workspace_and_files_with_a_copy(play, monkeypatch):
    import jointrl.envs.sandbox as sandbox

    copies = []
    plain = sandbox.fresh_sandbox_from
    monkeypatch.setattr(sandbox, "fresh_sandbox_from", lambda src: copies.append(src) or plain(src))
    env = play("terminal/text-count-v0:easy", ["chmod 000 ."])  # a workspace no copy could read
    (expected,) = [c.expected for c in env.task.checks if isinstance(c, Answer)]
    env.answer(expected)
    assert env.signals()["success"] == 1.0 and copies == []
    move = task_of("terminal/organize-files-v0:easy").steps[1].command
    assert play("terminal/organize-files-v0:easy", [move]).signals()["state_ok"] > 0 and len(copies) == 1


def test_partial_organisation_gets_partial_credit(play):
    # The demo's move, stopped after its first group.
    move = task_of("terminal/organize-files-v0:easy").steps[1].command
    env = play("terminal/organize-files-v0:easy", [move.rsplit(" && mv ", 1)[0]])
    signals = env.signals()
    assert signals["success"] == 0.0 and 0.0 < signals["state_ok"] < 1.0 and signals["commands_run"] == 1.0


def _make_layout(env_id: str) -> tuple[str, list[str]]:
    """The project folder of a makefile task and its output paths inside it, from the task's goal checks."""
    task = task_of(env_id)
    project = next(p for p in task.files if p.endswith("/Makefile")).rsplit("/", 1)[0]
    outputs = list(dict.fromkeys(c.path[len(project) + 1:] for c in task.checks if isinstance(c, File) and not c.keep))
    return project, outputs


def test_make_outputs_written_by_hand_fail(play):
    project, (joined, count) = _make_layout("terminal/makefile-v0:easy")
    env = play("terminal/makefile-v0:easy", [f"cd {project} && mkdir -p $(dirname {joined}) && "
                                              f"cat $(ls src/*.txt | sort) > {joined} && wc -l < {joined} > {count}"])
    assert env.signals()["success"] == 0.0 and env.signals()["state_ok"] == 0.0


def test_hard_coded_makefile_fails_the_rebuild(play):
    # Recipes that print today's outputs pass the clean build but not the one after the sources change.
    project, (joined, count) = _make_layout("terminal/makefile-v0:easy")
    script = (f"cd {project} && all=$(cat $(ls src/*.txt | sort) | base64 -w0); n=$(cat src/*.txt | wc -l); "
              f"printf 'all:\\n\\tmkdir -p {joined.split('/')[0]}\\n\\techo %s | base64 -d > {joined}\\n\\techo %s > {count}\\n' "
              "\"$all\" \"$n\" > Makefile && make")
    env = play("terminal/makefile-v0:easy", [script])
    signals = env.signals()
    assert signals["success"] == 0.0 and 0.0 < signals["state_ok"] < 1.0
    assert [f.ok for f in env.facts() if not f.keep] == [True, True, False, False]


def test_wrong_prerequisite_is_caught_by_the_rebuild(play):
    # The count built from the word list but depending on one source: right after a clean build, stale after an edit.
    project, (words, count, upper) = _make_layout("terminal/makefile-v0:medium")
    lines = ["SOURCES := $(wildcard src/*.txt)", f"all: {words} {count} {upper}",
             f"{words}: $(SOURCES)", f"\tmkdir -p $(dir {words})", "\tLC_ALL=C sort -u $(SOURCES) > $@",
             f"{count}: FIRST", f"\twc -l < {words} > $@",
             f"{upper}: {words}", "\ttr a-z A-Z < $< > $@"]
    env = play("terminal/makefile-v0:medium")
    first = sorted(p for p in env.task.files if p.startswith(f"{project}/src/"))[0][len(project) + 1:]
    makefile = write_lines("Makefile", [line.replace("FIRST", first) for line in lines])
    env.step(call("bash", {"command": f"cd {project} && {makefile} && make"}))
    goals = [(f.label, f.ok) for f in env.facts() if not f.keep]
    assert [ok for _, ok in goals] == [True, True, True, True, False, True]
    assert goals[4][0] == f"{project}/{count} has the expected content"


def test_mode_on_a_symlink_does_not_count(play):
    env = play("terminal/permissions-v0:easy")
    target = next(c for c in env.task.checks if not c.keep)
    env.step(call("bash", {"command": f"cp {target.path} /tmp/real && chmod {target.mode:o} /tmp/real && "
                                      f"mv {target.path} {target.path}.orig && ln -s /tmp/real {target.path}"}))
    assert not next(f for f in env.facts() if f.label == f"{target.path} has mode {target.mode:o}").ok


def _db(env_id: str) -> str:
    return next(p for p in task_of(env_id).files if p.endswith(".db"))


def test_output_linked_to_a_host_file_is_not_read(play):
    out = next(c.path for c in task_of("terminal/sqlite-v0:easy").checks if isinstance(c, File))
    env = play("terminal/sqlite-v0:easy", [f"mkdir -p $(dirname {out}) && ln -s /etc/hostname {out}"])
    assert env.signals()["success"] == 0.0
    assert os.path.isfile("/etc/hostname") and not os.path.islink("/etc/hostname")


def test_updating_too_many_rows_fails(play):
    db = _db("terminal/sqlite-v0:medium")
    env = play("terminal/sqlite-v0:medium", [f"sqlite3 {db} \"UPDATE products SET stock = stock + 1; "
                                             "DELETE FROM orders WHERE status = 'cancelled'\""])
    labels = [f.label for f in env.facts() if not f.ok]
    assert labels == [f"{db}: SELECT * FROM products ORDER BY id gives the expected rows"]


def test_database_left_in_wal_mode_is_read(play):
    db = _db("terminal/sqlite-v0:medium")
    env = play("terminal/sqlite-v0:medium", [
        f"sqlite3 {db} 'PRAGMA journal_mode=WAL;' && " + next(s.command for s in task_of("terminal/sqlite-v0:medium").steps
                                                          if s.command.startswith(f"sqlite3 {db} \"UPDATE"))])
    assert env.signals()["success"] == 1.0


def test_git_tag_on_the_wrong_commit_fails_only_that_fact(play):
    env = play("terminal/git-v0:medium")
    git = [c for c in env.task.checks if isinstance(c, Git)]
    tag_check = next(c for c in git if c.expr.startswith("refs/tags/"))
    tag = tag_check.expr[len("refs/tags/"):-len("^{commit}")]
    old = next(c for c in git if c.missing).expr[len("refs/heads/"):]
    feature = next(c for c in git if c.keep and c.recorded == "feature").expr[len("refs/heads/"):]
    env.step(call("bash", {"command": f"cd repo && git merge -q --no-ff -m merge {feature} && git tag {tag} HEAD^1 && "
                                      f"git branch -D {old}"}))
    assert [f.label for f in env.facts() if not f.ok] == [f"git {tag_check.expr} as expected"]


def test_git_commit_touching_other_files_fails(play):
    env = play("terminal/git-v0:easy")
    commands = [s.command for s in env.task.steps]
    commands[1] = commands[1].replace(" && git commit", " && echo extra >> README.md && git add README.md && git commit")
    for command in commands:
        env.step(call("bash", {"command": command}))
    branch = next(c.expr for c in env.task.checks if isinstance(c, Git) and c.subject)
    assert [f.label for f in env.facts() if not f.ok] == [f"git {branch}:README.md as expected"]
    assert env.signals()["success"] == 0.0


def test_bash_output_is_bounded(play):
    env = play("terminal/text-count-v0:easy")
    result = env.step(call("bash", {"command": "head -c 200000 /dev/zero | tr '\\0' a"}))
    assert len(result.content) < terminal_env.OBSERVATION_CHARS + 200 and "characters cut" in result.content


def test_timeout_restarts_the_shell_with_its_identity(play, monkeypatch):
    monkeypatch.setattr(terminal_env, "COMMAND_SECONDS", 1.0)
    env = play("terminal/git-v0:easy")
    result = env.step(call("bash", {"command": "sleep 5"}))
    assert "timed out" in result.content
    assert env.step(call("bash", {"command": "echo $GIT_AUTHOR_NAME"})).content.startswith("Terminal User")


def test_bash_before_reset_is_an_error_observation():
    env = registry.make("terminal/text-count-v0:easy")
    result = env.step(call("bash", {"command": "ls"}))
    assert result.error is not None and "reset" in result.content


@pytest.mark.parametrize("env_id", IDS)
def test_replaying_a_training_trajectory_fails_on_a_held_out_seed(play, env_id):
    # The audit's replay shortcut: train seed 0's scripted commands and answer, played on held-out seed 0.
    train = play(env_id, seed=0)
    transcript = train.demo()
    assert train.signals()["success"] == 1.0
    commands = [json.loads(c["function"]["arguments"])["command"] for m in transcript for c in m.get("tool_calls") or []]
    held = play(env_id, seed=HELD_OUT)
    for command in commands:
        held.step(call("bash", {"command": command}))
    held.answer(train.final_answer)
    assert held.signals()["success"] == 0.0


# The long-horizon release task.

def test_release_outputs_by_hand():
    tables = {"beta": [(1, "x", 2, 10), (2, "y", 3, 5)], "alpha": [(3, "z", 1, 7)]}
    totals, summary, total = release_outputs(tables)
    assert totals == "file,rows,total\nalpha,1,7\nbeta,2,35\n"
    assert summary == "files 2\nrows 3\ntotal 42\n" and total == 42


def test_release_makefile_once_repaired_builds_what_the_checker_expects(tmp_path):
    # The generator's expected outputs against the project's own Makefile, repaired by hand, run by real make.
    tables = {"b-side": [(11, "x", 4, 250), (12, "y", 60, 3)], "a": [(13, "z", 7, 9)], "ab": [(14, "w", 1, 1)]}
    for bug in ("spaces", "typo"):
        text = release_makefile("gen", bug, "    ")
        repaired = text.replace("\n    awk", "\n\tawk").replace("$(OUT)/total.csv", "$(OUT)/totals.csv")
        assert repaired != text and repaired == release_makefile("gen", None)
    (tmp_path / "data").mkdir()
    for name, rows in tables.items():
        (tmp_path / "data" / f"{name}.csv").write_text("id,item,qty,price\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    (tmp_path / "Makefile").write_text(release_makefile("gen", None))
    subprocess.run(["make", "-s"], cwd=tmp_path, check=True, capture_output=True)
    totals, summary, _ = release_outputs(tables)
    assert (tmp_path / "gen" / "totals.csv").read_text() == totals == "file,rows,total\na,1,63\nab,1,1\nb-side,2,1180\n"
    assert (tmp_path / "gen" / "summary.txt").read_text() == summary
    for bug in ("spaces", "typo"):
        (tmp_path / "Makefile").write_text(release_makefile("gen", bug, "    "))
        assert subprocess.run(["make", "-s"], cwd=tmp_path, capture_output=True).returncode != 0


def _stage_ends(commands: list[str]) -> list[int]:
    """How many of the release demo's commands end each stage: unpack, Makefile fix, data fix, build, package."""
    stages = [lambda c: "--strip-components" in c, lambda c: c.startswith("sed -i 's"),
              lambda c: c.startswith("sed -i '") and " data/" in c, lambda c: c.startswith("make && "),
              lambda c: "tar -czf" in c]
    return [next(i for i, c in enumerate(commands) if stage(c)) + 1 for stage in stages]


def test_release_needs_every_stage(play):
    # Scoring stops an episode's processes, so each stopping point is its own episode.
    commands = [s.command for s in task_of("terminal/release-v0:long", 5).steps]
    ends = _stage_ends(commands)
    assert len(commands) >= 10 and ends == sorted(ends) and ends[-1] < len(commands)
    for end in ends:
        env = play("terminal/release-v0:long", commands[:end], seed=5, answer="Done.")
        assert env.signals()["success"] == 0.0, commands[end - 1]
    env = play("terminal/release-v0:long", commands, seed=5, answer="Done.")
    assert env.signals()["success"] == 1.0 and env.signals()["commands_run"] == len(commands) >= 10


def test_release_with_another_releases_correction_fails(play):
    # The build passes with any numeric qty: only the correction listed for this release is right.
    env = play("terminal/release-v0:long", seed=2)
    commands = [s.command for s in env.task.steps]
    fix = next(i for i, c in enumerate(commands) if c.startswith("sed -i '") and "data/" in c)
    row = commands[fix].split("s/.*/", 1)[1].split("/", 1)[0]
    bad_id, item, qty, price = row.split(",")
    commands[fix] = commands[fix].replace(f"/{row}/", f"/{bad_id},{item},{int(qty) % 60 + 1},{price}/")
    for command in commands:
        env.step(call("bash", {"command": command}))
    failed = [f.label for f in env.facts() if not f.ok]
    assert env.signals()["success"] == 0.0 and any("data/" in label for label in failed)


def test_release_demo_is_long_for_every_seed():
    for seed in range(10):
        task = task_of("terminal/release-v0:long", seed)
        assert len(task.steps) >= 10 and registry.spec("terminal/release-v0:long").max_turns >= 2 * len(task.steps)
