"""A pytest plugin run inside a sandbox on a pristine package: which tests pass, which functions each test
calls, and calls of the package's functions whose arguments are plain literals (inputs for graded cases).

Standard library only; it is loaded with `-p jointrl_tracer` from the workspace root and writes one JSON
file, TRACE_OUT, at the end of the session. Function keys are (file, qualified name without `<locals>`),
the names the mutation finder gives.
"""
import inspect
import json
import os
import sys

PACKAGE = os.environ["TRACE_PACKAGE"]
OUT = os.environ["TRACE_OUT"]
ROOT = os.path.join(os.getcwd(), PACKAGE) + os.sep
MAX_CALLS = 12  # distinct argument lists kept per function
MAX_ARGUMENT_CHARS = 300
SCALARS = (bool, int, float, str, bytes, type(None), range)

current = [None]
results = {}
covered = {}  # (file, qualname) -> test ids
calls = {}  # code object -> {argument text: None}, in first-seen order


def plain(value, depth=0):
    """Whether value is built only from exact literal types (so its repr rebuilds it)."""
    kind = type(value)
    if kind in SCALARS:
        return kind is not float or (value == value and value not in (float("inf"), float("-inf")))
    if depth > 6 or kind not in (list, tuple, dict, set, frozenset):
        return False
    if kind is dict:
        return all(plain(k, depth + 1) and plain(v, depth + 1) for k, v in value.items())
    return all(plain(item, depth + 1) for item in value)


def arguments(frame):
    """The call's arguments as call text, or None when one is not a plain literal."""
    code, local = frame.f_code, frame.f_locals
    names = code.co_varnames
    count, kwonly = code.co_argcount, code.co_kwonlyargcount
    if any(name not in local for name in names[: count + kwonly]):
        return None
    parts = [local[n] for n in names[:count]]
    keywords = {n: local[n] for n in names[count: count + kwonly]}
    index = count + kwonly
    if code.co_flags & inspect.CO_VARARGS:
        parts += list(local.get(names[index], ()))
        index += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        keywords.update(local.get(names[index], {}))
    if not all(plain(v) for v in parts) or not all(k.isidentifier() and plain(v) for k, v in keywords.items()):
        return None
    text = ", ".join([repr(v) for v in parts] + [f"{k}={v!r}" for k, v in keywords.items()])
    return text if len(text) <= MAX_ARGUMENT_CHARS else None


def profile(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    if not code.co_filename.startswith(ROOT):
        return
    key = (os.path.relpath(code.co_filename, os.getcwd()), code.co_qualname.replace(".<locals>", ""))
    if current[0] is not None:
        covered.setdefault(key, set()).add(current[0])
    seen = calls.setdefault(code, {})
    if len(seen) < MAX_CALLS and frame.f_lasti <= 0:
        text = arguments(frame)
        if text is not None:
            seen[text] = None


def exported():
    """code object -> (module, name) for the package's module-level functions, unwrapped."""
    found = {}
    for module_name, module in sorted(sys.modules.items()):
        if module is None or not (module_name == PACKAGE or module_name.startswith(PACKAGE + ".")):
            continue
        for name, value in sorted(vars(module).items()):
            target = inspect.unwrap(value) if callable(value) else None
            if inspect.isfunction(target) and target.__module__ == module_name and name == target.__name__:
                found.setdefault(target.__code__, (module_name, name, inspect.isgeneratorfunction(target)))
    return found


def pytest_sessionstart(session):
    sys.setprofile(profile)


def pytest_runtest_setup(item):
    current[0] = item.nodeid


def pytest_runtest_logreport(report):
    if report.when == "call" or report.failed or report.skipped:
        if report.nodeid not in results or report.failed:
            results[report.nodeid] = report.outcome


def pytest_sessionfinish(session):
    sys.setprofile(None)
    names = exported()
    records = [
        {"module": names[code][0], "name": names[code][1], "generator": names[code][2], "args": list(seen)}
        for code, seen in calls.items() if code in names and seen
    ]
    records.sort(key=lambda r: (r["module"], r["name"]))
    coverage = {}
    for (path, qualname), tests in sorted(covered.items()):
        coverage.setdefault(path, {})[qualname] = sorted(tests)
    passed = sorted(t for t, outcome in results.items() if outcome == "passed")
    with open(OUT, "w") as handle:
        json.dump({"passed": passed, "coverage": coverage, "calls": records}, handle)
