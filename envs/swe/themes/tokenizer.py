"""The tokenizer family: tests for the expression lexer, word and sentence splitting, vocabularies, RPN, merges."""
from __future__ import annotations

import random

from jointrl.envs.swe.case import Case, call, expr, raises, script
from jointrl.envs.swe.family import Family, Module

NAMES = ("x", "y", "rate", "total", "n_2", "alpha", "k")
WORDS = ("the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "sun", "low", "lower", "newest", "wide")


def lexer_cases(rng: random.Random) -> list[Case]:
    a, b = rng.sample(NAMES, 2)
    number = f"{rng.randint(1, 99)}.{rng.randint(0, 9)}"
    op = rng.choice(("<=", ">=", "==", "!="))
    return [
        call("tokenize", f"{a} + {number}*({b} - {rng.randint(1, 9)})"),
        call("tokenize", f"{a}{op}{rng.randint(1, 9)}"),
        call("tokenize", f"f({a}, .5) ^ 2"),
        call("tokenize", "1.2.3"),
        raises("LexError", "tokenize", f"{a} $ {b}"),
        raises("ValueError", "tokenize", "#"),
        call("names", f"{a} * {b} + {a} / k"),
        call("balanced", f"(({a} + 1) * ({b}))"),
        call("balanced", f"({a} + 1))("),
        call("balanced", f"(({a})"),
    ]


def words_cases(rng: random.Random) -> list[Case]:
    w = rng.sample(WORDS, 4)
    tokens = [rng.choice(w[:3]) for _ in range(8)]
    return [
        call("split_words", f"{w[0].capitalize()} don't {w[1]}-{w[2]}, 'quoted' {w[3]}-"),
        call("split_words", f"{w[0]}--{w[1]} 42x"),
        call("sentences", f"{w[0].capitalize()} {w[1]}. Dr. {w[2].capitalize()} came! Why? {w[3]}"),
        call("sentences", f"Version 1.5 is out. {w[0].capitalize()} e.g. this."),
        call("sentences", ""),
        call("ngrams", tokens, rng.randint(2, 3)),
        call("ngrams", tokens[:2], 3),
        call("ngrams", tokens[:3], 1),
        raises("ValueError", "ngrams", tokens, 0),
        call("ngram_counts", tokens, 2),
    ]


def vocab_cases(rng: random.Random) -> list[Case]:
    corpus = [rng.choice(WORDS[:6]) for _ in range(15)]
    build = [f"vocab = Vocabulary({corpus!r})"]
    small = [f"vocab = Vocabulary({corpus!r}, max_size=3)"]
    return [
        script("itos", build, "vocab.itos"),
        script("itos", small, "vocab.itos"),
        script("itos", [f"vocab = Vocabulary({corpus!r}, min_count=3)"], "vocab.itos"),
        script("len", small, "len(vocab)"),
        script("encode", build, f"vocab.encode({corpus[:4] + ['zebra']!r})"),
        script("decode", build, "vocab.decode([0, 1, 2])"),
        script("decode_rejects", small, "vocab.decode([3])", raises="IndexError"),
        script("decode_rejects", small, "vocab.decode([-1])", raises="IndexError"),
        script("coverage", small, f"vocab.coverage({corpus[:6]!r})"),
        script("coverage", small, "vocab.coverage([])"),
        script("coverage", small, "vocab.coverage(['<unk>'])"),
    ]


def rpn_cases(rng: random.Random) -> list[Case]:
    a, b, c = rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 9)
    return [
        call("to_rpn", f"{a} + {b} * {c}"),
        call("to_rpn", f"({a} + {b}) * {c}"),
        call("to_rpn", f"{a} - {b} - {c}"),
        call("to_rpn", "2 ^ 3 ^ 2"),
        raises("ValueError", "to_rpn", f"({a} + {b}"),
        raises("ValueError", "to_rpn", f"{a} + {b})"),
        raises("ValueError", "to_rpn", f"{a} < {b}"),
        call("evaluate", f"{a} - {b} - {c}"),
        call("evaluate", f"{a * 4} / {b} / 2"),
        call("evaluate", "2 ^ 3 ^ 2"),
        call("evaluate", f"(rate + {a}) * {b}", {"rate": c}),
        raises("KeyError", "evaluate", "rate * 2"),
        raises("ValueError", "evaluate", f"{a} {b}"),
    ]


def bpe_cases(rng: random.Random) -> list[Case]:
    corpus = [rng.choice(("lower", "lowest", "newer", "wider", "low", "new")) for _ in range(8)]
    return [
        call("pair_counts", {("l", "o", "w"): 2, ("o", "w"): rng.randint(1, 3)}),
        call("merge_pair", ("a", "a", "a", "b"), ("a", "a")),
        call("merge_pair", tuple("lowest"), ("w", "e")),
        call("merge_pair", ("x",), ("x", "x")),
        call("learn_merges", corpus, rng.randint(3, 5)),
        call("learn_merges", ["ab", "ab", "ba"], 1),
        call("learn_merges", ["a"], 3),
        expr("apply_merges", f"apply_merges('lowest', learn_merges({corpus!r}, 4))"),
        call("apply_merges", "banana", [("a", "n"), ("an", "a")]),
    ]


FAMILY = Family(
    name="tokenizer",
    topic="the tokenizer",
    package_names=("lexkit", "tokenize_lite", "wordpiece"),
    modules=(
        Module("lexer", lexer_cases),
        Module("words", words_cases),
        Module("vocab", vocab_cases),
        Module("rpn", rpn_cases, requires=("lexer",)),
        Module("bpe", bpe_cases),
    ),
)
