"""The package layering of DESIGN.md, read from every import statement of the source tree (function bodies too).

Rules: model/ imports none of rl, envs, rewards; envs/ imports neither rl nor model; rewards/ imports only
the envs types (`jointrl.envs.episode`, `jointrl.envs.base`); kernels/ imports nothing of jointrl but itself; inside rl/,
rollout/ and learner/ never import each other; what runs alone in the sandbox (the CAD kit, the swe
grading harness) imports nothing of jointrl but itself; and no two modules import each other through any chain.
"""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("model", "kernels", "envs", "rewards", "rl")
# Code that runs inside the sandbox on its own, where jointrl is not installed: it imports only itself.
STANDALONE = ("jointrl.envs.cad.kit", "jointrl.envs.swe.harness")
# The only envs modules rewards may read: the text-level episode record and the env contract (tiers, specs).
ENVS_TYPES = ("jointrl.envs.episode", "jointrl.envs.base")


def module_name(root: Path, path: Path) -> str:
    """jointrl.<package>.<...> of a source file; a package's __init__ is the package itself."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["jointrl", *parts])


def source_modules(root: Path) -> dict[str, Path]:
    """Every module of the five packages under root, by dotted name."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            modules[module_name(root, path)] = path
    return modules


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The jointrl modules `name` imports anywhere in its file; `from pkg import x` counts as pkg.x if that is a module."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in known else origin for a in node.names]
        else:
            continue
        found.update(t for t in targets if t == "jointrl" or t.startswith("jointrl."))
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the jointrl modules it imports (edges to names outside the tree are kept: they are violations too)."""
    modules = source_modules(root)
    known = set(modules)
    return {name: imported_modules(name, path, known) for name, path in modules.items()}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def rule_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that breaks a package rule, as 'importer -> imported: rule'."""
    problems = []
    for src, targets in graph.items():
        for dst in sorted(targets):
            rule = None
            standalone = next((s for s in STANDALONE if _within(src, s)), None)
            if standalone and not _within(dst, standalone):
                rule = f"{standalone} runs alone in the sandbox and imports nothing of jointrl but itself"
            elif _within(src, "jointrl.model") and any(_within(dst, f"jointrl.{p}") for p in ("rl", "envs", "rewards")):
                rule = "model/ imports none of rl, envs, rewards"
            elif _within(src, "jointrl.envs") and any(_within(dst, f"jointrl.{p}") for p in ("rl", "model")):
                rule = "envs/ imports neither rl nor model"
            elif _within(src, "jointrl.rewards") and not (_within(dst, "jointrl.rewards") or dst in ENVS_TYPES):
                rule = "rewards/ imports only the envs types"
            elif _within(src, "jointrl.kernels") and not _within(dst, "jointrl.kernels"):
                rule = "kernels/ imports nothing of jointrl"
            elif _within(src, "jointrl.rl.rollout") and _within(dst, "jointrl.rl.learner"):
                rule = "rl/rollout never imports rl/learner"
            elif _within(src, "jointrl.rl.learner") and _within(dst, "jointrl.rl.rollout"):
                rule = "rl/learner never imports rl/rollout"
            if rule:
                problems.append(f"{src} -> {dst}: {rule}")
    return problems


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (or a module importing itself), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(start: str) -> None:
        # Tarjan's algorithm with an explicit stack (the graph is deep enough to matter for recursion).
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1 or node in graph[node]:
                    cycles.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return cycles


def layering_problems(root: Path) -> list[str]:
    """Every rule violation and every cycle of the tree at root, one line each."""
    graph = import_graph(root)
    return rule_violations(graph) + [f"import cycle: {' <-> '.join(c)}" for c in import_cycles(graph)]


def test_the_source_tree_keeps_its_layering():
    assert layering_problems(REPO) == []


def test_the_graph_reads_imports_inside_functions_and_relative_ones(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "__init__.py").write_text("")
    (tmp_path / "model" / "a.py").write_text("def f():\n    from . import b\n    import jointrl.model.c as c\n")
    (tmp_path / "model" / "b.py").write_text("from jointrl.model import c\n")
    (tmp_path / "model" / "c.py").write_text("from jointrl.model.b import thing\n")
    graph = import_graph(tmp_path)
    assert graph["jointrl.model.a"] == {"jointrl.model.b", "jointrl.model.c"}
    assert graph["jointrl.model.b"] == {"jointrl.model.c"}
    assert import_cycles(graph) == [["jointrl.model.b", "jointrl.model.c"]]


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_each_planted_violation_is_reported(tmp_path):
    planted = {
        "model/m.py": ("def late():\n    from jointrl.rl import trainer\n", "jointrl.model.m -> jointrl.rl.trainer"),
        "envs/e.py": ("import jointrl.model.transformer\n", "jointrl.envs.e -> jointrl.model.transformer"),
        "rewards/r.py": ("from jointrl.envs.registry import make\n", "jointrl.rewards.r -> jointrl.envs.registry"),
        "kernels/k.py": ("from jointrl.model import config\n", "jointrl.kernels.k -> jointrl.model"),  # no model/config.py here
        "rl/rollout/w.py": ("from jointrl.rl.learner import group\n", "jointrl.rl.rollout.w -> jointrl.rl.learner.group"),
        "rl/learner/g.py": ("from ..rollout import w\n", "jointrl.rl.learner.g -> jointrl.rl.rollout.w"),
        "envs/cad/kit/csg.py": ("from jointrl.envs.cad import part\n", "jointrl.envs.cad.kit.csg -> jointrl.envs.cad.part"),
    }
    for relative, (text, _) in planted.items():
        _write(tmp_path, relative, text)
    for package in ("model", "envs", "rewards", "kernels", "rl", "rl/rollout", "rl/learner", "envs/cad", "envs/cad/kit"):
        _write(tmp_path, f"{package}/__init__.py", "")
    _write(tmp_path, "envs/registry.py", "")
    _write(tmp_path, "rl/learner/group.py", "")
    _write(tmp_path, "rl/trainer.py", "")
    _write(tmp_path, "envs/episode.py", "")
    _write(tmp_path, "envs/cad/part.py", "")
    _write(tmp_path, "envs/cad/kit/mesh_io.py", "")
    _write(tmp_path, "envs/cad/kit/__init__.py", "from . import mesh_io\n")  # allowed: the kit itself
    _write(tmp_path, "rewards/ok.py", "from jointrl.envs.episode import Episode\n")  # allowed: an envs type
    problems = layering_problems(tmp_path)
    for _, expected in planted.values():
        assert sum(p.startswith(expected + ":") for p in problems) == 1, (expected, problems)
    assert len(problems) == len(planted), problems


def test_a_violation_planted_in_a_copy_of_the_real_tree_fails_the_check(tmp_path):
    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    assert layering_problems(tmp_path) == []
    # A cycle through a function-level import, the kind a lazy import hides from the interpreter.
    with open(tmp_path / "rl" / "config" / "run.py", "a") as f:
        f.write("\n\ndef _late():\n    from jointrl.rl import trainer\n")
    # A learner module reaching into the rollout room.
    with open(tmp_path / "rl" / "learner" / "batch.py", "a") as f:
        f.write("\n\ndef _peek():\n    from jointrl.rl.rollout.engine import Engine\n")
    problems = layering_problems(tmp_path)
    assert "jointrl.rl.learner.batch -> jointrl.rl.rollout.engine: rl/learner never imports rl/rollout" in problems
    cycles = [p for p in problems if p.startswith("import cycle:")]
    assert len(cycles) == 1 and "jointrl.rl.config.run" in cycles[0] and "jointrl.rl.trainer" in cycles[0], problems
    assert len(problems) == 2, problems
