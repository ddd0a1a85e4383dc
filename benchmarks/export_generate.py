"""transformers' generate() on a native export: with the exported model's cache against without one (the old way).

Usage: python benchmarks/export_generate.py [--preset debug] [--prompt 32] [--new 256] [--threads 1]

Exports a randomly initialised preset model natively, loads it with AutoModelForCausalLM(trust_remote_code=True)
and decodes --new tokens greedily from a --prompt-token prompt twice: use_cache=True (one new column per step
through the latent KV, recurrent and conv state) and use_cache=False (the whole sequence again at every step,
which is what the export's generate() did before it had a cache). Both must give the same tokens; the
figure is the ratio of their wall times. Each timing is the best of --reps runs.
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch
from transformers import AutoModelForCausalLM

from jointrl.model.export import export_pretrained
from jointrl.model.presets import load_preset
from jointrl.model.transformer import Transformer


def timed_generate(hf, prompt: torch.Tensor, new: int, use_cache: bool, reps: int) -> tuple[float, torch.Tensor]:
    """Best wall time of `reps` greedy generate() calls and the tokens they produced."""
    best, out = float("inf"), None
    for _ in range(reps):
        start = time.perf_counter()
        with torch.no_grad():
            out = hf.generate(prompt, max_new_tokens=new, min_new_tokens=new, do_sample=False, use_cache=use_cache,
                              eos_token_id=None, pad_token_id=0)
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    """Print the cached and uncached generate() times and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="debug")
    parser.add_argument("--prompt", type=int, default=32, help="prompt tokens (default 32)")
    parser.add_argument("--new", type=int, default=256, help="new tokens (default 256)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    parser.add_argument("--reps", type=int, default=2, help="timed runs per variant, best kept (default 2)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Transformer(load_preset(args.preset)).eval()
    with tempfile.TemporaryDirectory() as tmp:
        hf = AutoModelForCausalLM.from_pretrained(export_pretrained(model, f"{tmp}/export", target="native"),
                                                  trust_remote_code=True)
    prompt = torch.randint(0, model.cfg.vocab_size, (1, args.prompt))
    # One short call first, so neither timing pays for lazy initialisation.
    timed_generate(hf, prompt, 2, True, 1)
    cached_s, cached = timed_generate(hf, prompt, args.new, True, args.reps)
    uncached_s, uncached = timed_generate(hf, prompt, args.new, False, args.reps)
    same = torch.equal(cached, uncached)
    print(f"{args.preset}: {args.prompt}-token prompt, {args.new} new tokens, {args.threads} thread(s)")
    print(f"  generate(use_cache=True)   {cached_s:8.2f} s  {args.new / cached_s:8.1f} tokens/s")
    print(f"  generate(use_cache=False)  {uncached_s:8.2f} s  {args.new / uncached_s:8.1f} tokens/s")
    print(f"  speed-up of the cache: {uncached_s / cached_s:.1f}x  (same tokens: {same})")
    if not same:
        raise SystemExit("cached and uncached generate() gave different tokens")


if __name__ == "__main__":
    main()
