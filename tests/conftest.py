"""Test-wide settings: offline tracking, interpreted Triton, CPU DeepSpeed, fp32, fixed seeds, one Ray session."""
import os
import random
import sys
import types

# Set before anything imports triton, wandb or deepspeed: they read these at import time.
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _repository_root_off_the_path() -> None:
    """`python -m pytest` puts the repository root first on sys.path, which makes our top-level folders
    importable under bare names: `kernels/` then shadows Hugging Face's `kernels`, which transformers
    imports. Take the root off and reach the test helpers (`tests.envs...`) through a `tests` package
    rooted at this folder instead."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != root]
    package = types.ModuleType("tests")
    package.__path__ = [here]
    sys.modules.setdefault("tests", package)


_repository_root_off_the_path()

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

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield ray
    ray.shutdown()
