"""benchmarks/list_copy.py: its examples restate the message's list, and its accuracy counts digit tokens only."""
from __future__ import annotations

import ast
import random
import re
from types import SimpleNamespace

import pytest
import torch

from jointrl.model.tokenizer import train_tokenizer
from tests.benchmarks.bench_module import load_benchmark


def test_the_reply_is_the_messages_list_as_python():
    bench = load_benchmark("list_copy")
    for seed in range(50):
        message, reply = bench.list_example(random.Random(seed))
        shown = ast.literal_eval("[" + re.search(r"are (.*) in order", message).group(1) + "]")
        written = ast.literal_eval(reply.removeprefix("points = "))
        assert written == shown
        assert 3 <= len(shown) <= 6 and len({len(item) for item in shown}) == 1 and len(shown[0]) in (2, 3)
        assert all(1 <= value <= 199 for item in shown for value in item)


class _Oracle(torch.nn.Module):
    """Predicts each row's true next token, except at the positions listed in wrong (row, position) pairs."""

    def __init__(self, rows, wrong, vocab):
        super().__init__()
        self.rows, self.wrong, self.vocab = rows, wrong, vocab

    def forward(self, tokens):
        row = next(i for i, (head, reply) in enumerate(self.rows) if (head + reply)[:-1] == tokens[0].tolist())
        ids = self.rows[row][0] + self.rows[row][1]
        logits = torch.zeros(1, len(ids) - 1, self.vocab)
        for t in range(len(ids) - 1):
            target = ids[t + 1]
            logits[0, t, (target + 1) % self.vocab if (row, t + 1) in self.wrong else target] = 1.0
        return SimpleNamespace(logits=logits)


def test_digit_accuracy_counts_the_replys_digit_tokens_and_whole_rows():
    bench = load_benchmark("list_copy")
    tokenizer = train_tokenizer([" ".join(bench.list_example(random.Random(s))) for s in range(200)], 400)
    rows = [bench.encode_example(tokenizer, *bench.list_example(random.Random(s))) for s in (1, 2)]
    digit_positions = [[len(head) + i for i, t in enumerate(reply) if re.search(r"\d", tokenizer.decode([t]))]
                       for head, reply in rows]
    total = sum(map(len, digit_positions))
    assert bench.digit_accuracy(_Oracle(rows, set(), tokenizer.vocab_size), tokenizer, rows) == (1.0, 1.0)
    # One digit token of row 0 wrong, and the first token of row 1's reply ("points"): only the first counts.
    wrong = {(0, digit_positions[0][2]), (1, len(rows[1][0]))}
    digits, whole = bench.digit_accuracy(_Oracle(rows, wrong, tokenizer.vocab_size), tokenizer, rows)
    assert digits == pytest.approx((total - 1) / total)
    assert whole == 0.5


def test_a_profiles_vertices_alternate_which_coordinate_changes():
    bench = load_benchmark("list_copy")
    for seed in range(50):
        message, reply = bench.profile_example(random.Random(seed))
        vertices = ast.literal_eval(reply.removeprefix("points = "))
        assert message == f"The profile's vertices are {reply.removeprefix('points = [')[:-1]} in order."
        assert 4 <= len(vertices) <= 8
        for i, (before, after) in enumerate(zip(vertices, vertices[1:])):
            assert after[1 - i % 2] == before[1 - i % 2]  # x moves first, then y, then x...
