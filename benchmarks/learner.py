"""Learner throughput and memory: fused chunked log-probs against full logits, and one EP=2 step against EP=1.

    python benchmarks/learner.py [--quick]

1. Tokens/s and peak memory of one learner micro-batch (forward, loss, backward: `forward_micro_batch` +
   `micro_batch_loss`, no DeepSpeed) with the fused chunked log-prob kernel against the full-logits
   baseline, on the same model and sequence: the `tiny` preset at its own vocabulary, and again with a
   32k vocabulary (where the vocabulary spans several kernel chunks), T = 2048 positions. On CUDA the
   peak is torch.cuda.max_memory_allocated; on CPU each variant runs in a fresh process and the peak is
   the rise of the process's maximum resident set size over its size just before the pass.
2. Wall time of one learner step (LearnerGroup.train_step, DeepSpeed ZeRO-2) with ranks=2, ep_size=2
   against ranks=1 on the same batch, each rank with one CPU core and one thread, after a warm-up step.

Prints measurements and ratios; asserts nothing.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import statistics
import time

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import torch  # noqa: E402

from jointrl.model.presets import PRESETS  # noqa: E402
from jointrl.model.transformer import Transformer  # noqa: E402
from jointrl.rl.config.training import AlgorithmConfig  # noqa: E402
from jointrl.rl.learner.critic import PolicyWithValue  # noqa: E402
from jointrl.rl.learner.batch import SequenceSample, pack, totals  # noqa: E402
from jointrl.rl.learner.forward import detached, forward_micro_batch, micro_batch_loss  # noqa: E402

MIB = 2**20


def rss_bytes() -> int:
    """The current resident set size of this process."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def sample_of(vocab: int, positions: int, seed: int = 0) -> SequenceSample:
    """One fully trained random sequence of positions + 1 tokens."""
    g = torch.Generator().manual_seed(seed)
    n = positions + 1
    return SequenceSample(
        tokens=torch.randint(1, vocab, (n,), generator=g), loss_mask=torch.ones(n),
        behavior_logprobs=torch.full((n,), -float(torch.tensor(vocab).log())),
        policy_version=torch.zeros(n, dtype=torch.long),
        advantage=1.0, reward=1.0, routed_experts=None, sparse_topk=None, index=0,
    )


def micro_batch_pass(vocab: int, positions: int, fused: bool, reps: int, threads: int, device: str) -> dict:
    """Seconds per forward+loss+backward (each rep) and the peak memory of the pass, for one variant."""
    torch.set_num_threads(threads)
    cfg = PRESETS["tiny"].model_copy(update={"vocab_size": vocab, "max_seq_len": max(positions, 2048)})
    torch.manual_seed(0)
    model = PolicyWithValue(Transformer(cfg)).to(device)
    sample = sample_of(vocab, positions)
    mb = pack([sample], positions, pad_id=0)[0].to(device)
    algorithm = AlgorithmConfig(routing_replay="off")
    step_totals = totals([sample])

    def one_pass() -> float:
        started = time.perf_counter()
        out = forward_micro_batch(model, mb, temperature=1.0, replay="off", fused=fused)
        loss, _ = micro_batch_loss(algorithm, mb, out, detached(out), None, step_totals)
        loss.backward()
        model.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - started

    if device == "cuda":
        one_pass()  # warm-up: kernel selection and allocator pools
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        seconds = [one_pass() for _ in range(reps)]
        peak = torch.cuda.max_memory_allocated() - base
    else:
        # ru_maxrss cannot be reset, so the first pass of this fresh process is the one that measures.
        base = rss_bytes()
        seconds = [one_pass() for _ in range(reps)]
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    return {"seconds": seconds, "peak": peak, "positions": positions}


def _child(queue, *args) -> None:
    queue.put(micro_batch_pass(*args))


def measure(vocab: int, positions: int, fused: bool, reps: int, threads: int, device: str) -> dict:
    """micro_batch_pass in a fresh process on CPU (so its peak is its own), in this process on CUDA."""
    args = (vocab, positions, fused, reps, threads, device)
    if device == "cuda":
        return micro_batch_pass(*args)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue, *args))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def fused_vs_full(args: argparse.Namespace) -> None:
    """Part 1: tokens/s and peak memory of the fused chunked path and the full-logits path."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for vocab in (PRESETS["tiny"].vocab_size, 32768):
        rows = {}
        for fused in (True, False):
            result = measure(vocab, args.positions, fused, args.reps, args.threads, device)
            # The first CPU rep pays for first-touch page faults; the fastest rep is the steady state.
            rows[fused] = (args.positions / min(result["seconds"]), result["peak"])
        logits_mib = args.positions * vocab * 4 / MIB
        print(f"[1] tiny, vocab {vocab}, T = {args.positions} positions, {device}, {args.threads} thread(s); "
              f"one fp32 [T, V] logits tensor = {logits_mib:.0f} MiB")
        for fused, label in ((True, "fused chunked"), (False, "full logits  ")):
            rate, peak = rows[fused]
            print(f"    {label}: {rate:8.1f} tokens/s, peak {peak / MIB:8.1f} MiB")
        print(f"    fused / full: {rows[True][0] / rows[False][0]:.2f}x tokens/s, "
              f"{rows[True][1] / max(rows[False][1], 1):.2f}x peak memory")


def synth_batch(vocab: int, n: int, length: int):
    """n trajectories of `length` tokens with a trained second half and random advantages."""
    from jointrl.envs.episode import Episode
    from jointrl.rl.trajectory import Trajectory

    g = torch.Generator().manual_seed(0)
    trajectories, advantages = [], []
    for i in range(n):
        mask = torch.zeros(length)
        mask[length // 2 :] = 1.0
        episode = Episode(
            env_id="bench/synth-v0:easy", domain="bench", family="synth", difficulty="easy", seed=i, tier="low"
        )
        trajectories.append(Trajectory(
            episode, torch.randint(1, vocab, (length,), generator=g), mask,
            torch.where(mask > 0, -float(torch.tensor(vocab).log()), 0.0), torch.where(mask > 0, 0, -1),
        ))
        advantages.append(float(torch.randn((), generator=g)))
    return trajectories, advantages


def ep2_vs_ep1(args: argparse.Namespace) -> None:
    """Part 2: seconds of one learner step with ranks=2, ep_size=2 and with ranks=1."""
    import ray

    from jointrl.rl.actor_group import Placement
    from jointrl.rl.config.run import RunConfig
    from jointrl.rl.learner.group import LearnerGroup

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    placement = Placement(num_cpus=1, runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})
    seconds = {}
    try:
        for ranks in (1, 2):
            cfg = RunConfig(
                model={"preset": "tiny"}, algorithm={"routing_replay": "off"},
                learner=dict(ranks=ranks, ep_size=ranks, zero_stage=2, lr=1e-4, micro_batch_tokens=2048),
            )
            torch.manual_seed(0)
            state = Transformer(cfg.model).state_dict()
            batch = synth_batch(cfg.model.vocab_size, args.ep_sequences, args.ep_length)
            group = LearnerGroup(cfg, state, placement=placement)
            try:
                group.train_step(*batch)  # warm-up: first-call allocations
                steps = [group.train_step(*batch)["perf/learner_s"] for _ in range(args.reps)]
                seconds[ranks] = statistics.median(steps)
            finally:
                group.shutdown()
            tokens = args.ep_sequences * (args.ep_length - 1)
            print(f"[2] ranks={ranks}, ep_size={ranks}: {seconds[ranks]:.2f} s per step "
                  f"({tokens} positions, tiny, ZeRO-2, 1 core per rank)")
    finally:
        ray.shutdown()
    ratio = seconds[2] / seconds[1]
    print(f"    EP=2 step / EP=1 step = {ratio:.2f}x wall time   ({os.cpu_count()} CPUs on this machine)")


def main() -> None:
    """Parse the size options and run both parts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="T = 512 and smaller batches (a few minutes)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads in part 1")
    args = parser.parse_args()
    args.positions = 512 if args.quick else 2048
    args.reps = 2 if args.quick else 3
    args.ep_sequences, args.ep_length = (8, 65) if args.quick else (16, 129)
    fused_vs_full(args)
    ep2_vs_ep1(args)


if __name__ == "__main__":
    main()
