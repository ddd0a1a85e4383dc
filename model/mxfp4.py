"""MXFP4 weights for inference: quantize and pack, MXFP4-held routed experts, and checkpoint export/import.

Shape legend: E = experts, D = dim, F = expert width, N = rows, K = contraction dim, B = K / 32 blocks,
M = tokens sorted by expert, ... = leading dims.

Quantization follows OCP Microscaling MX v1.0 (decoding lives in jointrl.kernels.mxfp4): a block of 32
elements along K with largest magnitude amax gets the scale 2^e, e = floor(log2 amax) - 2 clamped to
[-127, 127] (an all-zero block gets e = -127, byte 0), and each element x becomes the E2M1 value nearest
x / 2^e, ties to the even code, saturating at ±6.

Error bound per block: an element with |x| <= 6 * 2^e is off by at most half the local E2M1 spacing
times 2^e (0.25 * 2^e below 2 * 2^e, 0.5 * 2^e below 4 * 2^e, 2^e up to 6 * 2^e); an element above
6 * 2^e (possible only when amax / 2^e lies in (6, 8)) saturates with error |x| - 6 * 2^e. Both are at
most amax / 4, so every element of a block is within amax / 4 of its original. A block whose amax is
below 2^-125 has its exponent clamped at -127 and errors of at most 2^-128.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from jointrl.kernels.mxfp4 import (
    BLOCK_SIZE,
    SCALE_BIAS,
    dequantize_mxfp4,
    e8m0_to_float,
    mxfp4_grouped_matmul,
    unpack_nibbles,
)

BLOCKS_SUFFIX = "_blocks"
SCALES_SUFFIX = "_scales"
EXPERT_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")
# Midpoints between neighbouring E2M1 magnitudes. A tie goes to the even code: midpoints above an even
# code round down (the magnitude must exceed them), midpoints above an odd code round up (reaching is enough).
_ROUND_UP_ABOVE = (0.25, 1.25, 2.5, 5.0)
_ROUND_UP_FROM = (0.75, 1.75, 3.5)

__all__ = [
    "MXFP4Experts",
    "dequantize_mxfp4",
    "dequantize_state_dict",
    "is_expert_weight",
    "mxfp4_state_dict",
    "pack_nibbles",
    "quantization_config",
    "quantize_experts_",
    "quantize_mxfp4",
    "unpack_nibbles",
]


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """Pack 4-bit codes uint8 [..., 2P] two per byte, the even element in the low nibble: [..., P]."""
    if codes.shape[-1] % 2:
        raise ValueError(f"pack_nibbles needs an even last dim, got shape {tuple(codes.shape)}")
    if codes.dtype != torch.uint8:
        raise ValueError(f"pack_nibbles takes uint8 codes, got {codes.dtype}")
    pairs = codes.unflatten(-1, (-1, 2))  # [..., P, 2]
    return (pairs[..., 0] & 0x0F) | (pairs[..., 1] << 4)  # [..., P]


def quantize_mxfp4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize w [..., N, K] (K % 32 == 0) to blocks uint8 [..., N, K/32, 16] and scales uint8 [..., N, K/32]."""
    if not w.is_floating_point() or w.dim() == 0:
        raise ValueError(f"quantize_mxfp4 takes a floating tensor [..., K], got {w.dtype} of shape {tuple(w.shape)}")
    k = w.shape[-1]
    if k == 0 or k % BLOCK_SIZE:
        raise ValueError(f"MXFP4 needs the last (contraction) dim to be a positive multiple of 32, got {k}")
    x = w.detach().float().unflatten(-1, (k // BLOCK_SIZE, BLOCK_SIZE))  # [..., N, B, 32]
    if not bool(torch.isfinite(x).all()):
        raise ValueError("quantize_mxfp4 got inf or NaN; MXFP4 elements must be finite")
    magnitude = x.abs()
    amax = magnitude.amax(dim=-1)  # [..., N, B]
    # frexp gives amax = m * 2^p with m in [0.5, 1), so floor(log2 amax) = p - 1 exactly, subnormals included.
    _, p = torch.frexp(amax)
    exponent = (p.to(torch.int32) - 1 - 2).clamp(-SCALE_BIAS, SCALE_BIAS)
    exponent = torch.where(amax > 0, exponent, torch.full_like(exponent, -SCALE_BIAS))  # [..., N, B]
    # 2^-e is the E8M0 value of byte 127 - e, exact, so the scaled magnitudes carry no rounding error.
    inverse_scale = e8m0_to_float((SCALE_BIAS - exponent).to(torch.uint8))  # [..., N, B]
    scaled = magnitude * inverse_scale.unsqueeze(-1)  # [..., N, B, 32]
    up_above = torch.tensor(_ROUND_UP_ABOVE, device=x.device)
    up_from = torch.tensor(_ROUND_UP_FROM, device=x.device)
    # Index of the nearest magnitude = midpoints passed; the top index 7 (6.0) absorbs everything above 5.
    index = torch.bucketize(scaled, up_above, right=False) + torch.bucketize(scaled, up_from, right=True)
    sign = torch.signbit(x).to(torch.uint8) << 3
    codes = sign | index.to(torch.uint8)  # [..., N, B, 32]
    blocks = pack_nibbles(codes)  # [..., N, B, 16]
    scales = (exponent + SCALE_BIAS).to(torch.uint8)  # [..., N, B]
    return blocks, scales


class MXFP4Experts(nn.Module):
    """Routed experts whose stacked SwiGLU weights are held as MXFP4 buffers, for inference.

    Same forward as the full-precision experts: (x_sorted [M, D], counts [E]) -> [M, D], tokens grouped by
    expert. Weights are decoded one expert at a time, so the full-precision stack never exists at once.
    Buffer names (gate_proj_blocks, gate_proj_scales, ...) match mxfp4_state_dict's keys, so an exported
    checkpoint loads straight into a model whose experts were replaced by this module.
    """

    def __init__(self, n_experts: int, dim: int, hidden: int, device: torch.device | str | None = None):
        super().__init__()
        for name, size in (("dim", dim), ("hidden", hidden)):
            if size <= 0 or size % BLOCK_SIZE:
                raise ValueError(f"MXFP4 experts need {name} to be a positive multiple of 32, got {size}")
        if n_experts <= 0:
            raise ValueError(f"n_experts must be positive, got {n_experts}")
        self.n_experts, self.dim, self.hidden = n_experts, dim, hidden
        shapes = {"gate_proj": (hidden, dim), "up_proj": (hidden, dim), "down_proj": (dim, hidden)}
        for name, (rows, cols) in shapes.items():
            blocks = torch.zeros(n_experts, rows, cols // BLOCK_SIZE, BLOCK_SIZE // 2, dtype=torch.uint8, device=device)
            scales = torch.zeros(n_experts, rows, cols // BLOCK_SIZE, dtype=torch.uint8, device=device)
            self.register_buffer(name + BLOCKS_SUFFIX, blocks)  # [E, rows, cols/32, 16]
            self.register_buffer(name + SCALES_SUFFIX, scales)  # [E, rows, cols/32]

    @classmethod
    def from_experts(cls, experts: nn.Module) -> "MXFP4Experts":
        """Quantize a full-precision experts module's gate_proj/up_proj [E, F, D] and down_proj [E, D, F]."""
        weights = {}
        for name in EXPERT_PROJECTIONS:
            weight = getattr(experts, name, None)
            if not isinstance(weight, torch.Tensor) or weight.dim() != 3:
                got = f"shape {tuple(weight.shape)}" if isinstance(weight, torch.Tensor) else type(weight).__name__
                raise ValueError(f"{type(experts).__name__}.{name} must be a stacked [E, out, in] tensor, got {got}")
            weights[name] = weight
        n_experts, hidden, dim = weights["gate_proj"].shape
        expected = {"gate_proj": (n_experts, hidden, dim), "up_proj": (n_experts, hidden, dim),
                    "down_proj": (n_experts, dim, hidden)}
        for name, shape in expected.items():
            if tuple(weights[name].shape) != shape:
                raise ValueError(f"{name} has shape {tuple(weights[name].shape)}, expected {shape}")
        module = cls(n_experts, dim, hidden, device=weights["gate_proj"].device)
        with torch.no_grad():
            for name, weight in weights.items():
                blocks, scales = quantize_mxfp4(weight)
                getattr(module, name + BLOCKS_SUFFIX).copy_(blocks)
                getattr(module, name + SCALES_SUFFIX).copy_(scales)
        return module

    def forward(self, x_sorted: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """SwiGLU of each contiguous expert group: x_sorted [M, D], counts [E] -> [M, D]."""
        if x_sorted.dim() != 2 or x_sorted.shape[1] != self.dim:
            raise ValueError(f"x_sorted must be [M, {self.dim}], got {tuple(x_sorted.shape)}")
        sizes = counts.tolist()
        if len(sizes) != self.n_experts or min(sizes) < 0 or sum(sizes) != x_sorted.shape[0]:
            raise ValueError(
                f"counts must hold {self.n_experts} non-negative sizes summing to {x_sorted.shape[0]} rows, got {sizes}"
            )
        gate = mxfp4_grouped_matmul(x_sorted, counts, self.gate_proj_blocks, self.gate_proj_scales)  # [M, F]
        up = mxfp4_grouped_matmul(x_sorted, counts, self.up_proj_blocks, self.up_proj_scales)  # [M, F]
        return mxfp4_grouped_matmul(F.silu(gate) * up, counts, self.down_proj_blocks, self.down_proj_scales)  # [M, D]

    def extra_repr(self) -> str:
        return f"n_experts={self.n_experts}, dim={self.dim}, hidden={self.hidden}, format=mxfp4"


def _is_stacked_experts(module: nn.Module) -> bool:
    return all(
        isinstance(getattr(module, name, None), torch.Tensor) and getattr(module, name).dim() == 3
        for name in EXPERT_PROJECTIONS
    )


def quantize_experts_(model: nn.Module) -> int:
    """Swap every submodule with stacked gate_proj/up_proj/down_proj for MXFP4Experts, in place; returns the count."""
    targets = [
        (parent, child_name, child)
        for parent in model.modules()
        for child_name, child in parent.named_children()
        if _is_stacked_experts(child)
    ]
    for parent, child_name, child in targets:
        setattr(parent, child_name, MXFP4Experts.from_experts(child))
    return len(targets)


def is_expert_weight(name: str, tensor: torch.Tensor) -> bool:
    """Whether a state-dict entry is a routed experts' stacked projection (…gate_proj/up_proj/down_proj, 3-D)."""
    return tensor.dim() == 3 and name.rsplit(".", 1)[-1] in EXPERT_PROJECTIONS


def mxfp4_state_dict(
    state_dict: Mapping[str, torch.Tensor],
    should_quantize: Callable[[str, torch.Tensor], bool] = is_expert_weight,
) -> dict[str, torch.Tensor]:
    """A copy of state_dict with each chosen tensor `name` replaced by `name_blocks` and `name_scales`, in order."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state_dict.items():
        if should_quantize(name, tensor):
            for key in (name + BLOCKS_SUFFIX, name + SCALES_SUFFIX):
                if key in state_dict:
                    raise ValueError(f"cannot quantize {name!r}: the state dict already has {key!r}")
            out[name + BLOCKS_SUFFIX], out[name + SCALES_SUFFIX] = quantize_mxfp4(tensor)
        else:
            out[name] = tensor
    return out


def dequantize_state_dict(
    state_dict: Mapping[str, torch.Tensor], dtype: torch.dtype = torch.float32
) -> dict[str, torch.Tensor]:
    """The inverse of mxfp4_state_dict: every `name_blocks`/`name_scales` pair becomes `name` in dtype, in order."""
    out: dict[str, torch.Tensor] = {}
    for key, tensor in state_dict.items():
        if key.endswith(BLOCKS_SUFFIX):
            name = key[: -len(BLOCKS_SUFFIX)]
            scales = state_dict.get(name + SCALES_SUFFIX)
            if scales is None:
                raise ValueError(f"{key!r} has no matching {name + SCALES_SUFFIX!r}")
            if name in state_dict:
                raise ValueError(f"{key!r} would restore {name!r}, which the state dict already holds")
            out[name] = dequantize_mxfp4(tensor, scales, dtype)
        elif key.endswith(SCALES_SUFFIX):
            name = key[: -len(SCALES_SUFFIX)]
            if name + BLOCKS_SUFFIX not in state_dict:
                raise ValueError(f"{key!r} has no matching {name + BLOCKS_SUFFIX!r}")
        else:
            out[key] = tensor
    return out


def quantization_config(modules_to_not_convert: Iterable[str]) -> dict:
    """The checkpoint's `quantization_config`; the named modules (attention, router, embeddings, head) stay unquantized."""
    if isinstance(modules_to_not_convert, str):
        raise ValueError(
            f"modules_to_not_convert must be a list of module names, got the string {modules_to_not_convert!r}"
        )
    names = list(modules_to_not_convert)
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise ValueError(f"modules_to_not_convert must hold non-empty module names, got {bad!r}")
    return {"quant_method": "mxfp4", "modules_to_not_convert": names}
