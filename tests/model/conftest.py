"""Fixtures the export and import tests share."""
import pytest
import torch

from jointrl.model.presets import PRESETS
from jointrl.model.tokenizer import train_tokenizer


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread: the tensors are tiny, and on a busy 2-core machine two threads were 15x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tokenizer():
    """A byte-level BPE for the debug preset's vocabulary."""
    return train_tokenizer(["def f(x): return x + 1\n"] * 4, PRESETS["debug"].vocab_size)
