"""KDA op: the interpreted Triton kernels against the pure-torch ground truth, forward and gradients.

Truth is the step recurrence run in fp64 (`recurrence64` below). For each output and each gradient the
Triton path's max error against truth may be at most twice the naive path's own error in the same
precision (flash-attention's rule), plus a floor of a few ulps of the quantity's largest value for the
case where the naive path happens to round almost exactly: 8 fp32 ulps; 1 bf16 ulp for bf16 inputs,
whose outputs are stored in bf16. Every call goes through `jointrl.kernels.kda` with the dispatch forced
to Triton and kernel outputs poisoned with NaN, so an element no program writes fails the comparison.
"""
import functools

import pytest
import torch
import torch.nn.functional as F

from jointrl.kernels import kda as op
from jointrl.kernels.dispatch import select_ops
from jointrl.kernels.kda import naive
from jointrl.kernels.kda import triton as kda_triton

FLOOR_ULPS = {torch.float32: 8, torch.bfloat16: 1}

# id: (B, T, H, K, V, chunk_size, log decay per step, with initial state)
CHUNK_CASES = {
    # T = 63 is no multiple of the chunk: 3 full chunks and a ragged one of 15 rows.
    "T63-C16-H2-K16-V32-state": (1, 63, 2, 16, 32, 16, "mild", True),
    # Two 16-row sub-chunks per chunk: the off-diagonal reference-point blocks run; K != V, neither a tile.
    "T63-C32-H1-K20-V24-no-state": (1, 63, 1, 20, 24, 32, "mild", False),
    # T < chunk: a single ragged chunk; two sequences.
    "B2-T10-C16-H1-K16-V16-one-chunk": (2, 10, 1, 16, 16, 16, "mild", True),
    # A chunk size that is no multiple of the 16-row sub-chunk (2 sub-chunks, the second 4 rows).
    "T45-C20-H1-K16-V16-state": (1, 45, 1, 16, 16, 20, "mild", True),
    # g ~ -5 per step inside one 64-row chunk: exp(G) spans e^-300, 4 sub-chunks, one reference each.
    "T63-C64-H1-K16-V16-strong-decay": (1, 63, 1, 16, 16, 64, "strong", True),
    # A chunk longer than the kernels tile (MAX_CHUNK): runs as 64-token chunks, same result.
    "T70-C100-H1-K16-V16-state": (1, 70, 1, 16, 16, 100, "mild", True),
}

# id: (B, T, H, K, V, log decay per step, with initial state)
RECURRENT_CASES = {
    "T17-H2-K16-V32-state": (1, 17, 2, 16, 32, "mild", True),
    "T1-H1-K20-V16-decode-step": (2, 1, 1, 20, 16, "mild", True),
    "T12-H1-K16-V16-strong-decay-no-state": (1, 12, 1, 16, 16, "strong", False),
}


@pytest.fixture
def triton_path(monkeypatch):
    """Forces the Triton path with poisoned outputs, and checks the dispatch really hands out Triton."""
    monkeypatch.setenv("JOINTRL_KERNELS", "triton")
    monkeypatch.setenv("JOINTRL_POISON_OUTPUTS", "1")
    assert select_ops(op.__name__, naive, torch.zeros(1)) is kda_triton


def make_inputs(b, t, h, dk, dv, decay, with_state, dtype=torch.float32):
    """Model-like inputs: unit-norm keys, beta in (0, 1), g <= 0 ('strong': about -5 per step)."""
    q = torch.randn(b, t, h, dk)
    k = F.normalize(torch.randn(b, t, h, dk), dim=-1)
    v = torch.randn(b, t, h, dv)
    if decay == "strong":
        g = -5.0 + 0.5 * torch.rand(b, t, h, dk)
    else:
        g = -F.softplus(torch.randn(b, t, h, dk) - 1.0)
    beta = torch.rand(b, t, h)
    state = torch.randn(b, h, dk, dv) if with_state else None
    inputs = {"q": q, "k": k, "v": v, "g": g, "beta": beta, "initial_state": state}
    return {name: x.to(dtype) if x is not None else None for name, x in inputs.items()}


def recurrence64(q, k, v, g, beta, scale, initial_state=None, output_final_state=False):
    """The step recurrence of naive.py in fp64: the truth both paths are measured against."""
    b, t, h, dk = q.shape
    state = initial_state if initial_state is not None else q.new_zeros(b, h, dk, v.shape[-1])  # [B, H, K, V]
    outputs = []
    for i in range(t):
        state = g[:, i].exp()[..., None] * state
        residual = v[:, i] - torch.einsum("bhk,bhkv->bhv", k[:, i], state)  # [B, H, V]
        state = state + torch.einsum("bhk,bhv->bhkv", beta[:, i, :, None] * k[:, i], residual)
        outputs.append(torch.einsum("bhk,bhkv->bhv", scale * q[:, i], state))
    return torch.stack(outputs, dim=1), state if output_final_state else None  # [B, T, H, V]


def run(fn, inputs, scale, precision=None, **kwargs):
    """Outputs and gradients of one path as fp64: {name: tensor}. precision casts the inputs first."""
    leaves = {
        name: (x.to(precision) if precision else x).clone().requires_grad_()
        for name, x in inputs.items()
        if x is not None
    }
    args = [leaves.get(name) for name in ("q", "k", "v", "g", "beta", "initial_state")]
    o, final = fn(*args[:5], scale, args[5], True, **kwargs)
    # Fixed cotangents of both signs on both outputs, so the state gradient path is exercised too.
    gen = torch.Generator().manual_seed(1)
    loss = (o.double() * torch.randn(o.shape, generator=gen, dtype=torch.float64)).sum()
    loss = loss + (final.double() * torch.randn(final.shape, generator=gen, dtype=torch.float64)).sum()
    loss.backward()
    result = {"o": o, "final_state": final}
    result.update({f"d_{name}": leaf.grad for name, leaf in leaves.items()})
    return {name: x.detach().double() for name, x in result.items()}


def assert_close_to_truth(got, naive_got, truth, dtype):
    """Each tensor's max error vs truth is at most 2x the naive path's own, plus a floor of a few ulps."""
    ulp = torch.finfo(dtype).eps
    for name, want in truth.items():
        assert got[name].shape == want.shape, f"{name}: shape {tuple(got[name].shape)} != {tuple(want.shape)}"
        err = (got[name] - want).abs().max().item()
        naive_err = (naive_got[name] - want).abs().max().item()
        bound = 2.0 * naive_err + FLOOR_ULPS[dtype] * ulp * want.abs().max().item()
        assert err <= bound, f"{name}: error {err:.3g} > bound {bound:.3g} (naive error {naive_err:.3g})"


@pytest.mark.parametrize("case", CHUNK_CASES.values(), ids=CHUNK_CASES.keys())
def test_chunk_matches_truth(case, triton_path):
    b, t, h, dk, dv, chunk, decay, with_state = case
    inputs = make_inputs(b, t, h, dk, dv, decay, with_state)
    scale = dk**-0.5
    got = run(op.chunk_kda, inputs, scale, chunk_size=chunk)
    naive_got = run(naive.chunk_kda, inputs, scale, chunk_size=chunk)
    truth = run(recurrence64, inputs, scale, precision=torch.float64)
    assert_close_to_truth(got, naive_got, truth, torch.float32)


@pytest.mark.parametrize("case", RECURRENT_CASES.values(), ids=RECURRENT_CASES.keys())
def test_recurrent_matches_truth(case, triton_path):
    b, t, h, dk, dv, decay, with_state = case
    inputs = make_inputs(b, t, h, dk, dv, decay, with_state)
    scale = dk**-0.5
    got = run(op.recurrent_kda, inputs, scale)
    naive_got = run(naive.recurrent_kda, inputs, scale)
    # The Triton backward differentiates the chunk form, so its gradients answer to the naive chunk form's.
    chunk = min(kda_triton.RECURRENT_BACKWARD_CHUNK, t)
    naive_chunk = run(naive.chunk_kda, inputs, scale, chunk_size=chunk)
    naive_got.update({name: x for name, x in naive_chunk.items() if name.startswith("d_")})
    truth = run(recurrence64, inputs, scale, precision=torch.float64)
    assert_close_to_truth(got, naive_got, truth, torch.float32)


def test_chunk_bf16_matches_truth(triton_path):
    inputs = make_inputs(1, 20, 1, 16, 16, "mild", True, dtype=torch.bfloat16)
    got = run(op.chunk_kda, inputs, 0.25, chunk_size=16)
    naive_got = run(naive.chunk_kda, inputs, 0.25, chunk_size=16)
    truth = run(recurrence64, inputs, 0.25, precision=torch.float64)
    assert got["o"].shape == truth["o"].shape
    assert_close_to_truth(got, naive_got, truth, torch.bfloat16)


@pytest.mark.parametrize("continuation", ["chunk", "recurrent"])
def test_state_carried_across_two_calls(continuation, triton_path):
    """A chunked prefill, then a second chunked call or decode steps from its state, equals one call."""
    inputs = make_inputs(1, 40, 2, 16, 24, "mild", True)
    split = 23 if continuation == "chunk" else 37
    follow = {"chunk": functools.partial(op.chunk_kda, chunk_size=16), "recurrent": op.recurrent_kda}[continuation]

    def two_calls(q, k, v, g, beta, scale, initial_state, output_final_state):
        first, rest = ([x[:, :split] for x in (q, k, v, g, beta)], [x[:, split:] for x in (q, k, v, g, beta)])
        o1, state = op.chunk_kda(*first, scale, initial_state, True, chunk_size=16)
        o2, final = follow(*rest, scale, state, output_final_state)
        return torch.cat([o1, o2], dim=1), final  # [B, T, H, V]

    got = run(two_calls, inputs, 0.25)
    naive_got = run(naive.chunk_kda, inputs, 0.25, chunk_size=16)
    truth = run(recurrence64, inputs, 0.25, precision=torch.float64)
    assert_close_to_truth(got, naive_got, truth, torch.float32)


@pytest.mark.parametrize("fn", ["chunk_kda", "recurrent_kda"])
def test_rejects_what_naive_rejects(fn, triton_path):
    inputs = make_inputs(1, 4, 1, 16, 16, "mild", True)
    call = getattr(op, fn)
    empty = {name: x[:, :0] if name != "initial_state" else x for name, x in inputs.items()}
    with pytest.raises(ValueError, match="at least one token"):
        call(*list(empty.values())[:5], 0.25, empty["initial_state"])
    with pytest.raises(ValueError, match="initial_state"):
        call(*list(inputs.values())[:5], 0.25, inputs["initial_state"][..., :8])
    if fn == "chunk_kda":
        with pytest.raises(ValueError, match="chunk_size=0"):
            call(*list(inputs.values())[:5], 0.25, chunk_size=0)
