"""Triton sparse-attention kernels (interpreted on CPU) against the naive path and an fp64 reference.

Every Triton call goes through the package's dispatch with JOINTRL_KERNELS=triton and outputs poisoned
to NaN, so an element a kernel forgets to write fails the comparison. A float result passes when its
largest error against fp64 is at most twice the naive path's own fp32 error (flash attention's rule)
plus 4e-7 of the reference's largest magnitude (a few fp32 rounding steps: the paths sum in different
orders, and the interpreter's BLAS rounds differently on different CPUs). Top-k must match naive.py
exactly where scores are exact (integer-valued inputs, many ties) and pick equally good slots elsewhere.
"""
from __future__ import annotations

import pytest
import torch

from jointrl.kernels import sparse_attn
from jointrl.kernels.dispatch import select_ops
from jointrl.kernels.sparse_attn import naive


@pytest.fixture
def triton_path(monkeypatch):
    """Force the Triton path with poisoned outputs, and prove it is the one dispatched."""
    monkeypatch.setenv("JOINTRL_KERNELS", "triton")
    monkeypatch.setenv("JOINTRL_POISON_OUTPUTS", "1")
    assert select_ops(sparse_attn.__name__, naive, torch.zeros(1)).__name__.endswith(".triton")


def _assert_close(name: str, got: torch.Tensor, fp32: torch.Tensor, ref: torch.Tensor) -> None:
    """got's error vs the fp64 ref is at most 2x the naive fp32 error plus 4e-7 of the scale; -inf must match."""
    assert got.shape == ref.shape and got.dtype == fp32.dtype, f"{name}: {got.shape} {got.dtype}, want {fp32.dtype}"
    finite = torch.isfinite(ref)
    assert torch.equal(torch.isfinite(got), finite), f"{name}: finite where the reference is not, or the reverse"
    assert torch.equal(got[~finite], fp32[~finite]), f"{name}: different infinities"
    ref, got, fp32 = ref[finite], got[finite].double(), fp32[finite].double()
    naive_err = (fp32 - ref).abs().max().item() if ref.numel() else 0.0
    err = (got - ref).abs().max().item() if ref.numel() else 0.0
    bound = 2 * naive_err + 4e-7 * (ref.abs().max().item() if ref.numel() else 0.0)
    assert err <= bound, f"{name}: error {err:.3e} > bound {bound:.3e} (naive error {naive_err:.3e})"


def _leaves(*tensors: torch.Tensor, dtype=None) -> list[torch.Tensor]:
    """Detached copies that require grad (in dtype when given)."""
    return [t.detach().to(dtype or t.dtype).requires_grad_(True) for t in tensors]


def _listed(b: int, t: int, s: int, k: int, start: int, gen: torch.Generator) -> torch.Tensor:
    """Random causal slot lists [B, T, K] (repeats allowed), ~1/4 of entries -1; when T > 1 query 1 lists nothing."""
    limit = start + torch.arange(t) + 1  # [T] visible slots per query
    slots = (torch.rand(b, t, k, generator=gen) * limit.clamp_max(s)[None, :, None]).long()
    slots = slots.masked_fill(torch.rand(b, t, k, generator=gen) < 0.25, -1)
    if t > 1:
        slots[:, 1] = -1
    return slots


def _float_inputs(b: int, t: int, s: int, hi: int, i: int, gen: torch.Generator):
    """Random normal indexer inputs q [B, T, Hi, I], weights [B, T, Hi], k [B, S, I]."""
    q, w = torch.randn(b, t, hi, i, generator=gen), torch.randn(b, t, hi, generator=gen)
    return q, w, torch.randn(b, s, i, generator=gen)


def _ref_scores(q: torch.Tensor, w: torch.Tensor, k: torch.Tensor, indices: torch.Tensor | None) -> torch.Tensor:
    """fp64 indexer scores, written independently of naive.py."""
    dense = torch.einsum("bthi,bsi->bths", q.double(), k.double()).relu()
    dense = (dense * w.double()[..., None]).sum(2)  # [B, T, S]
    if indices is None:
        return dense
    return dense.gather(-1, indices.clamp_min(0)).masked_fill(indices < 0, float("-inf"))


def _ref_attention(q, kv, indices, scale, v_dim):
    """fp64 listed attention: (out [B, T, H, v_dim], probs [B, T, H, K])."""
    q, kv = q.double(), kv.double()
    rows = kv[torch.arange(kv.shape[0])[:, None, None], indices.clamp_min(0)]  # [B, T, K, E]
    listed = (indices >= 0)[:, :, None, :]  # [B, T, 1, K]
    scores = torch.einsum("bthe,btke->bthk", q, rows) * scale
    # Empty lists get finite scores and then zero weights, so neither value nor gradient turns NaN.
    scores = scores.masked_fill(~listed, float("-inf")).masked_fill(~listed.any(-1, keepdim=True), 0.0)
    probs = scores.softmax(-1) * listed
    return torch.einsum("bthk,btkc->bthc", probs, rows[..., :v_dim]), probs


SCORE_CASES = {
    "T63-S63-Hi2-I24-dense": dict(b=2, t=63, s=63, hi=2, i=24, listed=None),
    "T1-S40-Hi1-decode-dense": dict(b=1, t=1, s=40, hi=1, i=16, listed=None),
    "T63-Hi3-K8-listed": dict(b=1, t=63, s=63, hi=3, i=20, listed=8),
    "T16-Hi1-K32-exceeds-T-listed": dict(b=2, t=16, s=16, hi=1, i=16, listed=32),
    "T1-start39-K16-decode-listed": dict(b=2, t=1, s=40, hi=4, i=16, listed=16),
}


@pytest.mark.parametrize("case", SCORE_CASES.values(), ids=SCORE_CASES.keys())
def test_indexer_scores_forward_and_gradients(triton_path, case):
    gen = torch.Generator().manual_seed(1)
    b, t, s, hi, i = case["b"], case["t"], case["s"], case["hi"], case["i"]
    q, w, k = _float_inputs(b, t, s, hi, i, gen)
    indices = None if case["listed"] is None else _listed(b, t, s, case["listed"], s - t, gen)
    width = s if indices is None else indices.shape[-1]
    grad = torch.randn(b, t, width, generator=gen)
    results = {}
    for name, fn, dtype in (("triton", sparse_attn.indexer_scores, None), ("naive", naive.indexer_scores, None),
                            ("ref", _ref_scores, torch.float64)):
        leaves = _leaves(q, w, k, dtype=dtype)
        out = fn(*leaves, indices)
        # The loss ignores -inf entries, as the model's loss does.
        loss = (out.masked_fill(~torch.isfinite(out), 0.0) * grad.to(out.dtype)).sum()
        results[name] = [out.detach(), *torch.autograd.grad(loss, leaves)]
    for what, got, fp32, ref in zip(("scores", "dq", "dweights", "dk"), *results.values()):
        _assert_close(what, got, fp32, ref)


def _integer_inputs(b: int, t: int, s: int, hi: int, i: int, gen: torch.Generator):
    """Small-integer q, k and weights: every score is exact in fp32, and many tie."""
    q = torch.randint(-2, 3, (b, t, hi, i), generator=gen).float()
    k = torch.randint(-2, 3, (b, s, i), generator=gen).float()
    w = torch.tensor([-1.0, 0.5, 1.0, 2.0])[torch.randint(0, 4, (b, t, hi), generator=gen)]
    return q, w, k


TOPK_CASES = {
    "T63-k8-blocks-merge": dict(b=2, t=63, s=63, hi=2, i=16, topk=8, pad=0),
    "T63-Hi1-k80-exceeds-T": dict(b=1, t=63, s=63, hi=1, i=16, topk=80, pad=5),
    "T20-k5-left-padded": dict(b=2, t=20, s=20, hi=3, i=24, topk=5, pad=3),
    "T1-start39-decode": dict(b=2, t=1, s=40, hi=2, i=16, topk=16, pad=2),
    "T8-start292-k200-two-part-buffer": dict(b=1, t=8, s=300, hi=2, i=16, topk=200, pad=0),
    "T5-k2048-buffer-padded-heads": dict(b=1, t=5, s=7, hi=2, i=16, topk=2048, pad=0),
}


@pytest.mark.parametrize("case", TOPK_CASES.values(), ids=TOPK_CASES.keys())
def test_indexer_topk_matches_naive_exactly_with_ties(triton_path, case):
    gen = torch.Generator().manual_seed(2)
    b, t, s = case["b"], case["t"], case["s"]
    q, w, k = _integer_inputs(b, t, s, case["hi"], case["i"], gen)
    # Left padding: the first `pad` slots of row 0 are invalid, so with T = S its query 0 has no candidate.
    k_valid = torch.ones(b, s, dtype=torch.bool)
    k_valid[0, : case["pad"]] = False
    start = s - t
    got = sparse_attn.indexer_topk(q, w, k, k_valid, start, case["topk"])
    want = naive.indexer_topk(q, w, k, k_valid, start, case["topk"])
    assert got.dtype == torch.long and got.shape == (b, t, case["topk"])
    nonzero = _ref_scores(q, w, k, None)
    nonzero = nonzero[nonzero != 0]
    assert nonzero.unique().numel() < nonzero.numel(), "the inputs must produce ties beyond zeros"
    assert torch.equal(got, want), f"{(got != want).sum().item()} slots differ"
    if case["pad"] and t == s:
        assert (got[0, 0] == -1).all()


def test_indexer_topk_on_random_scores_picks_equally_good_slots(triton_path):
    gen = torch.Generator().manual_seed(3)
    b, t, s, hi, i, topk = 1, 40, 50, 2, 20, 12
    q, w, k = _float_inputs(b, t, s, hi, i, gen)
    k_valid = torch.rand(b, s, generator=gen) > 0.2
    got = sparse_attn.indexer_topk(q, w, k, k_valid, s - t, topk)
    want = naive.indexer_topk(q, w, k, k_valid, s - t, topk)
    ref = _ref_scores(q, w, k, None)
    # Rounding may swap slots whose scores (nearly) tie, never the scores ranked at each position.
    assert torch.equal(got < 0, want < 0)
    ranked_got = ref.gather(-1, got.clamp_min(0)).masked_fill(got < 0, 0.0)
    ranked_want = ref.gather(-1, want.clamp_min(0)).masked_fill(want < 0, 0.0)
    assert torch.allclose(ranked_got, ranked_want, rtol=0, atol=1e-5)
    allowed = naive.candidate_mask(k_valid, s - t, t)
    assert allowed.gather(-1, got.clamp_min(0))[got >= 0].all()


ATTENTION_CASES = {
    "T63-H1-K8-E24-C16": dict(b=1, t=63, s=63, h=1, e=24, c=16, k=8),
    "T16-H4-K32-exceeds-T": dict(b=2, t=16, s=16, h=4, e=40, c=32, k=32),
    "T1-start39-H3-decode-no-tail": dict(b=2, t=1, s=40, h=3, e=16, c=16, k=16),
}


@pytest.mark.parametrize("case", ATTENTION_CASES.values(), ids=ATTENTION_CASES.keys())
def test_sparse_mla_attention_forward_gradients_and_mass(triton_path, case):
    gen = torch.Generator().manual_seed(4)
    b, t, s, h, e, c = case["b"], case["t"], case["s"], case["h"], case["e"], case["c"]
    q, kv = torch.randn(b, t, h, e, generator=gen), torch.randn(b, s, e, generator=gen)
    indices = _listed(b, t, s, case["k"], s - t, gen)
    scale = e**-0.5
    grad = torch.randn(b, t, h, c, generator=gen)
    results = {}
    for name, fn, dtype in (("triton", sparse_attn.sparse_mla_attention, None),
                            ("naive", naive.sparse_mla_attention, None),
                            ("ref", lambda *a: _ref_attention(*a)[0], torch.float64)):
        leaves = _leaves(q, kv, dtype=dtype)
        out = fn(*leaves, indices, scale, c)
        results[name] = [out.detach(), *torch.autograd.grad((out * grad.to(out.dtype)).sum(), leaves)]
    for what, got, fp32, ref in zip(("out", "dq", "dkv"), *results.values()):
        _assert_close(what, got, fp32, ref)
    if t > 1:
        assert (results["triton"][0][:, 1] == 0).all(), "a query with no listed slot outputs zeros"

    probs = _ref_attention(q, kv, indices, scale, c)[1].sum(2)  # [B, T, K]
    ref_mass = probs / probs.sum(-1, keepdim=True).clamp_min(1e-300)
    mass = sparse_attn.attention_mass(q, kv, indices, scale)
    _assert_close("mass", mass, naive.attention_mass(q, kv, indices, scale), ref_mass)


def test_bad_shapes_are_reported(triton_path):
    q, kv = torch.zeros(1, 4, 2, 8), torch.zeros(1, 4, 8)
    with pytest.raises(ValueError, match="indices"):
        sparse_attn.sparse_mla_attention(q, kv, torch.zeros(1, 3, 2, dtype=torch.long), 1.0, 8)
    with pytest.raises(ValueError, match="v_dim"):
        sparse_attn.sparse_mla_attention(q, kv, torch.zeros(1, 4, 2, dtype=torch.long), 1.0, 9)
    with pytest.raises(ValueError, match="k_valid"):
        sparse_attn.indexer_topk(q, torch.zeros(1, 4, 2), kv, torch.ones(1, 5, dtype=torch.bool), 0, 2)


def _unique_listed(b: int, t: int, s: int, k: int, gen: torch.Generator) -> torch.Tensor:
    """Causal slot lists [B, T, K] without repeats (start 0), -1 padded; query 1 lists nothing."""
    out = torch.full((b, t, k), -1, dtype=torch.long)
    for row in range(b):
        for i in range(t):
            slots = torch.randperm(i + 1, generator=gen)[: min(k, i + 1)]
            keep = slots[torch.rand(len(slots), generator=gen) < 0.75]
            out[row, i, : len(keep)] = keep
    out[:, 1] = -1
    return out


@pytest.mark.parametrize("repeats", [False, True], ids=["unique-masked-dense", "repeats-gathered"])
def test_naive_cpu_forms_match_the_reference(repeats):
    """The naive ops' masked-dense form (short S, unique lists) and gathered form agree with fp64 references."""
    gen = torch.Generator().manual_seed(7)
    b, t, h, e, c, k, hi, i = 2, 24, 2, 16, 12, 16, 2, 8
    indices = _listed(b, t, t, k, 0, gen) if repeats else _unique_listed(b, t, t, k, gen)
    q, kv = torch.randn(b, t, h, e, generator=gen), torch.randn(b, t, e, generator=gen)
    dense = naive._dense_is_cheaper(q, kv, indices) and naive._listed_mask(indices, t) is not None
    assert dense != repeats, "the case must exercise the form it names"
    scale, grad = e**-0.5, torch.randn(b, t, h, c, generator=gen)
    got, ref = [], []
    for fn, dtype, sink in ((naive.sparse_mla_attention, None, got), (lambda *a: _ref_attention(*a)[0], torch.float64, ref)):
        leaves = _leaves(q, kv, dtype=dtype)
        out = fn(*leaves, indices, scale, c)
        sink += [out.detach(), *torch.autograd.grad((out * grad.to(out.dtype)).sum(), leaves)]
    for name, a, r in zip(("out", "dq", "dkv"), got, ref):
        assert (a.double() - r).abs().max() < 1e-5, name
    probs = _ref_attention(q, kv, indices, scale, c)[1].sum(2)
    ref_mass = probs / probs.sum(-1, keepdim=True).clamp_min(1e-300)
    assert (naive.attention_mass(q, kv, indices, scale).double() - ref_mass).abs().max() < 1e-6

    iq, w, ik = _float_inputs(b, t, t, hi, i, gen)
    leaves = _leaves(iq, w, ik)
    scores = naive.indexer_scores(*leaves, indices)
    ref_leaves = _leaves(iq, w, ik, dtype=torch.float64)
    ref_scores = _ref_scores(*ref_leaves, indices)
    finite = torch.isfinite(ref_scores)
    assert torch.equal(torch.isfinite(scores), finite)
    assert (scores[finite].double() - ref_scores[finite]).abs().max() < 1e-5
    weight = torch.randn(scores.shape, generator=gen).masked_fill(~finite, 0)
    grads = torch.autograd.grad(scores.masked_fill(~finite, 0).mul(weight).sum(), leaves)
    ref_grads = torch.autograd.grad(ref_scores.masked_fill(~finite, 0).mul(weight.double()).sum(), ref_leaves)
    for a, r in zip(grads, ref_grads):
        assert (a.double() - r).abs().max() < 1e-5


def test_the_naive_top_slots_rank_by_score_then_the_later_slot():
    """The CPU top-k against a Python sort: best score first, ties to the later slot, -inf slots as -1."""
    gen = torch.Generator().manual_seed(8)
    # Few distinct values (ties everywhere), negatives, signed zeros and -inf.
    values = torch.tensor([-2.0, -0.5, -0.0, 0.0, 0.0, 1.5, 3.0, float("-inf"), float("-inf")])
    scores = values[torch.randint(0, len(values), (3, 5, 40), generator=gen)]
    scores[0, 0] = float("-inf")  # a query with no candidate
    got = naive._top_slots(scores, 12)
    for row, query in ((r, q) for r in range(3) for q in range(5)):
        s = scores[row, query].tolist()
        ranked = sorted(range(len(s)), key=lambda j: (-s[j], -j))[:12]
        want = [j if s[j] != float("-inf") else -1 for j in ranked]
        assert got[row, query].tolist() == want, (row, query)
