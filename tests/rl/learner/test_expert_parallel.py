"""Expert-parallel dispatch in two real gloo processes against the same debug model with every expert local.

Each process holds half of a batch. The reference is one unsharded model run on the whole batch in the
same process: per-rank logits must equal the reference rows, the data-parallel sum of non-expert gradients
the reference gradients, and each rank's expert gradients (already summed over the EP group by the
all-to-all backward) the reference slice of the experts it owns. fp32; tolerance: largest absolute error at
most 1e-5 times the reference tensor's largest magnitude (the only differences are summation orders of the
same products, and single elements of a gradient can cancel to near zero, so a per-element relative bound
would be meaningless there).
"""

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from jointrl.model.moe import RoutedExperts
from jointrl.model.presets import load_preset
from jointrl.model.transformer import Transformer
from jointrl.rl.learner.distributed import free_port
from jointrl.rl.learner.expert_parallel import (
    ExpertShard,
    expert_keys,
    gather_full_state,
    merge_shards,
    regroup_order,
    shard_experts,
    shard_state,
)

REL_TOL = 1e-5


def mismatch(actual, expected):
    """None when actual is within REL_TOL of expected's scale, else a description."""
    scale = expected.abs().max().item()
    err = (actual - expected).abs().max().item() if expected.numel() else 0.0
    if actual.shape == expected.shape and err <= REL_TOL * max(scale, 1e-6):
        return None
    return f"shape {tuple(actual.shape)} vs {tuple(expected.shape)}, max error {err:.3g} at scale {scale:.3g}"
ROWS, T = 2, 24  # per rank


def routing_for(case, cfg, rank, generator):
    """Replayed expert ids [ROWS, T, L, k] for the cases that force empty experts, else None."""
    n_moe = sum(cfg.is_moe(i) for i in range(cfg.n_layers))
    if case == "router":
        return None
    # Rank 0 picks from experts 0..4 and rank 1 from 0..1: experts 5, 6, 7 (owned by rank 1) get no
    # token; in "one_owner" every token goes to rank 0's experts, so rank 1 receives no row at all.
    pool = {"sparse": [5, 2], "one_owner": [4, 4]}[case][rank]
    scores = torch.rand(ROWS, T, n_moe, pool, generator=generator)
    return scores.topk(cfg.n_active, dim=-1).indices  # distinct experts per token


def batch(cfg, case):
    """Both ranks' tokens, routing and output weights, drawn identically in every process."""
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, cfg.vocab_size, (2, ROWS, T), generator=g)
    weights = torch.randn(2, ROWS, T, cfg.vocab_size, generator=g)
    routing = [routing_for(case, cfg, r, g) for r in range(2)]
    return tokens, weights, routing


def loss_of(model, tokens, weights, routing):
    """A loss that touches every logit with a different weight; returns (logits, loss)."""
    logits = model(tokens, routing=routing).logits
    return logits, (logits * weights).sum()


def worker(rank, port, results):
    """One EP rank: reference pass on the whole batch, then the sharded pass on its half; reports mismatches."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    cfg = load_preset("debug")
    torch.manual_seed(0)
    reference = Transformer(cfg)
    full_state = {k: v.clone() for k, v in reference.state_dict().items()}
    keys = expert_keys(reference)

    torch.manual_seed(0)
    model = Transformer(cfg)
    names = shard_experts(model, rank, 2)
    problems = []
    if sorted(names) != sorted(n for n, m in reference.named_modules() if isinstance(m, RoutedExperts)):
        problems.append(f"sharded modules {names}")
    local_state = model.state_dict()
    expected_local = shard_state(full_state, keys, rank, 2)
    for key, value in expected_local.items():
        if not torch.equal(local_state[key], value):
            problems.append(f"shard of {key} differs from the slice of the full state")
    gathered = gather_full_state(local_state, keys)
    for key, value in full_state.items():
        if not torch.equal(gathered[key], value):
            problems.append(f"gathered {key} differs from the full state")

    for case in ("router", "sparse", "one_owner"):
        tokens, weights, routing = batch(cfg, case)
        reference.zero_grad()
        model.zero_grad()
        full_routing = None if routing[0] is None else torch.cat(routing)
        ref_logits, ref_loss = loss_of(reference, tokens.flatten(0, 1), weights.flatten(0, 1), full_routing)
        ref_loss.backward()
        logits, loss = loss_of(model, tokens[rank], weights[rank], routing[rank])
        loss.backward()
        bad = mismatch(logits, ref_logits[rank * ROWS : (rank + 1) * ROWS])
        if bad:
            problems.append(f"{case}: logits: {bad}")
        ref_grads = dict(reference.named_parameters())
        for name, param in model.named_parameters():
            grad = param.grad
            if ref_grads[name].grad is None or grad is None:
                # The DSA indexer learns from its own aux loss, not from the logits: no gradient in both.
                if (ref_grads[name].grad is None) != (grad is None):
                    problems.append(f"{case}: {name} has a gradient in only one of the two runs")
                continue
            module = model.get_submodule(name.rpartition(".")[0])
            if isinstance(module, ExpertShard):
                per = module.n_local
                expected = ref_grads[name].grad[rank * per : (rank + 1) * per]
            else:
                grad = grad.clone()
                dist.all_reduce(grad)
                expected = ref_grads[name].grad
            bad = mismatch(grad, expected)
            if bad:
                problems.append(f"{case}: grad of {name}: {bad}")
        if case == "one_owner" and rank == 1:
            shard = model.layers[1].ffn.experts
            if any(bool(p.grad.abs().sum() != 0) for p in shard.parameters()):
                problems.append("one_owner: rank 1 received no rows but its experts got a nonzero gradient")
        if case == "sparse" and int(full_routing.max()) >= 5:
            problems.append("sparse: experts 5..7 were meant to receive no token")
    results[rank] = problems
    dist.destroy_process_group()


def test_regroup_order_moves_blocks_expert_major():
    """Hand-built blocks: 2 sources x 2 local experts with counts [[1, 2], [0, 3]]."""
    # Received rows: s0e0: [0], s0e1: [1, 2], s1e0: none, s1e1: [3, 4, 5].
    # Expert-major: e0 <- s0: [0], s1: none; e1 <- s0: [1, 2], s1: [3, 4, 5].
    order = regroup_order(torch.tensor([[1, 2], [0, 3]]))
    assert order.tolist() == [0, 1, 2, 3, 4, 5]
    # counts [[2, 1], [1, 2]]: rows s0e0 [0, 1], s0e1 [2], s1e0 [3], s1e1 [4, 5] -> e0: 0, 1, 3; e1: 2, 4, 5.
    assert regroup_order(torch.tensor([[2, 1], [1, 2]])).tolist() == [0, 1, 3, 2, 4, 5]


def test_shard_and_merge_round_trip():
    """Slicing a full state per EP rank and merging the slices gives the full state back, bit for bit."""
    model = Transformer(load_preset("debug"))
    state = model.state_dict()
    keys = expert_keys(model)
    assert len(keys) == 3 * sum(isinstance(m, RoutedExperts) for m in model.modules())
    shards = [shard_state(state, keys, r, 4) for r in range(4)]
    assert shards[1][keys[0]].shape[0] == model.cfg.n_experts // 4
    merged = merge_shards(shards, keys)
    assert merged.keys() == state.keys()
    assert all(torch.equal(merged[k], state[k]) for k in state)
    with pytest.raises(ValueError, match="ep_size=3"):
        shard_state(state, keys, 0, 3)


def test_ep2_dispatch_matches_all_local_experts():
    """Two gloo processes with ep=2 give the logits and gradients of one process with all experts."""
    results = mp.Manager().dict()
    mp.spawn(worker, args=(free_port(), results), nprocs=2, join=True)
    assert results[0] == [] and results[1] == [], dict(results)
