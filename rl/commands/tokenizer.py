"""The `jointrl tokenizer ...` commands: train the byte-level BPE on project-generated text."""
from __future__ import annotations

import argparse
import time


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="directory to write tokenizer.json and tokenizer_config.json")
    parser.add_argument("--vocab-size", type=int, default=4096, help="vocabulary size (the model's vocab_size)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic part of the corpus")
    parser.add_argument("--samples", type=int, default=2000, help="synthetic chats in the corpus")


def run_train(args: argparse.Namespace) -> int:
    """Train the byte-level BPE on project-generated text and save it."""
    from jointrl.model.tokenizer import train_tokenizer
    from jointrl.model.tokenizer_corpus import default_corpus

    start = time.perf_counter()
    tokenizer = train_tokenizer(default_corpus(args.seed, n_chats=args.samples), args.vocab_size)
    tokenizer.save(args.out)
    print(
        f"trained a {tokenizer.vocab_size}-token tokenizer ({tokenizer.n_reserved} reserved) "
        f"in {time.perf_counter() - start:.1f}s -> {args.out}"
    )
    return 0
