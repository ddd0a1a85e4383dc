"""MoE dispatch ops: the Triton path (interpreted, NaN-poisoned outputs) against naive, forward and gradients.

Shape legend: N = tokens, k = experts per token, M = N * k, E = experts, D = dim, F = expert width.

Tolerance: both paths run in fp32 and are compared with the naive path run in fp64. The Triton error,
max |triton - fp64| / max |fp64|, may be at most twice the naive path's own fp32 error on the same
tensor, plus 2 fp32 ulps of slack for tensors where naive happens to land almost exactly.
"""
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from jointrl.kernels import moe as moe_ops
from jointrl.kernels.dispatch import select_ops
from jointrl.kernels.moe import naive

ULP_SLACK = 2 * torch.finfo(torch.float32).eps


@dataclass(frozen=True)
class Case:
    n: int
    e: int
    k: int
    d: int
    f: int
    idle: int = -1  # an expert no token chooses (-1: none)
    hot: int = -1  # an expert every token chooses (-1: none)


# The kernels tile rows by 64, columns by 64 and reductions by 32; no size below is a multiple of those.
CASES = {
    "zero-token-expert-top2": Case(n=37, e=4, k=2, d=40, f=72, idle=2),
    "one-expert-two-row-tiles": Case(n=70, e=1, k=1, d=24, f=20),
    "top1": Case(n=45, e=3, k=1, d=33, f=48),
    "top3-two-d-tiles": Case(n=29, e=5, k=3, d=72, f=40),
    # Expert 0 gets 81 rows, so its second row tile is partial and the next group starts mid-tile.
    "hot-expert-top2": Case(n=81, e=3, k=2, d=17, f=36, hot=0),
    "no-tokens": Case(n=0, e=3, k=2, d=16, f=16),
}
case_params = pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))


def make_ids(case: Case) -> torch.Tensor:
    """Distinct experts per token, [N, k], honouring the case's idle and hot experts."""
    scores = torch.rand(case.n, case.e)  # [N, E]
    if case.idle >= 0:
        scores[:, case.idle] = -1.0
    if case.hot >= 0:
        scores[:, case.hot] = 2.0
    return scores.topk(case.k, dim=-1).indices  # [N, k]


def use(monkeypatch, path: str) -> None:
    monkeypatch.setenv("JOINTRL_KERNELS", path)
    monkeypatch.setenv("JOINTRL_POISON_OUTPUTS", "1" if path == "triton" else "0")


def run_both(monkeypatch, fn, inputs: list[torch.Tensor], grad_outs: list[torch.Tensor | None], ref_fn=None):
    """Outputs and float-input grads for: triton fp32, naive fp32, fp64 (ref_fn if given, else naive)."""
    results = []
    for path, dtype in (("triton", torch.float32), ("naive", torch.float32), ("naive", torch.float64)):
        use(monkeypatch, path)
        leaves = [t.detach().to(dtype).clone().requires_grad_() if t.is_floating_point() else t for t in inputs]
        outs = (ref_fn if ref_fn is not None and dtype == torch.float64 else fn)(*leaves)
        pairs = [(o, g.to(dtype)) for o, g in zip(outs, grad_outs) if g is not None]
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        results.append(([o.detach() for o in outs], [t.grad for t in leaves if t.is_floating_point()]))
    return results


def assert_within_naive_error(name: str, got: torch.Tensor, naive32: torch.Tensor, ref64: torch.Tensor) -> None:
    assert got.shape == naive32.shape and got.dtype == naive32.dtype, f"{name}: {got.shape}/{got.dtype}"
    assert torch.isfinite(got).all(), f"{name}: non-finite values (an unwritten poisoned element?)"
    if ref64.numel() == 0:
        return
    scale = ref64.abs().max().clamp_min(1e-30)
    err = ((got.double() - ref64).abs().max() / scale).item()
    naive_err = ((naive32.double() - ref64).abs().max() / scale).item()
    bound = 2 * naive_err + ULP_SLACK
    assert err <= bound, f"{name}: error {err:.2e} > bound {bound:.2e} (naive fp32 error {naive_err:.2e})"


@case_params
def test_permute_matches_naive(monkeypatch, case):
    x = torch.randn(case.n, case.d)
    ids = make_ids(case)
    grad_sorted = torch.randn(case.n * case.k, case.d)
    (triton_out, triton_grads), (naive_out, naive_grads), (_, ref_grads) = run_both(
        monkeypatch, lambda x: moe_ops.permute(x, ids, case.e), [x], [grad_sorted, None, None]
    )
    # Row movement and integer outputs are exact; the stable order and the counts are torch's own.
    for got, want in zip(triton_out, naive_out):
        assert got.dtype == want.dtype and torch.equal(got, want)
    assert_within_naive_error("grad x", triton_grads[0], naive_grads[0], ref_grads[0])


@case_params
def test_grouped_swiglu_matches_naive(monkeypatch, case):
    ids = make_ids(case)
    counts = torch.bincount(ids.reshape(-1), minlength=case.e)  # [E]
    m = case.n * case.k
    x_sorted = torch.randn(m, case.d)
    gate, up = torch.randn(2, case.e, case.f, case.d) / case.d**0.5
    down = torch.randn(case.e, case.d, case.f) / case.f**0.5
    (triton_out, triton_grads), (naive_out, naive_grads), (ref_out, ref_grads) = run_both(
        monkeypatch,
        lambda x, g, u, dn: [moe_ops.grouped_swiglu(x, counts, g, u, dn)],
        [x_sorted, gate, up, down],
        [torch.randn(m, case.d)],
    )
    assert_within_naive_error("y", triton_out[0], naive_out[0], ref_out[0])
    for name, got, want, ref in zip(("x", "gate", "up", "down"), triton_grads, naive_grads, ref_grads):
        assert_within_naive_error(f"grad {name}", got, want, ref)
    if case.idle >= 0:
        for got in triton_grads[1:]:
            assert torch.equal(got[case.idle], torch.zeros_like(got[case.idle])), "idle expert grads must be 0"


@case_params
def test_unpermute_combine_matches_naive(monkeypatch, case):
    order = torch.argsort(make_ids(case).reshape(-1), stable=True)  # [M]
    y_sorted = torch.randn(case.n * case.k, case.d)
    weights = torch.rand(case.n, case.k)

    # naive upcasts to fp32 (not to fp64), so the fp64 reference is written out here.
    def reference(y, w):
        copies = y[torch.argsort(order)].view(case.n, case.k, case.d)  # [N, k, D]
        return [(copies * w[..., None]).sum(1)]

    (triton_out, triton_grads), (naive_out, naive_grads), (ref_out, ref_grads) = run_both(
        monkeypatch,
        lambda y, w: [moe_ops.unpermute_combine(y, order, w)],
        [y_sorted, weights],
        [torch.randn(case.n, case.d)],
        ref_fn=reference,
    )
    assert_within_naive_error("out", triton_out[0], naive_out[0], ref_out[0])
    for name, got, want, ref in zip(("y_sorted", "weights"), triton_grads, naive_grads, ref_grads):
        assert_within_naive_error(f"grad {name}", got, want, ref)


@pytest.mark.parametrize("path", ["naive", "triton"])
def test_permute_hand_built(monkeypatch, path):
    use(monkeypatch, path)
    x = torch.arange(3.0)[:, None].repeat(1, 2)  # token n is the row [n, n]
    ids = torch.tensor([[2, 0], [0, 2], [2, 1]])  # copies 0..5 -> experts 2, 0, 0, 2, 2, 1
    x_sorted, order, counts = moe_ops.permute(x, ids, 4)
    assert order.tolist() == [1, 2, 5, 0, 3, 4]  # stable: each expert keeps copy order
    assert counts.tolist() == [2, 1, 3, 0]
    assert x_sorted[:, 0].tolist() == [0, 1, 2, 0, 1, 2]


@pytest.mark.parametrize("path", ["naive", "triton"])
@pytest.mark.parametrize("n_tokens", [0, 1, 7], ids=["empty", "one-token", "seven-tokens"])
def test_grouped_swiglu_and_combine_against_per_copy_loop(monkeypatch, path, n_tokens):
    use(monkeypatch, path)
    e, d, f, k = 5, 6, 4, 2
    x = torch.randn(n_tokens, d)
    ids = torch.randint(0, e - 1, (n_tokens, k))  # expert e - 1 never chosen
    weights = torch.rand(n_tokens, k)
    gate, up, down = torch.randn(e, f, d), torch.randn(e, f, d), torch.randn(e, d, f)
    x_sorted, order, counts = moe_ops.permute(x, ids, e)
    y_sorted = moe_ops.grouped_swiglu(x_sorted, counts, gate, up, down)
    y = moe_ops.unpermute_combine(y_sorted, order, weights)
    ref = torch.zeros(n_tokens, d)
    for n in range(n_tokens):
        for j in range(k):
            ex = ids[n, j]
            ref[n] += weights[n, j] * (down[ex] @ (F.silu(gate[ex] @ x[n]) * (up[ex] @ x[n])))
    assert y.shape == (n_tokens, d)
    torch.testing.assert_close(y, ref, atol=1e-4, rtol=1e-5)


def test_triton_path_rejects_bad_shapes_and_counts(monkeypatch):
    use(monkeypatch, "triton")
    e, d, f = 3, 8, 16
    x_sorted = torch.randn(5, d)
    gate, up, down = torch.randn(e, f, d), torch.randn(e, f, d), torch.randn(e, d, f)
    counts = torch.tensor([2, 0, 3])
    with pytest.raises(ValueError, match="down \\[E, D, F\\]"):
        moe_ops.grouped_swiglu(x_sorted, counts, gate, up, down.transpose(1, 2))
    with pytest.raises(RuntimeError, match="counts must sum"):
        moe_ops.grouped_swiglu(x_sorted, torch.tensor([2, 0, 2]), gate, up, down)
    with pytest.raises(ValueError, match="weights \\[N, k\\]"):
        moe_ops.unpermute_combine(x_sorted, torch.arange(5), torch.rand(2, 2))
    with pytest.raises(ValueError, match="expert_ids \\[N, k\\]"):
        moe_ops.permute(x_sorted, torch.zeros(4, 1, dtype=torch.long), e)


def test_dispatch_env_override(monkeypatch):
    from jointrl.kernels.moe import triton as triton_ops

    x = torch.randn(2, 3)
    ids = torch.tensor([[0], [1]])
    monkeypatch.setenv("JOINTRL_KERNELS", "naive")
    assert select_ops(moe_ops.__name__, naive, x) is naive
    assert moe_ops.permute(x, ids, 2)[2].tolist() == [1, 1]
    # CPU tensors go to naive unless forced; forced, the Triton kernels run under the interpreter.
    monkeypatch.setenv("JOINTRL_KERNELS", "triton")
    assert select_ops(moe_ops.__name__, naive, x) is triton_ops
    assert moe_ops.permute(x, ids, 2)[2].tolist() == [1, 1]
    monkeypatch.delenv("JOINTRL_KERNELS")
    assert select_ops(moe_ops.__name__, naive, x) is naive
    monkeypatch.setenv("JOINTRL_KERNELS", "cuda")
    with pytest.raises(ValueError, match="JOINTRL_KERNELS='cuda'"):
        moe_ops.permute(x, ids, 2)
