"""A script under benchmarks/ loaded as a module for its tests (benchmarks/ is no package)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_benchmark(name: str) -> ModuleType:
    """benchmarks/<name>.py, executed afresh as the module `<name>_under_test`."""
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: a dataclass in the script looks its module up by name while it is defined.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
