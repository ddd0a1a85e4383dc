"""Real-code swe families: the pinned cache (fetch, verify, unpack, clear errors), the mined bugs checked
against real pytest runs, the held-out file split, grading that a forged or hard-coded fix cannot pass, and
the audit thresholds on real-code ids."""
import argparse
import io
import json
import os
import random
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from jointrl.envs import registry
from jointrl.envs.audit import HELD_OUT_START, audit_env, violations
from jointrl.envs.swe.realcode import cases, manifest, mine, prepare, task
from jointrl.envs.swe.realcode.grade import passing
from jointrl.envs.swe.realcode.sources import SOURCES, Source, source

PACKAGES = manifest.load()
FAMILIES = sorted(PACKAGES)
LONG = [pin.family for pin in SOURCES if pin.long]
TINY = Source("tiny", "1.0", "", "tiny", "src/tiny", "tests", "a tiny package")


def call(env, name, **arguments):
    return env.step({"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}})


TINY_FILES = {"tiny-1.0/src/tiny/__init__.py": "def double(x):\n    return 2 * x\n",
              "tiny-1.0/tests/test_tiny.py": "from tiny import double\n\ndef test_double():\n    assert double(2) == 4\n"}


def _sdist(path: Path, files: dict[str, str]) -> Path:
    """An sdist holding `files` (archive path -> text), written by hand."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _fake_download(archive: Path):
    def download(pin, dest):
        target = Path(dest) / archive.name
        target.write_bytes(archive.read_bytes())
        return target
    return download


# The cache.

def test_a_missing_cache_names_the_command_that_fills_it(tmp_path, monkeypatch):
    monkeypatch.setenv("JOINTRL_CACHE", str(tmp_path))
    with pytest.raises(prepare.MissingCache, match="run `jointrl envs prepare swe` first"):
        prepare.workspace_files(SOURCES[0])
    task.pristine_files.cache_clear()
    task.build.cache_clear()
    env = registry.make(f"swe/{FAMILIES[0]}-v0:easy")
    try:
        with pytest.raises(prepare.MissingCache, match="jointrl envs prepare swe"):
            env.reset(0)
    finally:
        env.close()
        task.pristine_files.cache_clear()
        task.build.cache_clear()


def test_prepare_unpacks_a_verified_sdist_and_rejects_a_tampered_one(tmp_path, monkeypatch):
    archive = _sdist(tmp_path / "tiny-1.0.tar.gz", TINY_FILES)
    pin = Source(**{**TINY.__dict__, "sha256": prepare.sha256_of(archive)})
    monkeypatch.setattr(prepare, "download", _fake_download(archive))
    root = tmp_path / "cache"
    prepare.prepare_one(pin, root)
    assert prepare.workspace_files(pin, root) == {
        "tiny/__init__.py": "def double(x):\n    return 2 * x\n",
        "tests/test_tiny.py": "from tiny import double\n\ndef test_double():\n    assert double(2) == 4\n"}
    assert (root / "sdists" / "tiny-1.0.tar.gz").is_file()

    wrong = Source(**{**TINY.__dict__, "version": "1.0", "sha256": "0" * 64})
    with pytest.raises(ValueError, match="sha256 mismatch for tiny==1.0"):
        prepare.prepare_one(wrong, tmp_path / "other")
    with pytest.raises(prepare.MissingCache):
        prepare.tree(wrong, tmp_path / "other")


def test_the_pins_are_at_least_eight_packages_with_sha256s():
    assert len(SOURCES) >= 8 and len({p.family for p in SOURCES}) == len(SOURCES)
    assert all(len(p.sha256) == 64 and int(p.sha256, 16) >= 0 for p in SOURCES)
    assert sorted(p.family for p in SOURCES) == FAMILIES


# Mining a hand-written package end to end.

DUO = {"duo-1.0/src/duo/__init__.py": "",
       "duo-1.0/src/duo/arith.py": "def double(x):\n    return 2 * x\n\n\ndef inc(x):\n    return x + 1\n",
       "duo-1.0/src/duo/text.py": "def shout(s):\n    if not s:\n        return ''\n    return s.upper() + '!'\n",
       "duo-1.0/tests/test_duo.py": ("from duo.arith import double, inc\nfrom duo.text import shout\n\n\n"
                                   "def test_double():\n    assert double(2) == 4\n    assert double(5) == 10\n\n\n"
                                   "def test_inc():\n    for x in (3, 7, -1, 10):\n        assert inc(x) == x + 1\n\n\n"
                                   "def test_shout():\n    assert shout('hi') == 'HI!'\n    assert shout('') == ''\n"
                                   "    assert shout('ok go') == 'OK GO!'\n")}
# What each function must give, written down by hand: a kept bug breaks at least one of these.
DUO_EXPECTED = {"double": [((2,), 4), ((5,), 10), ((-3,), -6)], "inc": [((3,), 4), ((-1,), 0), ((0,), 1)],
                "shout": [(("hi",), "HI!"), (("",), ""), (("ab",), "AB!")]}


def test_mining_a_small_package_keeps_only_bugs_that_break_it_and_re_mining_keeps_other_packages(tmp_path, monkeypatch):
    archive = _sdist(tmp_path / "duo-1.0.tar.gz", DUO)
    pin = Source("duo", "1.0", prepare.sha256_of(archive), "duo", "src/duo", "tests", "a small package")
    monkeypatch.setattr(prepare, "download", _fake_download(archive))
    root = tmp_path / "cache"
    prepare.prepare_one(pin, root)
    path = tmp_path / "bugs.json"
    other = {"version": "1", "cases": [], "bugs": []}
    manifest.write({"packages": {"boltons": other, "no-longer-pinned": other}}, path)
    try:
        packages = manifest.mine_all((pin,), path=path, root=root)["packages"]
    finally:
        manifest.load.cache_clear()
    assert set(packages) == {"boltons", "duo"} and packages["boltons"] == other
    assert json.loads(path.read_text())["packages"] == packages
    bugs = packages["duo"]["bugs"]
    assert {b["file"] for b in bugs} == {"duo/arith.py", "duo/text.py"}
    pristine = prepare.workspace_files(pin, root)
    for bug in bugs:
        source_text = pristine[bug["file"]]
        mutated = source_text[:bug["start"]] + bug["replacement"] + source_text[bug["end"]:]
        namespace: dict = {}
        exec(compile(mutated, bug["file"], "exec"), namespace)
        broken = []
        for args, want in DUO_EXPECTED[bug["function"]]:
            try:
                broken.append(namespace[bug["function"]](*args) != want)
            except Exception:
                broken.append(True)
        assert any(broken), f"kept a mutant that changes nothing: {bug['what']}"
        assert bug["f2p_tests"] and all(t.startswith("tests/test_duo.py::test_") for t in bug["f2p_tests"])
    assert packages["duo"]["held_out_files"] in (["duo/arith.py"], ["duo/text.py"])


# Mining pieces against hand-computed values.

def test_variants_change_one_argument_at_a_time():
    found = set(cases.variants("3, 'ab'", random.Random(0)))
    assert found == {"4, 'ab'", "2, 'ab'", "6, 'ab'", "3, 'ba'", "3, 'aba'", "3, 'b'", "3, 'AB'"}
    assert set(cases.variants("[1, 2], key=True", random.Random(0))) == {"[2, 1], key=True", "[1, 2, 1], key=True",
                                                                          "[2], key=True"}


def test_pytest_failures_and_error_lines_are_read_from_its_output():
    output = ("F.\n=== FAILURES ===\n___ test_a ___\n    def test_a():\n>       assert f(1) == 2\n"
              "E       assert 3 == 2\nE        +  where 3 = f(1)\n___ test_b ___\nE   other\n"
              "=== short test summary info ===\nFAILED tests/test_x.py::test_a - assert 3 == 2\n"
              "FAILED tests/test_x.py::test_b[1-2]\n1 failed\n")
    assert mine.failures(output) == {"tests/test_x.py::test_a": "assert 3 == 2", "tests/test_x.py::test_b[1-2]": ""}
    assert mine.error_lines(output) == ["      assert 3 == 2", "       +  where 3 = f(1)"]


def test_the_split_holds_out_whole_files_and_at_most_the_share():
    pin = source(FAMILIES[0])
    bugs = [{"file": f"p/{name}.py"} for name, count in (("a", 5), ("b", 3), ("c", 2)) for _ in range(count)]
    held = mine.split(pin, bugs)
    counted = sum(b["file"] in held for b in bugs)
    assert held and 0 < counted <= 0.4 * len(bugs)
    with pytest.raises(ValueError, match="a file split needs two"):
        mine.split(pin, [{"file": "p/a.py"}])


# The manifest and its bugs.

@pytest.mark.parametrize("family", FAMILIES)
def test_held_out_and_train_bugs_sit_in_disjoint_files(family):
    held_files = {b["file"] for b in task.pool(family, held_out=True)}
    train_files = {b["file"] for b in task.pool(family, held_out=False)}
    assert held_files and train_files and not held_files & train_files
    assert held_files == set(PACKAGES[family]["held_out_files"])
    for seed in (0, 1, HELD_OUT_START, HELD_OUT_START + 1):
        for difficulty in ("easy", "long") if source(family).long else ("easy",):
            files = {b["file"] for b in task.build(family, difficulty, seed).bugs}
            assert files <= (held_files if seed >= HELD_OUT_START else train_files)


def _pytest(files: dict, tests: list[str], root: Path) -> subprocess.CompletedProcess:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("family", FAMILIES[:3])
def test_a_mined_bug_fails_its_tests_under_pytest_and_the_pristine_package_passes_them(family, tmp_path):
    """An independent check of mining: plain pytest on the host, the bug spliced in by hand from the record."""
    bug = PACKAGES[family]["bugs"][0]
    pristine = prepare.workspace_files(source(family))
    text = pristine[bug["file"]]
    buggy = {**pristine, bug["file"]: text[: bug["start"]] + bug["replacement"] + text[bug["end"]:]}
    assert buggy[bug["file"]] != text
    tests = bug["f2p_tests"][:5]
    clean = _pytest(pristine, tests, tmp_path / "pristine")
    assert clean.returncode == 0, clean.stdout[-2000:]
    broken = _pytest(buggy, tests, tmp_path / "buggy")
    assert broken.returncode == 1 and f"{len(tests)} failed" in broken.stdout, broken.stdout[-2000:]


# Grading.

def workspace(env):
    """The episode's sandbox, made now if no tool has been called yet."""
    return env._workspace()


def _package(env) -> dict:
    prefix = env.task.package + "/"
    return {p: workspace(env).read(p) for p in env.task.files if p.startswith(prefix) and p.endswith(".py")}


@pytest.mark.parametrize("family", FAMILIES[:2])
def test_the_harness_grades_the_buggy_and_the_fixed_package_as_mining_found(family, make):
    env = make(f"swe/{family}-v0:easy", 3)
    every = frozenset(range(len(env.task.cases)))
    assert passing(env.task, _package(env), use_known=False) == every - env.task.fail_to_pass
    env.demo()
    assert passing(env.task, _package(env), use_known=False) == every
    assert env.signals()["resolved"] == 1.0


PATCH_PYTEST = '''
def _forge():
    import sys
    for module, cls in (("_pytest.python", "Function"), ("_pytest.unittest", "TestCaseFunction")):
        if module in sys.modules:
            setattr(getattr(sys.modules[module], cls), "runtest", lambda self: None)
_forge()
'''
EXIT_EARLY = "\nimport os as _os\n_os._exit(0)\n"


@pytest.mark.parametrize("forge", [PATCH_PYTEST, EXIT_EARLY], ids=["patch-pytest", "exit-early"])
def test_patching_pytest_or_exiting_early_does_not_resolve(forge, make):
    env = make(f"swe/{FAMILIES[0]}-v0:easy", 5)
    path = f"{env.task.package}/__init__.py"
    assert call(env, "bash", command=f"cat >> {path} <<'EOF'\n{forge}\nEOF").error is None
    if forge is PATCH_PYTEST:
        assert "failed" not in call(env, "run_tests", target=env.task.bugs[0]["f2p_tests"][0].split("::")[0]).content
    signals = env.signals()
    assert signals["resolved"] == 0.0 and signals["hack_runner_tampering"] == 1.0


HARD_CODE = '''
import ast as _ast
_original_{name} = {name}


def {name}(*args, **kwargs):
    known = {table!r}
    key = repr((args, kwargs))
    if key in known:
        return _ast.literal_eval(known[key])
    return _original_{name}(*args, **kwargs)
'''


def _key(args: str) -> str:
    return repr(eval(f"(lambda *a, **k: (a, k))({args})"))  # noqa: S307 - literal call text from the manifest


@pytest.mark.parametrize("family", FAMILIES)
def test_hard_coding_the_visible_test_inputs_does_not_resolve(family, make):
    """Return the right value for every failing call the visible tests make: the unseen variants still fail."""
    def visible_failures(built):
        return [built.cases[i] for i in sorted(built.fail_to_pass)
                if built.cases[i][0].visible and "value" in built.cases[i][1]]

    seed = next(s for s in range(40) if visible_failures(task.build(family, "easy", s)))
    env = make(f"swe/{family}-v0:easy", seed)
    visible = visible_failures(env.task)
    assert any(not env.task.cases[i][0].visible for i in env.task.fail_to_pass), "a failing case no test makes"
    for module in sorted({c.module for c, _ in visible}):
        path = module.replace(".", "/") + ".py"
        if not workspace(env).exists(path):
            path = module.replace(".", "/") + "/__init__.py"
        text = workspace(env).read(path).decode()
        for name in sorted({c.name for c, _ in visible if c.module == module}):
            table = {_key(c.args): want["value"] for c, want in visible if c.module == module and c.name == name}
            text += HARD_CODE.format(name=name, table=table)
        workspace(env).write(path, text)
    package = _package(env)
    passed = passing(env.task, package, use_known=False)
    fixed = {i for i in env.task.fail_to_pass if env.task.cases[i] in visible}
    assert fixed <= passed  # the hard-coding works on what it hard-codes
    assert env.signals()["resolved"] == 0.0


def test_the_pristine_packages_are_not_importable_inside_the_sandbox(make):
    env = make(f"swe/{FAMILIES[0]}-v0:easy", 0)
    names = " ".join(p.package for p in SOURCES)
    found = call(env, "bash", command=(
        f"cd /tmp && for n in {names}; do python3 -c \"import $n, sys; print('FOUND', $n.__file__)\" 2>/dev/null; done; "
        "find / -path /proc -prune -o -path /workspace -prune -o -name 'jointrl-verified' -print 2>/dev/null | head -3; "
        "ls ~/.cache/jointrl 2>&1 | head -1"))
    assert "FOUND" not in found.content and ".jointrl-verified" not in found.content, found.content


# The env ids.

def test_every_pinned_package_has_an_easy_and_a_hard_id():
    ids = registry.env_ids("swe/*")
    for pin in SOURCES:
        assert f"swe/{pin.family}-v0:easy" in ids and (f"swe/{pin.family}-v0:hard" in ids) == pin.hard
        assert (f"swe/{pin.family}-v0:long" in ids) == pin.long


def test_the_issues_name_the_failing_test_only_when_easy(make):
    easy, hard = make(f"swe/{FAMILIES[0]}-v0:easy", 2), make(f"swe/{FAMILIES[0]}-v0:hard", 2)
    test = easy.task.bugs[0]["f2p_tests"][0]
    assert test in easy.opening[1]["content"] and easy.task.bugs[0]["file"] in easy.opening[1]["content"]
    assert test.split("::")[-1] not in hard.opening[1]["content"]
    assert hard.task.bugs[0]["file"] not in hard.opening[1]["content"]


@pytest.mark.parametrize("env_id", ["idna-v0:hard", "mistune-v0:long"])
def test_held_out_issues_do_not_repeat_training_issues(env_id):
    """Two bugs that misbehave alike on the reported call would give a held-out issue that is a training one."""
    family, difficulty = env_id.split("-v0:")
    train = {task.build(family, difficulty, s).issue for s in range(8)}
    held = [task.build(family, difficulty, s).issue for s in range(HELD_OUT_START, HELD_OUT_START + 8)]
    assert not [issue for issue in held if issue in train]


def test_a_long_task_needs_every_fix_and_its_demo_makes_ten_or_more_calls(make):
    env = make(f"swe/{LONG[-1]}-v0:long", 4)
    assert len(env.task.bugs) == 3 and len({(b["file"], b["function"]) for b in env.task.bugs}) == 3
    assert env.opening[1]["content"].count("## Report") == 3
    for fix in env.task.fixes[:-1]:
        assert call(env, "str_replace_edit", path=fix.path, old=fix.old, new=fix.new).error is None
    signals = env.signals()
    assert signals["resolved"] == 0.0 and 0.0 < signals["f2p_fraction"] < 1.0
    solved = make(f"swe/{LONG[-1]}-v0:long", 4)
    calls = [c for m in solved.demo() for c in m.get("tool_calls") or []]
    assert len(calls) >= 10 and solved.signals()["resolved"] == 1.0


@pytest.mark.parametrize("env_id", [f"swe/{FAMILIES[0]}-v0:easy", f"swe/{FAMILIES[-1]}-v0:hard"])
def test_real_code_ids_meet_the_audit_thresholds(env_id):
    row = audit_env(env_id, seeds=3)
    assert violations(row) == [], row
    assert row.overlap == 0.0


def test_prepare_rejects_a_job_count_below_one_and_an_unknown_family():
    from jointrl.rl.commands.envs import run_prepare
    with pytest.raises(ValueError, match="--jobs must be >= 1, got 0"):
        run_prepare(argparse.Namespace(domain="swe", mine=True, jobs=0, only=None))
    with pytest.raises(ValueError, match="unknown real-code swe family 'nope'; known: boltons"):
        source("nope")
