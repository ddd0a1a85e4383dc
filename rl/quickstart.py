"""`jointrl quickstart`: the whole pipeline that exists today, end to end on CPU in about a minute.

recipe → tokenizer trained on project text → model built from the recipe's preset → supervised cold
start on agent conversations rendered with the chat template → checkpoint → reload → sample a reply under
the recipe's thinking tier → parse it back into a message. Until environments land, the conversations
are the synthetic agent chats the tokenizer corpus also uses; the RL stage follows once it exists.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from rich.console import Console

from jointrl.model.checkpoint import from_pretrained, save_pretrained
from jointrl.model.generate import SamplingParams, generate
from jointrl.model.info import model_info
from jointrl.model.tokenizer import JointTokenizer, train_tokenizer
from jointrl.model.tokenizer_corpus import default_corpus, synthetic_chat
from jointrl.model.transformer import Transformer
from jointrl.rl.recipe import load_recipe
from jointrl.rl.sft import Conversation, encode, train_sft


def run(args: argparse.Namespace) -> int:
    """Run the quickstart job and print what each stage produced."""
    console = Console(soft_wrap=True)
    cfg = load_recipe(args.recipe, args.overrides)
    run_dir = Path(cfg.tracking.run_dir)
    torch.manual_seed(cfg.trainer.seed)
    console.rule(f"recipe {args.recipe}")
    mix = ", ".join(f"{m.glob} x{m.weight:g}" for m in cfg.envs.mix)
    console.print(f"model {cfg.model.name} | envs {mix} | algorithm {cfg.algorithm.name} | run dir {run_dir}")

    console.rule("tokenizer")
    start = time.perf_counter()
    tokenizer = train_tokenizer(default_corpus(cfg.tokenizer.seed, n_chats=cfg.tokenizer.n_samples), cfg.model.vocab_size)
    console.print(f"byte-level BPE, {tokenizer.vocab_size} tokens, trained in {time.perf_counter() - start:.1f}s")

    console.rule("model")
    info = model_info(cfg.model, context=cfg.model.max_seq_len)
    console.print(
        f"{cfg.model.layer_pattern}: {info.total_params / 1e6:.2f}M parameters, "
        f"{info.active_params / 1e6:.2f}M active per token, {info.moe_layers} MoE layers"
    )
    model = Transformer(cfg.model)

    console.rule("supervised cold start")
    seed = cfg.trainer.seed * 1_000_003
    conversations = [Conversation(*synthetic_chat(seed + i)) for i in range(args.conversations + 1)]
    held_out = conversations.pop()
    examples = encode(tokenizer, conversations, args.max_len)
    sft = cfg.trainer.sft

    def log(step: int, loss: float) -> None:
        if step == 1 or step % 10 == 0:
            console.print(f"step {step:4d}  loss {loss:.3f}")

    start = time.perf_counter()
    losses = train_sft(
        model, examples, epochs=sft.epochs, lr=sft.lr, batch_size=sft.batch_size, pad_id=tokenizer.pad_id,
        seed=cfg.trainer.seed, log=log,
    )
    console.print(
        f"{len(losses)} steps in {time.perf_counter() - start:.0f}s: loss {losses[0]:.3f} -> "
        f"{sum(losses[-5:]) / len(losses[-5:]):.3f} (mean of the last 5)"
    )

    console.rule("checkpoint")
    ckpt = save_pretrained(model, run_dir / "checkpoints" / "sft", tokenizer=tokenizer)
    reloaded = from_pretrained(ckpt)
    JointTokenizer.load(ckpt)
    console.print(f"saved and reloaded {ckpt}")

    console.rule("sample")
    # Prompt: the held-out conversation up to its first assistant turn.
    first = next(i for i, m in enumerate(held_out.messages) if m["role"] == "assistant")
    tier = held_out.tier or "low"
    prompt = tokenizer.render(held_out.messages[:first], held_out.tools, tier, add_generation_prompt=True)
    budget = cfg.rollout.tiers.low
    params = SamplingParams(temperature=cfg.rollout.temperature, max_new_tokens=budget, stop_ids=(tokenizer.eot_id,))
    gen = generate(reloaded, [prompt], params, generator=torch.Generator().manual_seed(cfg.trainer.seed))[0]
    message = tokenizer.parse_assistant(gen.tokens)
    console.print(f"tier {tier}, {len(gen.tokens)} tokens ({gen.finish_reason}), parsed message:")
    console.print_json(json.dumps(message, ensure_ascii=False))
    return 0
