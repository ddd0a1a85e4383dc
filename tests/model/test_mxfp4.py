"""MXFP4: spec codes by hand, a brute-force reference quantizer, decoding, the matmul, the experts holder, export."""
from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from jointrl.kernels.mxfp4 import dequantize_mxfp4, mxfp4_matmul, unpack_nibbles
from jointrl.model.mxfp4 import (
    MXFP4Experts,
    dequantize_state_dict,
    is_expert_weight,
    mxfp4_state_dict,
    pack_nibbles,
    quantization_config,
    quantize_experts_,
    quantize_mxfp4,
)
from jointrl.model.moe import MoE
from jointrl.model.presets import PRESETS

MAGNITUDES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def ref_codes(blocks: torch.Tensor) -> torch.Tensor:
    """Nibbles of [..., B, 16] bytes in element order (even element = low nibble): [..., B, 32] int64."""
    b = blocks.long()
    return torch.stack((b % 16, b // 16), dim=-1).flatten(-2)


def ref_decode(blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Float64 decode straight from the spec's tables: sign bit 3, magnitude index bits 0-2, scale 2^(s-127)."""
    codes = ref_codes(blocks)
    magnitude = torch.tensor(MAGNITUDES, dtype=torch.float64)[codes % 8]
    sign = 1.0 - 2.0 * (codes >= 8).double()
    scale = torch.tensor([math.ldexp(1.0, s - 127) if s != 255 else math.nan for s in range(256)], dtype=torch.float64)
    return (sign * magnitude * scale[scales.long()].unsqueeze(-1)).flatten(-2)


def ref_quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Brute force per element: exponent from math.log2, nearest magnitude by distance, ties to the even index."""
    x = w.double().unflatten(-1, (-1, 32))  # [..., B, 32]
    amax = x.abs().amax(-1)  # [..., B]
    exps = [max(-127, math.floor(math.log2(a)) - 2) if a > 0 else -127 for a in amax.flatten().tolist()]
    exps = torch.tensor(exps).view(amax.shape)
    scaled = x.abs() / torch.pow(2.0, exps.double()).unsqueeze(-1)
    distance = (scaled.unsqueeze(-1) - torch.tensor(MAGNITUDES, dtype=torch.float64)).abs()  # [..., B, 32, 8]
    odd = torch.tensor([i % 2 for i in range(8)], dtype=torch.float64)
    # Ties are exact in float64 and real gaps are far above 1e-9, so the nudge only breaks ties (to even).
    index = (distance + 1e-9 * odd).argmin(-1)
    codes = index + 8 * torch.signbit(x).long()
    return codes, exps + 127


def test_known_values_quantize_to_spec_codes():
    row_a = [0.25, 0.75, 2.5, 5.0, 7.0, -1.5, 1.25, 1.75, 3.5, 0.0, -0.25, 6.0, 0.3, 5.5, -3.0, 0.5]
    codes_a = [0, 2, 4, 6, 7, 0b1011, 2, 4, 6, 0, 0b1000, 7, 1, 7, 0b1101, 1]
    row_b = [1.0, 0.5, -0.125, 0.0625]  # amax 1 -> exponent -2: scaled 4, 2, -0.5, 0.25
    codes_b = [6, 4, 0b1001, 0]
    w = torch.zeros(3, 32)
    w[0, : len(row_a)] = torch.tensor(row_a)
    w[1, : len(row_b)] = torch.tensor(row_b)
    blocks, scales = quantize_mxfp4(w)
    assert blocks.shape == (3, 1, 16) and blocks.dtype == torch.uint8
    assert scales.tolist() == [[127], [125], [0]]
    codes = ref_codes(blocks)
    assert codes[0, 0].tolist() == codes_a + [0] * 16
    assert codes[1, 0].tolist() == codes_b + [0] * 28
    assert codes[2, 0].tolist() == [0] * 32
    # Even element in the low nibble: (0.25 -> 0, 0.75 -> 2) packs to 0x20; (7 -> 7, -1.5 -> 11) to 0xB7.
    assert blocks[0, 0, 0].item() == 0x20 and blocks[0, 0, 2].item() == 0xB7


def test_exponent_clamps_at_the_e8m0_range():
    w = torch.zeros(3, 32)
    w[0, 0] = math.ldexp(1.0, -130)  # floor(log2) - 2 = -132 clamps to -127; 2^-130 / 2^-127 = 0.125 -> 0
    w[1, 0] = math.ldexp(1.5, 127)  # floor(log2) = 127 -> exponent 125, byte 252; scaled 6
    w[1, 1] = -math.ldexp(1.0, 124)  # scaled -0.5
    w[2, 0] = math.ldexp(1.0, -149)  # smallest subnormal
    blocks, scales = quantize_mxfp4(w)
    assert scales.flatten().tolist() == [0, 252, 0]
    codes = ref_codes(blocks)
    assert codes[0, 0, 0].item() == 0 and codes[2, 0, 0].item() == 0
    assert codes[1, 0, :2].tolist() == [7, 0b1001]


def _random_weights(*shape: int) -> torch.Tensor:
    """Normal weights whose rows span twelve decades, so blocks get very different exponents."""
    w = torch.randn(*shape)
    return w * torch.pow(10.0, torch.empty(*shape[:-1], 1).uniform_(-6, 6))


def test_codes_and_scales_match_brute_force_reference():
    w = _random_weights(6, 128)
    # Exact midpoints times assorted powers of two exercise every tie.
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0])
    w[0, :32] = torch.cat([ties, -ties, ties * 0.5, 7.0 - ties * 0.1])
    w[1, 32:64] = torch.cat([ties, -ties, ties, ties]) * 2.0**-20
    codes, scales = quantize_mxfp4(w)
    want_codes, want_scales = ref_quantize(w)
    assert torch.equal(scales.long(), want_scales)
    assert torch.equal(ref_codes(codes), want_codes)


def test_pack_unpack_round_trip_over_all_bytes():
    every = torch.arange(256, dtype=torch.uint8)
    codes = unpack_nibbles(every)
    assert codes.tolist() == [nib for b in range(256) for nib in (b & 0x0F, b >> 4)]
    assert torch.equal(pack_nibbles(codes), every)
    assert pack_nibbles(torch.tensor([1, 2, 15, 0], dtype=torch.uint8)).tolist() == [0x21, 0x0F]


def test_quantize_is_idempotent_on_its_own_output():
    w = _random_weights(2, 3, 64)
    w[0, 0, :32] = 0.0
    w[1, 2, 32:] = math.ldexp(1.0, -140)
    blocks, scales = quantize_mxfp4(w)
    again_blocks, again_scales = quantize_mxfp4(dequantize_mxfp4(blocks, scales))
    assert torch.equal(again_blocks, blocks) and torch.equal(again_scales, scales)


def test_dequantized_error_within_the_theoretical_bound():
    w = _random_weights(16, 256)
    blocks, scales = quantize_mxfp4(w)
    error = (dequantize_mxfp4(blocks, scales).double() - w.double()).abs().unflatten(-1, (-1, 32))
    x = w.double().unflatten(-1, (-1, 32))
    amax = x.abs().amax(-1, keepdim=True)
    scale = torch.pow(2.0, torch.floor(torch.log2(amax)) - 2)
    m = x.abs() / scale
    # Half the E2M1 spacing around m, or the saturation gap above 6.
    half_spacing = torch.where(m <= 2, 0.25, torch.where(m <= 4, 0.5, 1.0))
    bound = torch.where(m > 6, m - 6, half_spacing) * scale
    assert bool((error <= bound).all())
    assert bool((error <= amax / 4).all())
    assert bool((m > 6).any()), "the sample should include saturated elements"


def test_dequantize_matches_reference_decode_for_every_scale_byte():
    blocks = torch.randint(0, 256, (256, 2, 16), dtype=torch.uint8)
    scales = torch.arange(256, dtype=torch.uint8).unsqueeze(1).expand(256, 2).contiguous()
    got = dequantize_mxfp4(blocks, scales)
    want = ref_decode(blocks, scales)
    assert got.shape == (256, 64) and got.dtype == torch.float32
    # Casting the exact float64 decode rounds only where fp32 overflows (6 * 2^127 -> inf).
    assert torch.equal(got[:255], want[:255].float())
    assert bool(got[255].isnan().all())
    half = dequantize_mxfp4(blocks[100:140], scales[100:140], torch.bfloat16)
    assert half.dtype == torch.bfloat16 and torch.equal(half, want[100:140].to(torch.bfloat16))


@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
def test_mxfp4_matmul_equals_x_times_decoded_weight(with_bias):
    n, k = 24, 96
    blocks = torch.randint(0, 256, (n, k // 32, 16), dtype=torch.uint8)
    scales = torch.randint(120, 134, (n, k // 32), dtype=torch.uint8)
    x = torch.randn(2, 3, k)
    bias = torch.randn(n) if with_bias else None
    want = x.double() @ ref_decode(blocks, scales).t()
    if with_bias:
        want = want + bias.double()
    got = mxfp4_matmul(x, blocks, scales, bias)
    assert got.shape == (2, 3, n) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-4)


def test_dispatch_honours_and_checks_the_override(monkeypatch):
    blocks = torch.randint(0, 256, (8, 1, 16), dtype=torch.uint8)
    scales = torch.full((8, 1), 127, dtype=torch.uint8)
    x = torch.randn(5, 32)
    want = x.double() @ ref_decode(blocks, scales).t()
    monkeypatch.setenv("JOINTRL_KERNELS", "naive")
    torch.testing.assert_close(mxfp4_matmul(x, blocks, scales).double(), want, rtol=1e-5, atol=1e-5)
    monkeypatch.setenv("JOINTRL_KERNELS", "cuda")
    with pytest.raises(ValueError, match="JOINTRL_KERNELS='cuda'"):
        mxfp4_matmul(x, blocks, scales)


class _Experts(nn.Module):
    """Stand-in for the full-precision routed experts: stacked [E, out, in] parameters."""

    def __init__(self, n_experts: int, dim: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Parameter(torch.randn(n_experts, hidden, dim) * 0.1)
        self.up_proj = nn.Parameter(torch.randn(n_experts, hidden, dim) * 0.1)
        self.down_proj = nn.Parameter(torch.randn(n_experts, dim, hidden) * 0.1)


def test_experts_forward_equals_loop_over_decoded_experts():
    cfg = PRESETS["debug"]
    experts = _Experts(cfg.n_experts, cfg.dim, cfg.expert_hidden)
    holder = MXFP4Experts.from_experts(experts)
    counts = torch.tensor([3, 0, 5, 2, 0, 1, 4, 0])  # experts 1, 4 and 7 get no tokens
    x = torch.randn(int(counts.sum()), cfg.dim)
    got = holder(x, counts)
    weights = {
        name: ref_decode(getattr(holder, name + "_blocks"), getattr(holder, name + "_scales"))
        for name in ("gate_proj", "up_proj", "down_proj")
    }
    want = torch.empty(x.shape, dtype=torch.float64)
    start = 0
    for e, n in enumerate(counts.tolist()):
        rows = x[start : start + n].double()
        hidden = F.silu(rows @ weights["gate_proj"][e].t()) * (rows @ weights["up_proj"][e].t())
        want[start : start + n] = hidden @ weights["down_proj"][e].t()
        start += n
    assert got.shape == x.shape and got.dtype == x.dtype
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    # The decoded weights are the quantized originals, within a quarter of each block's amax.
    original = experts.gate_proj.detach().double().unflatten(-1, (-1, 32))
    decoded = weights["gate_proj"].unflatten(-1, (-1, 32))
    assert bool(((decoded - original).abs() <= original.abs().amax(-1, keepdim=True) / 4).all())


def test_moe_layer_with_mxfp4_experts_matches_its_decoded_full_precision_twin():
    cfg = PRESETS["debug"]
    layer = MoE(cfg, layer_idx=cfg.first_dense_layers)
    twin = copy.deepcopy(layer)
    assert quantize_experts_(layer) == 1 and isinstance(layer.experts, MXFP4Experts)
    with torch.no_grad():
        for name in ("gate_proj", "up_proj", "down_proj"):
            decoded = ref_decode(getattr(layer.experts, name + "_blocks"), getattr(layer.experts, name + "_scales"))
            getattr(twin.experts, name).copy_(decoded)
    x = torch.randn(2, 7, cfg.dim)
    got, got_aux = layer(x)
    want, want_aux = twin(x)
    assert torch.equal(got_aux["expert_ids"], want_aux["expert_ids"])
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


class _Block(nn.Module):
    def __init__(self, n_experts: int, dim: int, hidden: int):
        super().__init__()
        self.attn = nn.Linear(dim, dim)
        self.router = nn.Linear(dim, n_experts, bias=False)
        self.experts = _Experts(n_experts, dim, hidden)


def _tiny_model() -> nn.Module:
    cfg = PRESETS["debug"]
    model = nn.Module()
    model.embed = nn.Embedding(cfg.vocab_size, cfg.dim)
    model.layers = nn.ModuleList(_Block(cfg.n_experts, cfg.dim, cfg.expert_hidden) for _ in range(2))
    return model


def test_state_dict_export_import_round_trip():
    model = _tiny_model()
    full = model.state_dict()
    exported = mxfp4_state_dict(full)
    expert_names = [n for n in full if n.endswith(("gate_proj", "up_proj", "down_proj"))]
    assert len(expert_names) == 6
    want_keys = []
    for name in full:
        want_keys += [name + "_blocks", name + "_scales"] if name in expert_names else [name]
    assert list(exported) == want_keys
    for name in full:
        if name not in expert_names:
            assert exported[name] is full[name]
    restored = dequantize_state_dict(exported)
    assert list(restored) == list(full)
    for name in expert_names:
        blocks, scales = exported[name + "_blocks"], exported[name + "_scales"]
        assert torch.equal(restored[name].double(), ref_decode(blocks, scales))
        assert torch.equal(mxfp4_state_dict({name: restored[name]})[name + "_blocks"], blocks)
    # A caller-chosen predicate: quantize only the router.
    routers = mxfp4_state_dict(full, lambda name, t: name.endswith("router.weight"))
    assert "layers.0.router.weight_blocks" in routers and "layers.0.experts.gate_proj" in routers
    assert is_expert_weight("x.experts.down_proj", full["layers.0.experts.down_proj"])
    assert not is_expert_weight("x.mlp.gate_proj.weight", torch.zeros(4, 32))


def test_quantized_model_loads_the_exported_checkpoint():
    model = _tiny_model()
    exported = mxfp4_state_dict(model.state_dict())
    assert quantize_experts_(model) == 2
    assert all(isinstance(block.experts, MXFP4Experts) for block in model.layers)
    assert isinstance(model.layers[0].router, nn.Linear)
    fresh = _tiny_model()
    quantize_experts_(fresh)
    fresh.load_state_dict(exported, strict=True)
    for key, value in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[key], value), key


def test_quantization_config():
    keep = ["model.layers.*.attn", "model.layers.*.router", "model.embed", "lm_head"]
    assert quantization_config(keep) == {"quant_method": "mxfp4", "modules_to_not_convert": keep}
    assert quantization_config(()) == {"quant_method": "mxfp4", "modules_to_not_convert": []}


def _experts_holder() -> MXFP4Experts:
    return MXFP4Experts(n_experts=2, dim=32, hidden=64)


BAD_CALLS = {
    "quantize-k-33": lambda: quantize_mxfp4(torch.zeros(4, 33)),
    "quantize-int": lambda: quantize_mxfp4(torch.zeros(4, 32, dtype=torch.int32)),
    "quantize-inf": lambda: quantize_mxfp4(torch.full((1, 32), math.inf)),
    "dequantize-scales-shape": lambda: dequantize_mxfp4(
        torch.zeros(4, 2, 16, dtype=torch.uint8), torch.zeros(4, 3, dtype=torch.uint8)
    ),
    "dequantize-15-bytes": lambda: dequantize_mxfp4(
        torch.zeros(4, 2, 15, dtype=torch.uint8), torch.zeros(4, 2, dtype=torch.uint8)
    ),
    "dequantize-not-uint8": lambda: dequantize_mxfp4(torch.zeros(4, 2, 16), torch.zeros(4, 2, dtype=torch.uint8)),
    "matmul-k-mismatch": lambda: mxfp4_matmul(
        torch.zeros(3, 48), torch.zeros(4, 2, 16, dtype=torch.uint8), torch.zeros(4, 2, dtype=torch.uint8)
    ),
    "matmul-bias-shape": lambda: mxfp4_matmul(
        torch.zeros(3, 64), torch.zeros(4, 2, 16, dtype=torch.uint8), torch.zeros(4, 2, dtype=torch.uint8),
        torch.zeros(5),
    ),
    "pack-odd": lambda: pack_nibbles(torch.zeros(3, dtype=torch.uint8)),
    "experts-dim-48": lambda: MXFP4Experts(n_experts=2, dim=48, hidden=64),
    "experts-counts-sum": lambda: _experts_holder()(torch.zeros(5, 32), torch.tensor([2, 2])),
    "experts-counts-len": lambda: _experts_holder()(torch.zeros(4, 32), torch.tensor([1, 1, 2])),
    "experts-x-width": lambda: _experts_holder()(torch.zeros(4, 64), torch.tensor([2, 2])),
    "from-experts-shapes": lambda: MXFP4Experts.from_experts(
        type("M", (), {"gate_proj": torch.zeros(2, 64, 32), "up_proj": torch.zeros(2, 64, 32),
                       "down_proj": torch.zeros(2, 64, 32)})()
    ),
    "orphan-blocks": lambda: dequantize_state_dict({"w_blocks": torch.zeros(1, 1, 16, dtype=torch.uint8)}),
    "orphan-scales": lambda: dequantize_state_dict({"w_scales": torch.zeros(1, 1, dtype=torch.uint8)}),
    "config-string": lambda: quantization_config("lm_head"),
}


@pytest.mark.parametrize("call", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_bad_inputs_raise_value_error(call):
    with pytest.raises(ValueError):
        call()
