"""The self-contained modeling code of a native export: jointrl's own model source, assembled to run without jointrl.

`modeling_files()` starts at jointrl.model.remote_code, follows every jointrl import to the modules it
needs, and returns each one as a flat file of the export directory with those imports made relative
(`from jointrl.model.cache import X` becomes `from .model_cache import X`, the form transformers copies
along with remote code). The export thus always ships the code of the jointrl that wrote it; nothing is
kept in step by hand. Two substitutions keep the files to torch, transformers and safetensors:

- a kernel package (`jointrl.kernels.<op>`) ships as its naive module, the pure-torch ground truth with the
  same functions (the Triton forms need triton and CUDA);
- jointrl.model.config ships as plain Python: ModelConfig keeps its field names, properties and methods,
  copied from its source, without pydantic's validation (config.json was validated when jointrl wrote it).

An import the rewrite cannot express (`import jointrl.x`, names taken from a package) raises ValueError.
"""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ENTRY = "jointrl.model.remote_code"
ENTRY_FILE = "modeling_jointrl.py"
_CONFIG = "jointrl.model.config"
_KERNELS = "jointrl.kernels."

_PLAIN_CONFIG_CLASS = '''class ModelConfig:
    """jointrl's ModelConfig as plain Python, generated for this export: the fields as attributes."""

    model_fields = {fields}

    def __init__(self, **fields):
        missing = [name for name in self.model_fields if name not in fields]
        unknown = sorted(set(fields) - set(self.model_fields))
        if missing or unknown:
            raise ValueError(f"ModelConfig fields missing: {{missing}}, unknown: {{unknown}}")
        self.__dict__.update(fields)

'''


def modeling_files() -> dict[str, str]:
    """File name -> source of every file the export directory needs for its remote code."""
    files: dict[str, str] = {}
    todo, seen = [ENTRY], {ENTRY}
    while todo:
        module = todo.pop()
        source = _source_path(module).read_text()
        if module == _CONFIG:
            source = plain_config(source)
        text, needed = _relative_imports(module, source)
        files[file_name(module)] = text
        for dep in needed:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return dict(sorted(files.items()))


def file_name(module: str) -> str:
    """The flat file a module ships as: jointrl.model.cache -> model_cache.py, jointrl.kernels.kda.naive -> kernels_kda.py."""
    if module == ENTRY:
        return ENTRY_FILE
    parts = module.split(".")[1:]
    if parts[-1] == "naive":
        parts.pop()
    return "_".join(parts) + ".py"


def _shipped(module: str) -> str:
    """The module whose source ships for an import from `module`: a kernel package ships its naive form."""
    if module.startswith(_KERNELS) and module.count(".") == 2:
        return module + ".naive"
    return module


def _source_path(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"cannot find the source of {module}")
    return Path(spec.origin)


def _relative_imports(module: str, source: str) -> tuple[str, list[str]]:
    """source with every jointrl import made relative to its flat file, and the modules it imports."""
    lines = source.splitlines(keepends=True)
    edits, needed = [], []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "jointrl" for a in node.names):
            raise ValueError(f"{module}, line {node.lineno}: `import jointrl...` cannot ship; use `from jointrl.x import name`")
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "jointrl"):
            continue
        target = _shipped(node.module)
        if _source_path(target).name == "__init__.py":
            raise ValueError(f"{module}, line {node.lineno}: names from package {node.module} cannot ship; import its module")
        names = ", ".join(a.name if a.asname is None else f"{a.name} as {a.asname}" for a in node.names)
        indent = lines[node.lineno - 1][: node.col_offset]
        edits.append((node.lineno, node.end_lineno, f"{indent}from .{file_name(target)[:-3]} import {names}\n"))
        needed.append(target)
    # Bottom-up, so earlier line numbers stay valid.
    for start, end, text in sorted(edits, reverse=True):
        lines[start - 1 : end] = [text]
    return "".join(lines), needed


def plain_config(source: str) -> str:
    """jointrl/model/config.py without pydantic: ModelConfig holds its fields plainly and keeps every other method."""
    lines = source.splitlines(keepends=True)
    out = ['"""jointrl.model.config for a native export: ModelConfig without pydantic (generated, do not edit)."""\n']
    for node in ast.parse(source).body:
        if _is_docstring(node) or (isinstance(node, ast.ImportFrom) and node.module == "pydantic"):
            continue
        if isinstance(node, ast.ClassDef) and node.name == "ModelConfig":
            fields = tuple(stmt.target.id for stmt in node.body if isinstance(stmt, ast.AnnAssign))
            methods = [
                _segment(lines, stmt)
                for stmt in node.body
                if isinstance(stmt, ast.FunctionDef) and not _is_validator(stmt)
            ]
            out.append(_PLAIN_CONFIG_CLASS.format(fields=repr(fields)) + "\n".join(methods))
        else:
            out.append(_segment(lines, node))
    return "\n\n".join(part.rstrip("\n") for part in out) + "\n"


def _segment(lines: list[str], node: ast.stmt) -> str:
    """The source lines of a statement, decorators included."""
    start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
    return "".join(lines[start - 1 : node.end_lineno])


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_validator(node: ast.FunctionDef) -> bool:
    """pydantic's field_validator / model_validator hooks, which the plain class has no use for."""
    for decorator in node.decorator_list:
        func = decorator.func if isinstance(decorator, ast.Call) else decorator
        if getattr(func, "id", "").endswith("validator"):
            return True
    return False
