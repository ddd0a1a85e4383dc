"""The supervised cold start of a recipe — tokenizer, demonstrations, SFT, checkpoint."""
from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from itertools import chain
from pathlib import Path
from typing import Callable

import torch
from rich.console import Console

from jointrl.model.chat import render_text
from jointrl.model.checkpoint import save_pretrained
from jointrl.model.pretrained import check_vocab, load_pretrained, load_tokenizer
from jointrl.model.hf_tokenizer import HFTokenizer
from jointrl.model.tokenizer import JointTokenizer, train_tokenizer
from jointrl.model.tokenizer_corpus import default_corpus
from jointrl.model.transformer import Transformer
from jointrl.rl.config.run import RunConfig
from jointrl.rl.demo_check import CopyCheck, check_demos, check_line, check_pairs, print_checks
from jointrl.rl.demos import collect_demos, demo_misfits, mix_env_ids
from jointrl.rl.drill import (ARROW, as_sft_batch, drill_batches, encode_pairs, read_messages, train_drill,
                              train_spans)
from jointrl.rl.progress import Progress
from jointrl.rl.redraw import redraw
from jointrl.rl.rollout.tiers import TierSelector
from jointrl.rl.sft import Conversation, SFTBatch, encode, read_conversations, sft_steps, train_sft
from jointrl.rl.tracking import SFT_METRICS_FILE, Tracker, claim_run_dir, print_places

COPY_CHECK_FILE = "copy_check.json"  # in the run directory


@dataclass
class ColdStart:
    """What the cold start produced."""

    model: Transformer
    tokenizer: JointTokenizer | HFTokenizer
    checkpoint: Path
    env_ids: list[str]
    demos: int
    losses: list[float]


def demo_counts(cfg: RunConfig) -> dict[str, int]:
    """SFT demonstrations per env id of the mix: its first matching entry's `demos`, else trainer.sft.demos_per_env."""
    counts: dict[str, int] = {}
    for entry in cfg.envs.mix:
        for env_id in mix_env_ids([entry.glob]):
            counts.setdefault(env_id, cfg.trainer.sft.demos_per_env if entry.demos is None else entry.demos)
    return counts


def demo_cache_dir(cfg: RunConfig) -> Path | None:
    """Where played demonstrations are kept between runs (trainer.sft.demo_cache), if anywhere."""
    return Path(cfg.trainer.sft.demo_cache) if cfg.trainer.sft.demo_cache else None


def sft_data(cfg: RunConfig, console: Console, counts: dict[str, int]) -> tuple[list[Conversation],
                                                                              JointTokenizer | HFTokenizer]:
    """The cold start's demonstrations (each env id's `counts` train seeds from the first, then trainer.sft.jsonl)
    and tokenizer."""
    sft = cfg.trainer.sft
    start = time.perf_counter()
    first = cfg.envs.train_seeds.start
    tiers = TierSelector.from_config(cfg.rollout.tier_selection)
    demos: list[Conversation] = []
    for env_id, count in counts.items():
        demos += collect_demos([env_id], list(range(first, first + count)), tiers, demo_cache_dir(cfg))
    for path in sft.jsonl:
        demos += read_conversations(path)
    if not demos:
        raise ValueError("the cold start has no demonstrations: raise trainer.sft.demos_per_env or give trainer.sft.jsonl")
    console.print(f"{len(demos)} demonstrations from {len(counts)} environments in {time.perf_counter() - start:.1f}s")

    if cfg.tokenizer.path or cfg.pretrained:
        # jointrl's or an imported checkpoint's own (its chat template); a pretrained model's ids are its tokenizer's.
        tokenizer = load_tokenizer(cfg.tokenizer.path or cfg.pretrained)
    else:
        start = time.perf_counter()
        # Environment text joins the default corpus, so tool output and prompts tokenise compactly.
        texts = chain(default_corpus(cfg.tokenizer.seed, n_chats=cfg.tokenizer.n_samples),
                      (render_text(d.messages, d.tools, d.tier) for d in demos))
        tokenizer = train_tokenizer(texts, cfg.model.vocab_size)
        console.print(f"tokenizer: {tokenizer.vocab_size} tokens, trained in {time.perf_counter() - start:.1f}s")
    check_vocab(tokenizer, cfg.model.vocab_size, cfg.tokenizer.path or cfg.pretrained or "the trained tokenizer")
    return demos, tokenizer


def cold_start(cfg: RunConfig, console: Console, *, overwrite: bool = False) -> ColdStart:
    """Train the tokenizer, play the mix's demonstrations, fine-tune a fresh model on them, save it.

    A run directory whose SFT checkpoint, metrics or copy check exist is refused unless overwrite, which deletes them.
    """
    run_dir = Path(cfg.tracking.run_dir)
    claim_run_dir(run_dir, [checkpoint_dir(cfg) / "sft", run_dir / SFT_METRICS_FILE, run_dir / COPY_CHECK_FILE],
                  stage="sft", overwrite=overwrite)
    torch.manual_seed(cfg.trainer.seed)
    sft = cfg.trainer.sft
    counts = demo_counts(cfg)
    env_ids = list(counts)
    first = cfg.envs.train_seeds.start
    # After the SFT demos' seeds and the drill's: demos neither stage trains on. Played first, so that a bad range
    # fails before the training does.
    check = check_set(cfg, env_ids, first + max(counts.values()) + sft.drill_demos_per_env) if sft.check_demos else None
    demos, tokenizer = sft_data(cfg, console, counts)

    for line in demo_misfits(tokenizer, demos, cfg.rollout, cfg.model.max_seq_len):
        console.print(f"[yellow]warning[/] {line}", highlight=False)

    model = load_pretrained(cfg.pretrained, cfg.model) if cfg.pretrained else Transformer(cfg.model)
    examples = encode(tokenizer, demos, sft.max_len)
    if not examples:
        raise ValueError(
            f"none of the {len(demos)} demonstrations has an assistant token within trainer.sft.max_len={sft.max_len} "
            "tokens: raise trainer.sft.max_len"
        )
    cut = sum(len(tokenizer.render(d.messages, d.tools, d.tier)) > sft.max_len + 1 for d in demos)
    console.print(f"{len(examples)} training sequences ({cut} cut at {sft.max_len} tokens)")

    if sft.span_steps:
        span_stage(cfg, model, tokenizer, demos, console)
    drill_checks: list[dict] = []
    pairs = None
    if sft.drill_steps or sft.drill_in_sft:
        # Drill seeds come after every env id's SFT seeds, so no drill pair repeats an SFT demonstration.
        pairs = drill_pairs_of(cfg, tokenizer, demos, env_ids, first + max(counts.values()), console)
    if sft.drill_steps:
        drill_checks = copy_drill(cfg, model, tokenizer, pairs, console, check)

    start = time.perf_counter()
    tracker = Tracker(cfg, run_dir, stage="sft", console=console)
    steps = sft_steps(len(examples), sft.batch_size, sft.epochs)
    try:
        with Progress(console, "SFT", steps) as progress:
            def log(step: int, metrics: dict[str, float]) -> None:
                tracker.log(step, {f"sft/{name}": value for name, value in metrics.items()})
                progress.advance(info=f"loss {metrics['loss']:.3f}")

            # A seed of its own: the drill's batches during SFT are not the drill stage's batches over again.
            extra = drill_sft_batches(cfg, pairs, tokenizer.pad_id, cfg.trainer.seed + 1) if sft.drill_in_sft else None
            losses = train_sft(model, examples, epochs=sft.epochs, lr=sft.lr, batch_size=sft.batch_size,
                               pad_id=tokenizer.pad_id, seed=cfg.trainer.seed, group_by_length=sft.group_by_length,
                               share_openings=sft.share_openings, log=log, extra=extra)
    finally:
        tracker.finish()
    tail = losses[-5:]
    console.print(f"{len(losses)} steps in {time.perf_counter() - start:.0f}s: loss {losses[0]:.3f} -> "
                  f"{sum(tail) / len(tail):.3f} (mean of the last {len(tail)})")
    checkpoint = save_pretrained(model, checkpoint_dir(cfg) / "sft", tokenizer=tokenizer)
    if check is not None:
        copy_check(cfg, model, tokenizer, check, drill_checks, console)
    print_places(console, "SFT finished:", [("checkpoint", str(checkpoint)), *tracker.places()])
    return ColdStart(model, tokenizer, checkpoint, env_ids, len(demos), losses)


@dataclass
class DrillPairs:
    """The drill's encoded (message -> reply) pairs."""

    encoded: list[list[int]]
    starts: list[int] | None  # where each pair's reply begins (drill_loss reply); None counts every token
    envs: list[list[int]] | None  # each env id's indices into encoded (drill_balance env); None draws pairs uniformly


def drill_pairs_of(cfg: RunConfig, tokenizer: JointTokenizer | HFTokenizer, demos: list[Conversation],
                   env_ids: list[str], drill_seed: int, console: Console) -> DrillPairs:
    """The drill's pairs: those of the SFT demos and of drill_demos_per_env more per env id from drill_seed."""
    sft = cfg.trainer.sft
    start = time.perf_counter()
    # A text pair holds no tier token, so these demos need no tier of the rollout's; a chat pair renders the env's
    # default tier, which agents_cpu also plays.
    extra = collect_demos(env_ids, list(range(drill_seed, drill_seed + sft.drill_demos_per_env)),
                          cache=demo_cache_dir(cfg))
    encoded: list[list[int]] = []
    starts: list[int] | None = [] if sft.drill_loss == "reply" else None
    by_env: dict[str | None, list[int]] = {}  # env id -> indices of its pairs in encoded
    played = conversations = demos + extra
    if sft.drill_redraw:
        conversations = redraw(played, sft.drill_redraw, random.Random(cfg.trainer.seed), sft.drill_redraw_kinds)
        changed = sum(a is not b for a, b in zip(conversations, played))
        console.print(f"copy drill: slots redrawn in {changed} of {len(conversations)} demonstrations")
    for conversation in conversations:
        for ids, reply in encode_pairs(tokenizer, [conversation], sft.drill_turns, sft.drill_format,
                                       with_starts=starts is not None):
            by_env.setdefault(conversation.source, []).append(len(encoded))
            encoded.append(ids)
            if starts is not None:
                starts.append(reply)
    console.print(f"copy drill: {len(encoded)} (message -> reply) pairs of {len(by_env)} env id(s) from "
                  f"{len(demos) + len(extra)} demonstrations in {time.perf_counter() - start:.1f}s")
    return DrillPairs(encoded, starts, list(by_env.values()) if sft.drill_balance == "env" else None)


def drill_sft_batches(cfg: RunConfig, pairs: DrillPairs, pad_id: int, seed: int) -> Callable[[], SFTBatch]:
    """An endless source of the drill's packed batches, as SFT batches (for trainer.sft.drill_in_sft)."""
    sft = cfg.trainer.sft
    source = drill_batches(pairs.encoded, pack=sft.drill_pack, batch_size=sft.batch_size,
                           max_len=sft.drill_max_len or sft.max_len, pad_id=pad_id, seed=seed, envs=pairs.envs,
                           starts=pairs.starts)
    return lambda: as_sft_batch(*source())


def copy_drill(cfg: RunConfig, model: Transformer, tokenizer: JointTokenizer | HFTokenizer, pairs: DrillPairs,
               console: Console, check: dict[str, list[Conversation]] | None = None) -> list[dict]:
    """The copy drill before SFT, on `pairs`; every trainer.sft.drill_check_every steps, the copy check on the
    pairs of `check` (each {"step", "checks"})."""
    sft = cfg.trainer.sft
    max_len = sft.drill_max_len or sft.max_len
    checked: list[dict] = []
    watched = (check_pairs_of(tokenizer, check, max_len, sft.drill_turns, sft.drill_format)
               if check and sft.drill_check_every else None)
    start = time.perf_counter()
    with Progress(console, "drill", sft.drill_steps) as progress:
        def log(step: int, loss: float) -> None:
            progress.advance(info=f"loss {loss:.3f}")
            if watched is not None and (step % sft.drill_check_every == 0 or step == sft.drill_steps):
                # No gradient and no random draw: the drill's weights come out the same with or without it.
                checks = check_pairs(model, watched)
                console.print(f"drill pairs, {check_line(step, checks)}", highlight=False)
                checked.append({"step": step, "checks": [asdict(c) for c in checks]})

        losses = train_drill(model, pairs.encoded, steps=sft.drill_steps, lr=sft.lr, batch_size=sft.batch_size,
                             pack=sft.drill_pack, max_len=max_len, pad_id=tokenizer.pad_id, seed=cfg.trainer.seed,
                             log=log, envs=pairs.envs, starts=pairs.starts)
    console.print(f"copy drill: {len(losses)} steps in {time.perf_counter() - start:.0f}s, loss {losses[0]:.3f} -> "
                  f"{losses[-1]:.3f}")
    return checked


def check_pairs_of(tokenizer: JointTokenizer | HFTokenizer, check: dict[str, list[Conversation]], max_len: int,
                   turns: str, form: str = "text") -> dict[str, list[tuple[list[int], int]]]:
    """Each env id's drill pairs of its check demos, as the drill encodes them: (ids cut to max_len + 1, reply start)."""
    return {env_id: [(ids[: max_len + 1], start) for ids, start in encode_pairs(tokenizer, conversations, turns, form)]
            for env_id, conversations in check.items()}


def check_set(cfg: RunConfig, env_ids: list[str], check_seed: int) -> dict[str, list[Conversation]]:
    """The copy check's demos: trainer.sft.check_demos train seeds per env id from check_seed, as SFT renders them."""
    sft = cfg.trainer.sft
    stop = check_seed + sft.check_demos
    if stop > cfg.envs.train_seeds.stop:
        raise ValueError(f"trainer.sft.check_demos={sft.check_demos}: its seeds {check_seed}..{stop} run past "
                         f"envs.train_seeds.stop={cfg.envs.train_seeds.stop}; lower it or raise the stop")
    tiers = TierSelector.from_config(cfg.rollout.tier_selection)
    return {env_id: collect_demos([env_id], list(range(check_seed, stop)), tiers, demo_cache_dir(cfg))
            for env_id in env_ids}


def copy_check(cfg: RunConfig, model: Transformer, tokenizer: JointTokenizer | HFTokenizer,
               check: dict[str, list[Conversation]], drill_checks: list[dict], console: Console) -> list[CopyCheck]:
    """The copy check of the finished cold start, written with the drill's checks to the run's COPY_CHECK_FILE."""
    start = time.perf_counter()
    # Whole demos, as a rollout sees them, up to the model's context (SFT may cut them shorter).
    checks = check_demos(model, tokenizer, check, cfg.model.max_seq_len - 1)
    print_checks(checks, console, "copy check: unseen demonstrations under teacher forcing")
    path = Path(cfg.tracking.run_dir) / COPY_CHECK_FILE
    path.write_text(json.dumps({"sft": [asdict(c) for c in checks], "drill": drill_checks}, indent=1))
    console.print(f"copy check in {time.perf_counter() - start:.0f}s: {path}")
    return checks


def span_stage(cfg: RunConfig, model: Transformer, tokenizer: JointTokenizer | HFTokenizer,
               demos: list[Conversation], console: Console) -> list[float]:
    """The span-copy stage before the drill, on the messages of the SFT demos, in sequences of the drill's length."""
    sft = cfg.trainer.sft
    messages = [tokenizer.encode(text) for text in read_messages(demos)]
    start = time.perf_counter()
    with Progress(console, "spans", sft.span_steps) as progress:
        losses = train_spans(model, messages, tokenizer.encode(ARROW), tokenizer.encode("\n"), steps=sft.span_steps,
                             lr=sft.lr, batch_size=sft.batch_size, max_len=sft.drill_max_len or sft.max_len,
                             seed=cfg.trainer.seed, log=lambda step, loss: progress.advance(info=f"loss {loss:.3f}"))
    console.print(f"span copies: {len(messages)} messages, {len(losses)} steps in {time.perf_counter() - start:.0f}s, "
                  f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    return losses


def checkpoint_dir(cfg: RunConfig) -> Path:
    """Where a run's checkpoints go."""
    return Path(cfg.checkpoint.dir) if cfg.checkpoint.dir else Path(cfg.tracking.run_dir) / "checkpoints"
