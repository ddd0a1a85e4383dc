"""Weight sync: the learner ranks publishing their own shares against gathering the policy into the driver.

For each layout (1 or 2 learner ranks, experts split over them) and expert format (full precision or MXFP4
on the wire), the same learner group and rollout workers sync the same weights three ways, `--repeats` times:

  ranks       every rank puts its share in the object store and the driver passes only handles (LearnerGroup.publish);
  collective  every rank stages its share and broadcasts it over torch.distributed groups with the workers
              (rollout.weight_transport: collective; gloo unless every member has CUDA, so gloo on this benchmark);
  gather      the driver gathers the full policy (LearnerGroup.state_dict) and publishes it (what train did before).

A sync ends when every worker has loaded the version. Printed per row: median seconds per sync, bytes put in
the object store per sync and bytes the workers read, the driver's peak RSS growth during that mode, and the
time ratio to gather. The model is an MoE whose experts hold most parameters (`--experts`), so the
expert shards are what the two layouts split. `--device cuda` puts the learner on the GPU, one rank per GPU; the
workers stay on the CPU, so the collective groups still run over gloo there (NCCL needs every member on CUDA).

    python benchmarks/weight_sync.py                      # CPU: ranks 1 and 2, full and MXFP4
    python benchmarks/weight_sync.py --device cuda --ranks 1 --json runs/weight_sync.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import ray
import torch
from rich.console import Console
from rich.table import Table

from jointrl.model.checkpoint import save_pretrained
from jointrl.model.config import ModelConfig
from jointrl.model.presets import PRESETS
from jointrl.model.tokenizer import train_tokenizer
from jointrl.model.transformer import Transformer
from jointrl.rl.actor_group import Placement
from jointrl.rl.config.run import RunConfig
from jointrl.rl.learner.group import LearnerGroup
from jointrl.rl.rollout.manager import RolloutManager
from jointrl.rl.weight_sync import CollectiveGroup

MIB = 1024**2


def model_config(experts: int, dim: int, expert_hidden: int) -> ModelConfig:
    """The debug layer pattern with wide expert banks: most parameters are routed experts."""
    return ModelConfig(**{**PRESETS["debug"].model_dump(), "name": "sync-bench", "dim": dim, "n_experts": experts,
                          "expert_hidden": expert_hidden, "dense_hidden": 2 * dim})


class PeakRSS:
    """The highest resident memory of this process while the block runs, sampled every 5 ms, in MiB."""

    def __enter__(self) -> "PeakRSS":
        self._process, self._stop = psutil.Process(), threading.Event()
        self.start = self.peak = self._process.memory_info().rss / MIB
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self._process.memory_info().rss / MIB)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def sync_seconds(sync, repeats: int) -> list[float]:
    """Wall seconds of `repeats` calls of sync(version), versions counting up."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        sync()
        times.append(time.perf_counter() - start)
    return times


def bench_layout(cfg: RunConfig, init: Path, tokenizer, args, device: str) -> list[dict]:
    """Rows for one (ranks, expert format): ranks, collective, then gather, on one group and one set of workers."""
    gpu = 1.0 if device == "cuda" else 0.0
    learner = LearnerGroup(cfg, init, placement=Placement(num_cpus=0.5, num_gpus=gpu, ready_timeout_s=300))
    workers = RolloutManager(cfg.model, tokenizer, cfg.rollout, n_workers=args.workers,
                             placement=Placement(num_cpus=0.5, ready_timeout_s=300), bucket_bytes=args.bucket_mb * MIB)
    version = iter(range(1, 10**6))
    updates = []

    def by_ranks() -> None:
        v = next(version)
        updates.append(workers.push_weights(learner.publish(v, workers.sync.bucket_bytes, cfg.rollout.mxfp4_experts), v))

    def by_collective() -> None:
        v = next(version)
        transport = workers.collective.transport
        update = learner.publish(v, workers.sync.bucket_bytes, cfg.rollout.mxfp4_experts, transport=transport)
        updates.append(workers.push_weights(update, v))

    def by_gather() -> None:
        v = next(version)
        updates.append(workers.push_weights(learner.state_dict(), v))

    rows = []
    try:
        workers.attach_collective(CollectiveGroup(learner.senders))
        for mode, sync in (("ranks", by_ranks), ("collective", by_collective), ("gather", by_gather)):
            sync()  # warm-up: first object-store use, first load in each worker
            with PeakRSS() as rss:
                times = sync_seconds(sync, args.repeats)
            nbytes = updates[-1].nbytes
            rows.append({
                "ranks": cfg.learner.ranks, "experts": "mxfp4" if cfg.rollout.mxfp4_experts else "full", "mode": mode,
                "seconds": statistics.median(times), "bytes_published": nbytes, "bytes_read": nbytes * args.workers,
                "driver_peak_rss_growth_mib": rss.peak - rss.start,
            })
            updates.clear()  # drop the handles: the object store frees the buckets
    finally:
        workers.shutdown()
        learner.shutdown()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experts", type=int, default=64, help="routed experts per MoE layer (default 64)")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--expert-hidden", type=int, default=512)
    parser.add_argument("--ranks", default="1,2", help="learner rank counts to compare, comma-separated (default 1,2)")
    parser.add_argument("--workers", type=int, default=1, help="rollout workers loading each version (default 1)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bucket-mb", type=int, default=64)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device on this machine", file=sys.stderr)
        return 2
    rank_counts = [int(r) for r in args.ranks.split(",")]
    mcfg = model_config(args.experts, args.dim, args.expert_hidden)
    for ranks in rank_counts:
        if mcfg.n_experts % ranks:
            raise SystemExit(f"--ranks {ranks} does not divide --experts {mcfg.n_experts}")
    torch.manual_seed(0)
    model = Transformer(mcfg)
    n_params = sum(p.numel() for p in model.parameters())
    tokenizer = train_tokenizer(["weight sync benchmark text"] * 4, vocab_size=mcfg.vocab_size)
    console = Console()
    console.print(f"model: {n_params / 1e6:.1f}M parameters ({mcfg.n_experts} experts x {len(model.moe_layers)} MoE layers), "
                  f"device {args.device}, {args.workers} worker(s), {args.repeats} syncs per row")

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        init = save_pretrained(model, Path(tmp) / "init", tokenizer=tokenizer)
        del model
        ray.init(address="local", num_cpus=max(2, max(rank_counts) + args.workers), include_dashboard=False, log_to_driver=False)
        try:
            for ranks in rank_counts:
                for mxfp4 in (False, True):
                    cfg = RunConfig(
                        model=mcfg.model_dump(), trainer={"seed": 0},
                        learner=dict(ranks=ranks, ep_size=ranks, zero_stage=1, backend="auto"),
                        rollout=dict(workers=args.workers, mxfp4_experts=mxfp4),
                    )
                    rows += bench_layout(cfg, init, tokenizer, args, args.device)
        finally:
            ray.shutdown()

    gather = {(r["ranks"], r["experts"]): r["seconds"] for r in rows if r["mode"] == "gather"}
    table = Table(title=f"weight sync, {n_params / 1e6:.1f}M parameters (median of {args.repeats})")
    for column in ("ranks", "experts", "mode", "s / sync", "MiB published", "MiB read", "driver peak RSS +MiB",
                   "vs gather"):
        table.add_column(column, justify="right")
    for r in rows:
        r["ratio_vs_gather"] = r["seconds"] / gather[(r["ranks"], r["experts"])]
        table.add_row(str(r["ranks"]), r["experts"], r["mode"], f"{r['seconds']:.3f}", f"{r['bytes_published'] / MIB:.1f}",
                      f"{r['bytes_read'] / MIB:.1f}", f"{r['driver_peak_rss_growth_mib']:.0f}", f"{r['ratio_vs_gather']:.2f}x")
    console.print(table)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"parameters": n_params, "device": args.device, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
