"""MXFP4 matmul kernels (interpreted Triton) against the naive path and an fp64 decode from the spec's tables.

Outputs are NaN-poisoned before each kernel call. The decoded weights are exact on both paths, so the only
error is summation order: measured against fp64 in units of sum |products| (the scale fp rounding works
at), the Triton error must stay within twice the naive error plus one unit of the dtype's precision.
"""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from jointrl.kernels import mxfp4
from jointrl.kernels.dispatch import select_ops
from jointrl.kernels.mxfp4 import naive
from jointrl.model.mxfp4 import MXFP4Experts
from jointrl.model.presets import PRESETS

MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
# One unit of each dtype's precision: the floor under "twice the naive error".
FLOOR = {torch.float32: 2.0**-23, torch.bfloat16: 2.0**-7}


@pytest.fixture
def triton_path(monkeypatch):
    """Force the Triton kernels (interpreted on CPU) and NaN-poison their output buffers."""
    monkeypatch.setenv("JOINTRL_KERNELS", "triton")
    monkeypatch.setenv("JOINTRL_POISON_OUTPUTS", "1")


def ref_decode(blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """fp64 weights [..., N, K] from the spec: low nibble first, sign bit 3, magnitude bits 0-2, scale 2^(s-127)."""
    b = blocks.long()
    codes = torch.stack((b % 16, b // 16), dim=-1).flatten(-2)  # [..., N, B, 32]
    value = torch.tensor(MAGNITUDES, dtype=torch.float64)[codes % 8] * (1.0 - 2.0 * (codes >= 8).double())
    scale = torch.tensor([math.ldexp(1.0, s - 127) if s != 255 else math.nan for s in range(256)], dtype=torch.float64)
    return (value * scale[scales.long()].unsqueeze(-1)).flatten(-2)  # [..., N, K]


def random_weight(n: int, k: int, experts: int | None = None, scale_bytes=(118, 136)) -> tuple[torch.Tensor, ...]:
    """Random codes and scale bytes in [low, high): blocks [(E,) N, K/32, 16], scales [(E,) N, K/32]."""
    lead = () if experts is None else (experts,)
    blocks = torch.randint(0, 256, (*lead, n, k // 32, 16), dtype=torch.uint8)
    scales = torch.randint(*scale_bytes, (*lead, n, k // 32), dtype=torch.uint8)
    return blocks, scales


def run(fn, x: torch.Tensor, bias: torch.Tensor | None, dy: torch.Tensor, *args):
    """fn's output and the gradients of <output, dy> w.r.t. fresh copies of x and bias."""
    x = x.detach().clone().requires_grad_(True)
    bias = None if bias is None else bias.detach().clone().requires_grad_(True)
    out = fn(x, *args, bias)
    out.backward(dy)
    return out.detach(), x.grad, None if bias is None else bias.grad


def scaled_error(got: torch.Tensor, want: torch.Tensor, magnitude: torch.Tensor) -> float:
    """max |got - want| / magnitude (NaN-propagating, so an unwritten element shows up as NaN); 0 when empty."""
    if want.numel() == 0:
        return 0.0
    return ((got.double() - want).abs() / magnitude.clamp_min(1e-300)).max().item()


def assert_within_bound(got, naive_got, want, magnitude, dtype) -> None:
    """Triton error <= 2 x naive error + FLOOR[dtype], both measured against fp64."""
    ours = scaled_error(got, want, magnitude)
    theirs = scaled_error(naive_got, want, magnitude)
    assert math.isfinite(theirs), "the naive path overflowed: the bound would hold vacuously"
    assert ours <= 2 * theirs + FLOOR[dtype], f"scaled error {ours:.3g} vs naive {theirs:.3g}"


def check_dense(x, blocks, scales, bias, dtype=torch.float32, dy_scale=1.0) -> None:
    """Forward, grad x and grad bias of the dispatched (Triton) matmul against naive and fp64."""
    w = ref_decode(blocks, scales)  # [N, K]
    dy = (torch.randn(*x.shape[:-1], w.shape[0]) * dy_scale).to(dtype)
    got = run(mxfp4.mxfp4_matmul, x, bias, dy, blocks, scales)
    base = run(naive.mxfp4_matmul, x, bias, dy, blocks, scales)
    assert got[0].shape == base[0].shape and got[0].dtype == base[0].dtype == dtype
    x64, dy64 = x.double(), dy.double()
    bias64 = torch.zeros(w.shape[0], dtype=torch.float64) if bias is None else bias.double()
    want = x64 @ w.t() + bias64
    magnitude = x64.abs() @ w.abs().t() + bias64.abs()
    assert_within_bound(got[0], base[0], want, magnitude, dtype)
    assert_within_bound(got[1], base[1], dy64 @ w, dy64.abs() @ w.abs(), dtype)
    if bias is not None:
        lead = tuple(range(dy.dim() - 1))
        assert got[2].dtype == bias.dtype
        assert_within_bound(got[2], base[2], dy64.sum(lead), dy64.abs().sum(lead), dtype)


SHAPES = {"M1-N40-K32": ((1,), 40, 32), "M63-N72-K96": ((63,), 72, 96), "M3x21-N40-K96": ((3, 21), 40, 96)}


@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("lead,n,k", SHAPES.values(), ids=SHAPES.keys())
def test_matmul_matches_naive_fp32(triton_path, lead, n, k, with_bias):
    blocks, scales = random_weight(n, k)
    check_dense(torch.randn(*lead, k), blocks, scales, torch.randn(n) if with_bias else None)


def test_matmul_matches_naive_bf16(triton_path):
    blocks, scales = random_weight(40, 96)
    x = torch.randn(63, 96).to(torch.bfloat16)
    check_dense(x, blocks, scales, torch.randn(40).to(torch.bfloat16), torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_decoded_weights_are_exact_in_forward_and_backward(triton_path, dtype):
    # All 256 code bytes and scale bytes up to 252 (byte 253 times code 6 overflows fp32). The interpreter's
    # fp32 <-> bf16 conversion flushes subnormals (a GPU's does not), so bf16 starts at byte 2, the first
    # whose values are all normal; fp32 covers bytes 0 and 1, whose small codes decode to subnormals.
    n, k = 40, 96
    low = 0 if dtype == torch.float32 else 2
    blocks = torch.arange(n * k // 2).remainder(256).to(torch.uint8).view(n, k // 32, 16)
    scales = torch.randint(low, 253, (n, k // 32), dtype=torch.uint8)
    scales[0, 0], scales[0, 1], scales[1, 0] = low, low + 1, 252
    want = ref_decode(blocks, scales).to(dtype)  # [N, K]
    assert torch.equal(want, naive.dequantize_mxfp4(blocks, scales, dtype))
    # Identity inputs turn each output element into a single product with 1 plus exact zeros.
    out = mxfp4.mxfp4_matmul(torch.eye(k, dtype=dtype), blocks, scales)  # [K, N]
    assert torch.equal(out, want.t())
    x = torch.zeros(n, k, dtype=dtype, requires_grad=True)
    mxfp4.mxfp4_matmul(x, blocks, scales).backward(torch.eye(n, dtype=dtype))
    assert torch.equal(x.grad, want)


@pytest.mark.parametrize("byte", [0, 254], ids=["scale-byte-0", "scale-byte-254"])
def test_extreme_scale_bytes(triton_path, byte):
    n, k = 40, 96
    blocks, _ = random_weight(n, k)
    scales = torch.full((n, k // 32), byte, dtype=torch.uint8)
    if byte == 254:
        # Magnitudes up to 1.5 (bits 0b1011 kept) keep 2^127 * code finite; larger codes overflow to inf.
        blocks &= 0xBB
    # x and grad_out compensate the scale so every product and sum is a normal fp32 number.
    compensate = 2.0**40 if byte == 0 else 2.0**-30
    check_dense(torch.randn(63, k) * compensate, blocks, scales, None, dy_scale=compensate)


def test_negative_zero_codes(triton_path):
    n, k = 40, 32
    blocks, scales = random_weight(n, k)
    codes = torch.stack((blocks & 0xF, blocks >> 4), dim=-1)
    codes = torch.where(torch.rand(codes.shape) < 0.5, 8, codes)  # half the codes are -0
    blocks = (codes[..., 0] | (codes[..., 1] << 4)).to(torch.uint8)
    check_dense(torch.randn(63, k), blocks, scales, torch.randn(n))
    all_negative_zero = torch.full_like(blocks, 0x88)
    assert torch.equal(mxfp4.mxfp4_matmul(torch.randn(63, k), all_negative_zero, scales), torch.zeros(63, n))


def test_nan_scale_byte_poisons_only_its_row_of_the_weight(triton_path):
    blocks, scales = random_weight(40, 96)
    scales[5, 2] = 0xFF
    x = torch.randn(63, 96)
    got = mxfp4.mxfp4_matmul(x, blocks, scales)
    assert torch.equal(got.isnan(), naive.mxfp4_matmul(x, blocks, scales).isnan())
    assert bool(got[:, 5].isnan().all()) and int(got.isnan().sum()) == 63
    keep = [c for c in range(40) if c != 5]
    w = ref_decode(blocks[keep], scales[keep]).t()  # [K, 39]
    base = naive.mxfp4_matmul(x, blocks[keep], scales[keep])
    assert_within_bound(got[:, keep], base, x.double() @ w, x.double().abs() @ w.abs(), torch.float32)


GROUPS = {"empty-expert": [3, 0, 17, 1], "one-expert": [0, 0, 21, 0], "no-rows": [0, 0, 0, 0]}


@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("sizes", GROUPS.values(), ids=GROUPS.keys())
def test_grouped_matmul_matches_naive(triton_path, sizes, with_bias):
    n, k = 40, 64
    counts = torch.tensor(sizes)
    blocks, scales = random_weight(n, k, experts=len(sizes))  # [E, N, B, 16], [E, N, B]
    x = torch.randn(sum(sizes), k)
    bias = torch.randn(len(sizes), n) if with_bias else None
    dy = torch.randn(sum(sizes), n)
    got = run(mxfp4.mxfp4_grouped_matmul, x, bias, dy, counts, blocks, scales)
    base = run(naive.mxfp4_grouped_matmul, x, bias, dy, counts, blocks, scales)
    assert got[0].shape == base[0].shape == (sum(sizes), n)
    group = torch.repeat_interleave(torch.arange(len(sizes)), counts)  # [M] expert of each row
    w = ref_decode(blocks, scales)[group]  # [M, N, K]
    bias64 = torch.zeros(len(sizes), n, dtype=torch.float64) if bias is None else bias.double()
    row_bias = bias64[group]  # [M, N]
    x64, dy64 = x.double(), dy.double()
    want = torch.einsum("mk,mnk->mn", x64, w) + row_bias
    magnitude = torch.einsum("mk,mnk->mn", x64.abs(), w.abs()) + row_bias.abs()
    assert_within_bound(got[0], base[0], want, magnitude, torch.float32)
    grad_x = torch.einsum("mn,mnk->mk", dy64, w)
    assert_within_bound(got[1], base[1], grad_x, torch.einsum("mn,mnk->mk", dy64.abs(), w.abs()), torch.float32)
    if with_bias:
        grad_bias = torch.zeros_like(bias64).index_add_(0, group, dy64)  # [E, N]
        magnitude = torch.zeros_like(bias64).index_add_(0, group, dy64.abs())
        assert_within_bound(got[2], base[2], grad_bias, magnitude, torch.float32)


class _Experts(nn.Module):
    def __init__(self, n_experts: int, dim: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Parameter(torch.randn(n_experts, hidden, dim) * 0.1)
        self.up_proj = nn.Parameter(torch.randn(n_experts, hidden, dim) * 0.1)
        self.down_proj = nn.Parameter(torch.randn(n_experts, dim, hidden) * 0.1)


def test_mxfp4_experts_on_triton_match_naive(triton_path, monkeypatch):
    cfg = PRESETS["debug"]
    holder = MXFP4Experts.from_experts(_Experts(cfg.n_experts, cfg.dim, cfg.expert_hidden))
    counts = torch.tensor([3, 0, 5, 2, 0, 1, 20, 0])
    x = torch.randn(int(counts.sum()), cfg.dim)
    got = holder(x, counts)
    monkeypatch.setenv("JOINTRL_KERNELS", "naive")
    want = holder(x, counts)
    # assert_close fails on NaN, so a row the grouped kernels left unwritten would show here.
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_dispatch_routes_by_override_and_device(monkeypatch):
    from jointrl.kernels.mxfp4 import triton as triton_ops

    x = torch.zeros(2, 32)
    monkeypatch.setenv("JOINTRL_KERNELS", "triton")
    assert select_ops("jointrl.kernels.mxfp4", naive, x) is triton_ops
    monkeypatch.delenv("JOINTRL_KERNELS")
    assert select_ops("jointrl.kernels.mxfp4", naive, x) is naive


BAD_CALLS = {
    "fp64-x": lambda b, s: mxfp4.mxfp4_matmul(torch.zeros(3, 64, dtype=torch.float64), b[0], s[0]),
    "k-mismatch": lambda b, s: mxfp4.mxfp4_matmul(torch.zeros(3, 32), b[0], s[0]),
    "bias-shape": lambda b, s: mxfp4.mxfp4_matmul(torch.zeros(3, 64), b[0], s[0], torch.zeros(5)),
    "grouped-one-weight": lambda b, s: mxfp4.mxfp4_grouped_matmul(torch.zeros(3, 64), torch.tensor([3]), b[0], s[0]),
    "grouped-counts-len": lambda b, s: mxfp4.mxfp4_grouped_matmul(torch.zeros(3, 64), torch.tensor([3]), b, s),
    "grouped-bias-shape": lambda b, s: mxfp4.mxfp4_grouped_matmul(
        torch.zeros(3, 64), torch.tensor([1, 2]), b, s, torch.zeros(4)
    ),
}


@pytest.mark.parametrize("call", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_bad_inputs_raise_value_error(triton_path, call):
    blocks, scales = random_weight(4, 64, experts=2)
    with pytest.raises(ValueError):
        call(blocks, scales)


def test_grouped_counts_that_miss_the_rows_fail(triton_path):
    blocks, scales = random_weight(4, 64, experts=2)
    with pytest.raises(RuntimeError, match="counts must be non-negative and sum"):
        mxfp4.mxfp4_grouped_matmul(torch.zeros(3, 64), torch.tensor([1, 1]), blocks, scales)
