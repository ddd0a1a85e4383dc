"""`jointrl serve` throughput and prefix reuse, through the official openai client, in one run.

    python benchmarks/serve.py [--quick]

1. Requests/s and tokens/s with 1, 8 and 32 concurrent clients, against the same requests sent one at a time
   (each waits for the previous answer). The server batches concurrent requests into one engine step.
2. Prefix reuse: 5-turn conversations (each turn appends a tool result and asks again); seconds of the 5th
   turn with reuse (the earlier turns stay in their engine row) against the same server with reuse off (the
   whole history is prefilled again).

Models: the `tiny` preset with a byte-level tokenizer trained here, served in this process on 127.0.0.1. For
throughput, random weights: a random model seldom samples its end-of-turn token, so each answer runs to
max_tokens. For prefix reuse, the same shape fitted in a few seconds to answer every turn with a short
well-formed message (a row is kept for reuse only when the answer renders back to the tokens sampled, which
random bytes seldom do). Prints the measurements and ratios; asserts no timing.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import random
import statistics
import time

import openai
import torch

from jointrl.model.presets import PRESETS
from jointrl.model.tokenizer import train_tokenizer
from jointrl.model.transformer import Transformer
from jointrl.rl.serve.app import ServedModel, build_app
from jointrl.rl.serve.background import BackgroundServer
from jointrl.rl.serve.scheduler import Scheduler
from jointrl.rl.sft import Conversation, encode, train_sft

NAME = "bench"
BUDGETS = {"low": 8, "high": 16, "max": 32}
WORDS = "alpha beta gamma delta file line count tool result error value list path open read write test".split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def build(max_seq_len: int):
    """A random-weight tiny model and a tokenizer trained on the benchmark's words."""
    rng = random.Random(0)
    tokenizer = train_tokenizer([_text(rng, 40) for _ in range(200)], 512)
    torch.manual_seed(0)
    cfg = PRESETS["tiny"].model_copy(update={"vocab_size": tokenizer.vocab_size, "max_seq_len": max_seq_len})
    return Transformer(cfg).eval(), tokenizer


def fit_short_answers(model, tokenizer) -> None:
    """Teach the model to answer any turn with a short think block and 'done', in place."""
    rng = random.Random(3)
    conversations = []
    for _ in range(64):
        messages = [{"role": "system", "content": "Session."}]
        for _ in range(rng.randint(1, 3)):
            messages += [{"role": "user", "content": _text(rng, rng.randint(5, 40))},
                         {"role": "assistant", "content": "done", "reasoning_content": "ok"}]
        conversations.append(Conversation(messages, None, "low"))
    train_sft(model, encode(tokenizer, conversations, 512), epochs=3, lr=3e-3, batch_size=8, pad_id=tokenizer.pad_id)
    model.eval()


def serve(model, tokenizer, rows: int, reuse: bool = True):
    scheduler = Scheduler(model, tokenizer, max_rows=rows, prefix_reuse=reuse)
    scheduler.start()
    return scheduler, BackgroundServer(build_app(scheduler, ServedModel(NAME, BUDGETS, default_tier="low")))


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=600)


def throughput(url: str, prompts: list[str], clients: int, max_tokens: int) -> tuple[float, float]:
    """(requests/s, completion tokens/s) of sending every prompt through `clients` concurrent clients."""
    def ask(prompt: str) -> int:
        response = _client(url).chat.completions.create(
            model=NAME, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=1.0)
        return response.usage.completion_tokens

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=clients) as pool:
        tokens = sum(pool.map(ask, prompts))
    seconds = time.perf_counter() - started
    return len(prompts) / seconds, tokens / seconds


def fifth_turn_seconds(url: str, conversations: int, result_words: int, max_tokens: int) -> float:
    """Median seconds of the 5th turn of 5-turn conversations played one after another."""
    rng = random.Random(1)
    tools = [{"type": "function", "function": {"name": "run", "description": "run a command",
                                               "parameters": {"type": "object", "properties": {}}}}]
    client, times = _client(url), []
    for c in range(conversations):
        messages = [{"role": "system", "content": f"Session {c}."}, {"role": "user", "content": _text(rng, 30)}]
        for turn in range(5):
            started = time.perf_counter()
            response = client.chat.completions.create(model=NAME, messages=messages, tools=tools,
                                                      max_tokens=max_tokens, temperature=0)
            elapsed = time.perf_counter() - started
            message = response.choices[0].message
            # Whatever the model said, the agent goes on with a tool result as the next message.
            messages.append({"role": "assistant", "content": message.content or "",
                             **({"reasoning_content": message.reasoning_content}
                                if getattr(message, "reasoning_content", None) is not None else {})})
            messages.append({"role": "user", "content": "Result: " + _text(rng, result_words)})
        times.append(elapsed)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    requests, max_tokens = (32, 16) if args.quick else (96, 32)
    model, tokenizer = build(max_seq_len=4096)
    rng = random.Random(2)
    prompts = [_text(rng, 20) for _ in range(requests)]

    print(f"1. throughput: {requests} requests x {max_tokens} completion tokens, tiny preset (random weights)")
    scheduler, web = serve(model, tokenizer, rows=32)
    with web:
        throughput(web.url, prompts[:4], 4, max_tokens)  # warm-up
        base_rps, base_tps = throughput(web.url, prompts, 1, max_tokens)
        print(f"   sequential          {base_rps:7.2f} req/s {base_tps:8.1f} tok/s")
        for clients in (1, 8, 32):
            rps, tps = throughput(web.url, prompts, clients, max_tokens)
            print(f"   {clients:2d} concurrent clients {rps:7.2f} req/s {tps:8.1f} tok/s   {rps / base_rps:5.2f}x sequential")
    scheduler.stop()

    conversations, result_words = (2, 150) if args.quick else (4, 300)
    print(f"2. prefix reuse: {conversations} five-turn conversations, {result_words}-word results, 8 "
          "tokens per answer")
    fit_short_answers(model, tokenizer)
    seconds = {}
    for reuse in (False, True):
        scheduler, web = serve(model, tokenizer, rows=8, reuse=reuse)
        with web:
            seconds[reuse] = fifth_turn_seconds(web.url, conversations, result_words, 8)
        scheduler.stop()
    print(f"   5th turn: reuse {seconds[True]:.3f} s, full prefill {seconds[False]:.3f} s, "
          f"speed-up {seconds[False] / seconds[True]:.2f}x")


if __name__ == "__main__":
    main()
