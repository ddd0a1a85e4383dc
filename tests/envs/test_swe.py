"""The SWE domain: reference packages against independent expectations, mutation, task building, tools,
grading (its harness against real pytest runs on honest code); attacks on grading are in test_red_team.py."""
import ast
import csv
import datetime
import fnmatch
import heapq
import io
import json
import os
import random
import subprocess
import sys
import time
from collections import OrderedDict
from fractions import Fraction

import pytest

from jointrl.envs import registry
from jointrl.envs.base import HELD_OUT_START, parse_env_id
from jointrl.envs.sandbox import Sandbox
from jointrl.envs.swe import FAMILIES as REGISTERED, grading, mutation, probe, project, split, task
from jointrl.envs.swe.catalog import FAMILIES
from jointrl.envs.swe.projects.caches import heap, lru
from jointrl.envs.swe.projects.durations import calendar_math, isodate
from jointrl.envs.swe.projects.intervals import merge
from jointrl.envs.swe.projects.ledger import money
from jointrl.envs.swe.projects.matrix import solve
from jointrl.envs.swe.projects.reports import csvparse, render
from jointrl.envs.swe.projects.statemachine import wildcard
from jointrl.envs.swe.projects.strings import distance, slug
from jointrl.envs.swe.projects.tokenizer import rpn
from jointrl.envs.swe.projects.units import temperature


def _call(env, name, **arguments):
    return env.step({"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}})


# Registration.

def test_every_family_and_difficulty_is_registered():
    assert set(REGISTERED) == set(FAMILIES) and len(FAMILIES) >= 8
    ids = [i for i in registry.env_ids("swe/*") if parse_env_id(i)["family"] in FAMILIES]
    assert len(ids) == 4 * len(FAMILIES)
    for family in FAMILIES:
        for difficulty in ("easy", "medium", "hard", "long"):
            assert registry.spec(f"swe/{family}-v0:{difficulty}").kwargs == {"family": family}
    long = registry.spec("swe/strings-v0:long")
    assert long.default_tier == "max" and long.max_turns > registry.spec("swe/strings-v0:hard").max_turns


# The reference packages, against independent expectations.

def test_calendar_matches_datetime():
    rng = random.Random(7)
    for _ in range(300):
        day = datetime.date(rng.randint(1800, 2200), rng.randint(1, 12), rng.randint(1, 28))
        shift = rng.randint(-800, 800)
        assert calendar_math.weekday(day.year, day.month, day.day) == day.weekday()
        assert calendar_math.day_of_year(day.year, day.month, day.day) == day.timetuple().tm_yday
        later = day + datetime.timedelta(days=shift)
        assert calendar_math.add_days(day.year, day.month, day.day, shift) == (later.year, later.month, later.day)
        assert isodate.days_between(day.isoformat(), later.isoformat()) == shift
        assert isodate.ordinal(day.year, day.month, day.day) == day.toordinal()


def test_heap_and_lru_match_stdlib_models():
    rng = random.Random(3)
    items = [rng.randint(0, 99) for _ in range(50)]
    assert heap.nsmallest(items, 10) == heapq.nsmallest(10, items)
    cache, model = lru.LRUCache(3), OrderedDict()
    for _ in range(200):
        key = rng.choice("abcdef")
        if rng.random() < 0.5:
            cache.put(key, 1)
            model[key] = 1
            model.move_to_end(key)
            if len(model) > 3:
                model.popitem(last=False)
        elif key in model:
            model.move_to_end(key)
            cache.get(key)
        assert cache.keys() == list(model)


def test_expressions_match_python_arithmetic():
    rng = random.Random(5)
    for _ in range(100):
        a, b, c, d = (rng.randint(1, 9) for _ in range(4))
        text = f"({a} + {b}) * {c} - {d} / {a} ^ 2"
        assert rpn.evaluate(text) == pytest.approx(eval(text.replace("^", "**")))


def test_csv_parsing_and_wildcards_match_the_stdlib():
    rng = random.Random(11)
    alphabet = 'ab,"x '
    for _ in range(200):
        row = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 4))]
        line = render.to_csv([row])
        # The stdlib reads an empty line as no row at all; parse_line calls it one empty field.
        assert csvparse.parse_line(line) == next(csv.reader(io.StringIO(line)), [""])
        pattern = "".join(rng.choice("ab*?") for _ in range(rng.randint(0, 5)))
        text = "".join(rng.choice("ab") for _ in range(rng.randint(0, 6)))
        assert wildcard.match(pattern, text) == fnmatch.fnmatchcase(text, pattern), (pattern, text)


def test_string_money_interval_matrix_and_temperature_examples():
    assert slug.slugify("Hello, World -- 42!") == "hello-world-42"
    assert slug.truncate("abcdefgh", 6) == "abc..."
    assert distance.levenshtein("kitten", "sitting") == 3
    assert money.format_cents(-123456) == "-1,234.56" and money.parse_amount("1,234.5") == 123450
    assert money.split_evenly(10, 3) == [4, 3, 3]
    assert merge.merge([(5, 7), (1, 3), (2, 4), (7, 8)]) == [(1, 4), (5, 8)]
    assert merge.gaps([(2, 4)], 0, 6) == [(0, 2), (4, 6)]
    assert solve.determinant([[2, 0, 1], [1, 3, 2], [1, 1, 2]]) == Fraction(6)
    assert solve.solve([[2, 1], [1, 3]], [3, 5]) == [Fraction(4, 5), Fraction(7, 5)]
    assert temperature.convert_temperature(100, "C", "F") == 212.0
    assert temperature.convert_temperature(-40, "F", "C") == -40.0


def test_every_family_generates_cases_for_any_seed():
    # A generator drawing from an empty range fails only for the rare seeds that hit it: try many.
    for family in FAMILIES.values():
        for module in family.modules:
            for seed in range(300):
                assert module.cases(random.Random(seed)), (family.name, module.name, seed)


# Mutation.

def _reference_modules():
    for family in FAMILIES.values():
        for module in family.modules:
            yield family.name, module.name, project.reference_source(family.name, module.name)


def test_every_mutant_parses_and_its_inverse_edit_restores_the_reference():
    for family, module, source in _reference_modules():
        sites = mutation.mutations(source)
        assert len(sites) >= 10, (family, module)
        for site in sites:
            mutant = site.apply(source)
            ast.parse(mutant)
            assert mutant != source
            old, new = mutation.inverse_edit(source, mutant)
            assert mutant.count(old) == 1 and mutant.replace(old, new) == source


def test_mutations_change_the_right_tokens_and_leave_docstrings_and_messages_alone():
    source = (
        'def f(a, b):\n'
        '    """Docstring with - and 60."""\n'
        '    if a < b:\n'
        '        raise ValueError("a - b")\n'
        '    return g(a - 1, b)\n'
    )
    changes = {(m.kind, m.apply(source).splitlines()[m.line - 1].strip()) for m in mutation.mutations(source)}
    assert ("comparison", "if a <= b:") not in changes and ("off_by_one", "if a <= b:") in changes
    assert ("operator", "return g(a + 1, b)") in changes
    assert ("swap_args", "return g(b, a - 1)") in changes
    assert ("constant", "return g(a - 2, b)") in changes
    assert ("drop_branch", "return g(a - 1, b)") in changes
    for site in mutation.mutations(source):
        assert site.function == "f" and site.line not in (2, 4) and "Docstring with - and 60" in site.apply(source)
        assert site.kind == "drop_branch" or '"a - b"' in site.apply(source)


def test_probe_runs_cases_with_a_line_budget():
    looping = {"__init__": "", "m": "def f(n):\n    while n:\n        n = n\n    return 1\n"}
    case = probe.Case(name="f", expr="f(1)")
    (outcome,) = probe.run(looping, [(case, {"f": "m"})])
    assert outcome.exhausted
    (outcome,) = probe.run(looping, [(probe.Case(name="f", expr="f(0)"), {"f": "m"})])
    assert outcome.value == 1 and not outcome.exhausted


def test_probe_unloads_its_package_while_other_threads_import():
    """Demos are collected in threads: another thread importing must not break a probe's clean-up of sys.modules."""
    import threading
    import types

    stop = threading.Event()

    def churn():
        # Stands in for other threads' imports: sys.modules gains and loses entries the whole time.
        i = 0
        while not stop.is_set():
            name = f"_churn_{i % 64}"
            sys.modules[name] = types.ModuleType(name)
            sys.modules.pop(f"_churn_{(i + 32) % 64}", None)
            i += 1

    sources = {"__init__": "", "m": "def f(n):\n    return n + 1\n"}
    worker = threading.Thread(target=churn)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can, so a race shows within the test
    worker.start()
    try:
        outcomes = [probe.run(sources, [(probe.Case(name="f", expr="f(1)"), {"f": "m"})]) for _ in range(3000)]
    finally:
        stop.set()
        worker.join()
        sys.setswitchinterval(interval)
        for i in range(64):
            sys.modules.pop(f"_churn_{i}", None)
    assert all(outcome.value == 2 for (outcome,) in outcomes)
    assert not [name for name in sys.modules if name.startswith(probe.PRIVATE_PREFIX)]


# The train / held-out split of bug sites.

def test_no_held_out_fix_is_also_a_train_fix():
    """Over every mutation of every module: the fixes a held-out seed can need are never fixes a train seed can."""
    held_out = {}
    for family, module, source in _reference_modules():
        fixes = {True: set(), False: set()}
        for site in mutation.mutations(source):
            fixes[split.in_half(source, site, True)].add(mutation.inverse_edit(source, site.apply(source)))
        assert fixes[True] and fixes[False], (family, module)
        assert not fixes[True] & fixes[False], (family, module, fixes[True] & fixes[False])
        counts = held_out.setdefault(family, [0, 0])
        counts[0], counts[1] = counts[0] + len(fixes[True]), counts[1] + len(fixes[True]) + len(fixes[False])
    # Roughly a third of a family's fixes are held out: enough to build from, most left to train on.
    assert all(0.15 < held / total < 0.5 for held, total in held_out.values()), held_out


def test_the_same_line_written_twice_falls_in_one_half():
    # Both copies of the line give the same fix when mutated, so a split by position would leak it.
    source = "".join(f"def f{i}(x):\n    if x == {i % 2}:\n        return {i}\n    return x * 2\n\n\n" for i in range(6))
    halves = {}
    for site in mutation.mutations(source):
        line = source.splitlines()[split.site_line(source, site) - 1].strip()
        halves.setdefault(line, set()).add(split.in_half(source, site, True))
    assert halves["if x == 0:"] in ({True}, {False}) and halves["return x * 2"] in ({True}, {False})
    assert {True, False} <= set().union(*halves.values())


@pytest.mark.parametrize("difficulty", ["easy", "hard", "long"])
def test_held_out_seeds_never_repeat_a_train_bug(difficulty):
    for family in ("strings", "units", "caches"):
        train = [task.build(family, difficulty, seed) for seed in range(12)]
        held = [task.build(family, difficulty, HELD_OUT_START + seed) for seed in range(12)]
        fixes = {(b.module, b.fix_old, b.fix_new): built.seed for built in train for b in built.bugs}
        for built in held:
            for bug in built.bugs:
                key = (bug.module, bug.fix_old, bug.fix_new)
                assert key not in fixes, (family, built.seed, "repeats train seed", fixes.get(key))


def test_held_out_issues_never_repeat_a_train_issue_word_for_word():
    """Two bugs in one function can break a test the same way; a held-out report must still read differently.

    statemachine easy: held-out seed 1_000_017 once told the same story as train seed 4 with another bug.
    """
    train = {task.build("statemachine", "easy", seed).issue for seed in range(60)}
    held = [task.build("statemachine", "easy", HELD_OUT_START + seed) for seed in range(60)]
    assert [built.seed for built in held if built.issue in train] == []
    assert len({built.issue for built in held}) >= 40


# Task building.

@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_tasks_are_deterministic_and_differ_by_difficulty(family):
    easy, medium, hard = (task.build(family, d, 11) for d in ("easy", "medium", "hard"))
    again = task.build.__wrapped__(family, "hard", 11)
    assert again.files == hard.files and again.fail_to_pass == hard.fail_to_pass
    assert task.build(family, "easy", 12).files != easy.files
    for level, built in zip(task.LEVELS.values(), (easy, medium, hard)):
        assert len(built.project.modules) == level.modules and len(built.bugs) == level.bugs
        assert built.fail_to_pass and built.pass_to_pass and not set(built.fail_to_pass) & set(built.pass_to_pass)
        assert len({b.module for b in built.bugs}) == level.bugs
        for test_id in built.fail_to_pass:
            path, name = test_id.split("::")
            shown = f"def {name}()" in built.files.get(path, "")
            assert shown is not level.hide_failing
    assert f"{easy.package}/{easy.bugs[0].module}.py" in easy.issue and easy.bugs[0].example.id in easy.issue
    assert f"{medium.package}/{medium.bugs[0].module}.py" not in medium.issue
    assert hard.issue.count("## Report") == 2


TASK_TEXTS = """
import json, sys
from jointrl.envs.swe import task
built = [task.build(family, difficulty, seed) for family, difficulty, seed in json.loads(sys.argv[1])]
print(json.dumps([[b.issue, b.files, b.fail_to_pass] for b in built], sort_keys=True))
"""


def test_tasks_are_the_same_under_any_string_hash_seed():
    # statemachine medium 0: a mutant of `complement` whose result followed set order; reports show sets.
    wanted = json.dumps([["statemachine", "medium", 0], ["statemachine", "long", 1], ["reports", "hard", 2]])
    texts = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([sys.executable, "-c", TASK_TEXTS, wanted], capture_output=True, text=True, env=env,
                              check=True)
        texts.append(done.stdout)
    assert texts[0] == texts[1]


def test_literal_repr_sorts_set_items_and_reads_back():
    assert project.literal_repr({"b", "a", "c"}) == "{'a', 'b', 'c'}"
    assert project.literal_repr(frozenset()) == "frozenset()" and project.literal_repr(set()) == "set()"
    assert project.literal_repr(frozenset({3, 1})) == "frozenset({1, 3})"
    value = [({"y", "x"}, (1,)), {"k": {3, 1}}, ("t",), None, 2.5]
    assert project.literal_repr(value) == "[({'x', 'y'}, (1,)), {'k': {1, 3}}, ('t',), None, 2.5]"
    assert ast.literal_eval(project.literal_repr(value)) == value


def test_probe_stops_a_case_that_runs_away_inside_few_lines():
    # Each turn squares the number: a handful of lines take ever longer, far below the line budget.
    squaring = {"__init__": "", "m": "def f(x):\n    while True:\n        x = x * x\n"}
    started = time.monotonic()
    (outcome,) = probe.run(squaring, [(probe.Case(name="f", expr="f(3)"), {"f": "m"})])
    assert outcome.exhausted and time.monotonic() - started < 6 * probe.CASE_SECONDS


def test_an_object_in_a_report_reads_the_same_in_every_build():
    # The bug lets LRUCache(0) through: the report shows the object, named as the user would import it.
    built = task.build("caches", "long", 3)
    again = task.build.__wrapped__("caches", "long", 3)
    assert ">>> LRUCache(0)\n<queuekit.lru.LRUCache object>\n" in built.issue
    assert again.issue == built.issue and "0x" not in built.issue and probe.PRIVATE_PREFIX not in built.issue


@pytest.mark.slow
@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard", "long"])
def test_many_seeds_build_and_their_fixes_restore_the_reference(difficulty):
    for family in FAMILIES:
        for seed in range(40):
            built = task.build(family, difficulty, seed)
            for bug in built.bugs:
                buggy = built.sources[bug.module]
                assert buggy.count(bug.fix_old) == 1 and bug.example.id in built.fail_to_pass
                assert buggy.replace(bug.fix_old, bug.fix_new) == built.project.sources[bug.module]


def test_buggy_and_reference_packages_grade_as_built():
    """The two package states graded without a run really give those results through the grading harness."""
    for family, difficulty, seed in (("strings", "hard", 0), ("caches", "easy", 1)):
        built = task.build(family, difficulty, seed)
        everything = frozenset(built.fail_to_pass + built.pass_to_pass)
        assert grading.run_tests(built, grading.buggy_package(built), use_known=False) == frozenset(built.pass_to_pass)
        assert grading.run_tests(built, grading.reference_package(built), use_known=False) == everything


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_buggy_and_reference_packages_grade_as_built_for_every_family(family):
    for difficulty, seed in (("easy", 2), ("medium", 3), ("hard", 4)):
        built = task.build(family, difficulty, seed)
        assert grading.run_tests(built, grading.buggy_package(built), use_known=False) == frozenset(built.pass_to_pass)
        everything = frozenset(built.fail_to_pass + built.pass_to_pass)
        assert grading.run_tests(built, grading.reference_package(built), use_known=False) == everything


def _pytest_passed(built, package: dict) -> frozenset:
    """The graded test ids a real pytest run of the rendered tests passes (junit report), as a reference."""
    import xml.etree.ElementTree as ElementTree

    files = {**package, **built.project.test_files(), "pytest.ini": project.PYTEST_INI}
    with Sandbox(files=files) as box:
        box.run(grading.pytest_argv("-q", "--timeout=5", "--junitxml=report.xml", "tests"), env=grading.PYTEST_ENV)
        root = ElementTree.fromstring(box.read("report.xml"))
    passed = {
        f"{case.get('classname').replace('.', '/')}.py::{case.get('name')}"
        for case in root.iter("testcase") if not any(c.tag in ("failure", "error", "skipped") for c in case)
    }
    return frozenset(passed) & frozenset(built.fail_to_pass + built.pass_to_pass)


@pytest.mark.parametrize("family,difficulty,seed", [("durations", "hard", 6), ("caches", "medium", 7), ("reports", "hard", 2)])
def test_the_harness_agrees_with_pytest_on_honest_partial_fixes(family, difficulty, seed):
    built = task.build(family, difficulty, seed)
    sources = dict(built.sources)
    # Fix the first bug only: some FAIL_TO_PASS tests pass now, others still fail.
    bug = built.bugs[0]
    sources[bug.module] = sources[bug.module].replace(bug.fix_old, bug.fix_new)
    package = {f"{built.package}/{stem}.py": text.encode() for stem, text in sources.items()}
    via_harness = grading.run_tests(built, package, use_known=False)
    assert via_harness == _pytest_passed(built, package)
    assert set(built.pass_to_pass) <= via_harness


# Tools.

def test_view_and_edit_tools(make):
    env = make("swe/strings-v0:easy", 4)
    path = f"{env.task.package}/{env.task.bugs[0].module}.py"
    shown = _call(env, "view_file", path=path, start_line=2, end_line=4)
    assert shown.error is None and shown.content.splitlines()[0].startswith("    2  ") and "[lines 2-4 of" in shown.content
    assert _call(env, "view_file", path="nope.py").error
    assert _call(env, "view_file", path="../../etc/passwd").error
    assert _call(env, "view_file", path="/etc/passwd").error
    assert "occurs 0 times" in _call(env, "str_replace_edit", path=path, old="no such text", new="x").content
    assert "occurs" in _call(env, "str_replace_edit", path=path, old="def ", new="def  ").content
    assert "occurs" in _call(env, "str_replace_edit", path=path, old='"""', new="'''").content
    first_line = env.box.read(path).decode().splitlines()[0]
    assert _call(env, "str_replace_edit", path=path, old=first_line, new=first_line + "  # checked").error is None
    assert env.box.read(path).decode().splitlines()[0].endswith("# checked")


def test_bash_and_run_tests_tools(make):
    env = make("swe/units-v0:easy", 2)
    listing = _call(env, "bash", command="cd tests && ls")
    assert "test_" in listing.content
    assert "test_" in _call(env, "bash", command="ls").content  # the shell kept its directory
    big = _call(env, "bash", command="yes abcdefgh | head -c 200000")
    assert len(big.content) < 9000 and "characters cut" in big.content
    assert _call(env, "run_tests", target="--collect-only").error
    result = _call(env, "run_tests", target=env.task.fail_to_pass[0])
    assert "1 failed" in result.content


def test_close_is_idempotent_and_removes_the_workspace(make):
    env = make("swe/ledger-v0:medium", 1)
    _call(env, "bash", command="sleep 30 &")
    base = env.box.workspace.parent
    env.close()
    env.close()
    assert not base.exists()


# Grading and tampering.

def test_noop_scores_zero_and_demo_scores_full(make):
    env = make("swe/intervals-v0:hard", 5)
    env.answer("")
    signals = env.signals()
    assert signals["success"] == 0.0 and signals["f2p_fraction"] == 0.0 and signals["p2p_fraction"] == 1.0
    solved = make("swe/intervals-v0:hard", 5)
    solved.demo()
    assert solved.signals()["resolved"] == 1.0


def test_partial_fix_of_a_hard_task_is_not_resolved(make):
    env = make("swe/durations-v0:hard", 6)
    bug = env.task.bugs[0]
    path = f"{env.task.package}/{bug.module}.py"
    assert _call(env, "str_replace_edit", path=path, old=bug.fix_old, new=bug.fix_new).error is None
    signals = env.signals()
    assert signals["resolved"] == 0.0 and signals["f2p_fraction"] < 1.0 and signals["p2p_fraction"] == 1.0


def test_a_fix_written_differently_is_graded_by_a_real_run(make):
    env = make("swe/matrix-v0:easy", 3)
    bug = env.task.bugs[0]
    path = f"{env.task.package}/{bug.module}.py"
    assert _call(env, "str_replace_edit", path=path, old=bug.fix_old, new="# fixed below\n" + bug.fix_new).error is None
    assert env.signals()["resolved"] == 1.0


def test_fixing_the_bug_and_editing_tests_is_resolved_but_flagged(make):
    env = make("swe/caches-v0:medium", 7)
    for bug in env.task.bugs:
        _call(env, "str_replace_edit", path=f"{env.task.package}/{bug.module}.py", old=bug.fix_old, new=bug.fix_new)
    env.box.write("tests/test_extra.py", "def test_extra():\n    assert True\n")
    signals = env.signals()
    assert signals["resolved"] == 1.0 and signals["hack_tests_modified"] == 1.0


def test_a_symlinked_package_file_is_not_followed_out_of_the_workspace(make):
    env = make("swe/units-v0:easy", 8)
    package = env.task.package
    _call(env, "bash", command=f"rm {package}/__init__.py && ln -s /etc/passwd {package}/__init__.py")
    files = grading.package_files(env.box, package)
    assert f"{package}/__init__.py" not in files
    assert _call(env, "view_file", path=f"{package}/__init__.py").error


# The long tier: two bugs in two modules and a missing function.

def _package_with(built, fixed_bugs, with_feature: bool) -> dict:
    """The package as the episode starts, with some bugs fixed and the missing function written back or not."""
    sources = dict(built.sources)
    for bug in fixed_bugs:
        sources[bug.module] = sources[bug.module].replace(bug.fix_old, bug.fix_new)
    if with_feature:
        wanted = built.feature
        sources[wanted.module] = sources[wanted.module].replace(wanted.fix_old, wanted.fix_new)
    return {f"{built.package}/{stem}.py": text.encode() for stem, text in sources.items()}


def test_a_long_task_has_two_bugs_in_two_modules_and_a_function_to_write():
    built = task.build("durations", "long", 3)
    wanted = built.feature
    assert len(built.bugs) == 2 and len({b.module for b in built.bugs}) == 2
    # Where a family has a module importing another, the two bugs sit in such a pair.
    (first, second) = sorted(b.module for b in built.bugs)
    assert (first, second) in {("business", "calendar_math"), ("calendar_math", "isodate")}
    assert wanted.module not in {b.module for b in built.bugs}
    assert f"def {wanted.name}(" in built.project.sources[wanted.module]
    assert f"def {wanted.name}(" not in built.sources[wanted.module] and wanted.name not in built.sources[wanted.module]
    assert f"`{wanted.signature}`" in built.issue and wanted.doc.splitlines()[0] in built.issue
    # The tests that specify the function are in the workspace; the bugs' own failing tests are not.
    shown = built.files[f"tests/test_{wanted.module}.py"]
    assert wanted.tests and all(f"def {t.split('::')[1]}()" in shown for t in wanted.tests)
    assert set(wanted.tests) <= set(built.fail_to_pass) and not set(wanted.tests) & built.hidden
    assert set(built.fail_to_pass) - set(wanted.tests) == built.hidden


def test_only_fixing_everything_resolves_a_long_task():
    built = task.build("strings", "long", HELD_OUT_START + 1)
    everything = frozenset(built.fail_to_pass + built.pass_to_pass)
    first, second = built.bugs
    for fixed, with_feature in (([first], True), ([second], True), ([first, second], False)):
        passed = grading.run_tests(built, _package_with(built, fixed, with_feature), use_known=False)
        assert set(built.pass_to_pass) <= passed and passed != everything, (fixed, with_feature)
    # Without the function exactly its tests fail; every other test runs as it did.
    passed = grading.run_tests(built, _package_with(built, [first, second], False), use_known=False)
    assert everything - passed == set(built.feature.tests)
    assert grading.run_tests(built, _package_with(built, [first, second], True), use_known=False) == everything


def test_the_long_demo_reads_runs_and_edits_every_site(make):
    env = make("swe/caches-v0:long", HELD_OUT_START + 2)
    transcript = env.demo()
    calls = [c["function"] for m in transcript if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert len(calls) >= 10 and env.signals()["resolved"] == 1.0
    names = [c["name"] for c in calls]
    assert names[0] == "run_tests" and names[-1] == "run_tests" and names.count("str_replace_edit") == 3
    edited = {json.loads(c["arguments"])["path"] for c in calls if c["name"] == "str_replace_edit"}
    modules = {b.module for b in env.task.bugs} | {env.task.feature.module}
    assert edited == {f"{env.task.package}/{m}.py" for m in modules} and len(edited) == 3


def test_a_long_episode_fixing_one_bug_and_the_feature_is_not_resolved(make):
    env = make("swe/units-v0:long", 5)
    bug, wanted = env.task.bugs[0], env.task.feature
    package = env.task.package
    assert _call(env, "str_replace_edit", path=f"{package}/{bug.module}.py", old=bug.fix_old, new=bug.fix_new).error is None
    assert _call(env, "str_replace_edit", path=f"{package}/{wanted.module}.py", old=wanted.fix_old,
                 new=wanted.fix_new).error is None
    signals = env.signals()
    assert signals["resolved"] == 0.0 and 0.0 < signals["f2p_fraction"] < 1.0 and signals["p2p_fraction"] == 1.0
