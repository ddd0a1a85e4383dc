"""Test-wide settings: offline tracking, interpreted Triton, CPU DeepSpeed, fp32, fixed seeds, one Ray session."""
import importlib
import os
import random
import sys

# Set before anything imports triton, wandb or deepspeed: they read these at import time.
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _installed_kernels_first() -> None:
    """`python -m pytest` puts the repository root first on sys.path (the `tests.*` helpers, and processes
    spawned from tests, import through it), so our `kernels/` folder is also importable as a bare `kernels`
    and would shadow Hugging Face's `kernels` distribution, which transformers (>= 5.25) imports. Load the
    installed one first, with the root off the path for that import only."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != root]
    try:
        importlib.import_module("kernels")  # the third-party distribution, not jointrl.kernels
    except ImportError:
        pass
    finally:
        sys.path[:] = saved


_installed_kernels_first()

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seed_and_precision():
    """Every test starts from the same seeds in fp32 (bf16 is a GPU path)."""
    random.seed(0)
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray runtime shared by the tests that ask for it (starting one costs seconds)."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield ray
    ray.shutdown()
