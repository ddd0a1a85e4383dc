"""MXFP4 decoding and matmul in plain torch: the ground truth any fused MXFP4 kernel is checked against.

Shape legend: N = output rows, K = contraction dim, B = K / 32 blocks per row, ... = leading dims,
E = experts, M = rows of x grouped by expert.

Format (OCP Microscaling MX v1.0): each block of 32 consecutive elements along K shares one E8M0 scale
byte s (the power of two 2^(s - 127); 0xFF is NaN), and each element is a 4-bit E2M1 code: bit 3 is the
sign, bits 0-2 index the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6. Two codes share a byte, the even element
in the low nibble, so a weight [..., N, K] is stored as blocks uint8 [..., N, B, 16] and scales uint8
[..., N, B].
"""
from __future__ import annotations

import torch

BLOCK_SIZE = 32
SCALE_BIAS = 127
SCALE_NAN = 0xFF
# Code c decodes to E2M1_VALUES[c]; code 8 is negative zero, so the sign survives a decode/encode trip.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """Split each byte of packed uint8 [..., P] into its two 4-bit codes, low nibble first: [..., 2P]."""
    low = packed & 0x0F
    high = packed >> 4
    return torch.stack((low, high), dim=-1).flatten(-2)  # [..., 2P]


def e8m0_to_float(scales: torch.Tensor) -> torch.Tensor:
    """The fp32 value 2^(s - 127) of each E8M0 byte (NaN for 0xFF), built from bits so it is exact everywhere."""
    s = scales.to(torch.int32)
    # Byte 0 is 2^-127, below the smallest normal fp32, so it needs the subnormal bit pattern 1 << 22;
    # building bits instead of calling exp2 keeps every scale exact on any device.
    bits = torch.where(s == 0, torch.full_like(s, 1 << 22), s << 23)
    bits = torch.where(s == SCALE_NAN, torch.full_like(s, 0x7FC00000), bits)
    return bits.view(torch.float32)


def check_mxfp4(blocks: torch.Tensor, scales: torch.Tensor) -> None:
    """Raise ValueError unless blocks uint8 [..., N, B, 16] and scales uint8 [..., N, B] form one MXFP4 tensor."""
    if blocks.dtype != torch.uint8 or scales.dtype != torch.uint8:
        raise ValueError(f"MXFP4 blocks and scales must be uint8, got {blocks.dtype} and {scales.dtype}")
    if blocks.dim() < 2 or blocks.shape[-1] != BLOCK_SIZE // 2:
        raise ValueError(f"MXFP4 blocks must have shape [..., B, {BLOCK_SIZE // 2}], got {tuple(blocks.shape)}")
    if tuple(scales.shape) != tuple(blocks.shape[:-1]):
        raise ValueError(
            f"MXFP4 scales shape {tuple(scales.shape)} does not match blocks shape {tuple(blocks.shape)} "
            f"(expected {tuple(blocks.shape[:-1])})"
        )


def dequantize_mxfp4(
    blocks: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Decode blocks uint8 [..., N, B, 16] and scales uint8 [..., N, B] into a dtype tensor [..., N, B * 32]."""
    check_mxfp4(blocks, scales)
    codes = unpack_nibbles(blocks)  # [..., N, B, 32]
    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=blocks.device)
    values = table[codes.long()]  # [..., N, B, 32]
    # Products of an E2M1 value and a power of two are exact in fp32; rounding happens only in the cast.
    w = values * e8m0_to_float(scales).unsqueeze(-1)  # [..., N, B, 32]
    return w.flatten(-2).to(dtype)  # [..., N, K]


def check_matmul(
    x: torch.Tensor,
    blocks: torch.Tensor,
    scales: torch.Tensor,
    bias: torch.Tensor | None,
    counts: torch.Tensor | None = None,
) -> None:
    """Raise ValueError unless the arguments fit mxfp4_matmul (counts None) or mxfp4_grouped_matmul."""
    check_mxfp4(blocks, scales)
    grouped = counts is not None
    if grouped and blocks.dim() != 4:
        raise ValueError(f"mxfp4_grouped_matmul takes stacked weights [E, N, B, 16]; got {tuple(blocks.shape)}")
    if not grouped and blocks.dim() != 3:
        raise ValueError(f"mxfp4_matmul takes one weight, blocks [N, B, 16]; got {tuple(blocks.shape)}")
    k = blocks.shape[-2] * BLOCK_SIZE
    if x.dim() == 0 or x.shape[-1] != k:
        raise ValueError(f"x has shape {tuple(x.shape)} but the MXFP4 weight contracts over a last dim K={k}")
    bias_shape = tuple(blocks.shape[:-2])  # (N,) or (E, N)
    if bias is not None and tuple(bias.shape) != bias_shape:
        raise ValueError(f"bias must have shape {bias_shape}, got {tuple(bias.shape)}")
    if grouped:
        if x.dim() != 2:
            raise ValueError(f"mxfp4_grouped_matmul takes x_sorted [M, K], got shape {tuple(x.shape)}")
        if counts.dim() != 1 or counts.shape[0] != blocks.shape[0] or counts.is_floating_point():
            raise ValueError(
                f"counts must be an integer tensor [E={blocks.shape[0]}]; "
                f"got {counts.dtype} of shape {tuple(counts.shape)}"
            )


def mxfp4_matmul(
    x: torch.Tensor, blocks: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x [..., K] @ dequantize_mxfp4(blocks [N, B, 16], scales [N, B]).T (+ bias [N]) -> [..., N] in x's dtype."""
    check_matmul(x, blocks, scales, bias)
    w = dequantize_mxfp4(blocks, scales, x.dtype)  # [N, K]
    out = x @ w.t()  # [..., N]
    return out if bias is None else out + bias.to(out.dtype)


def mxfp4_grouped_matmul(
    x_sorted: torch.Tensor,
    counts: torch.Tensor,
    blocks: torch.Tensor,
    scales: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rows of x_sorted [M, K] grouped by counts [E], each times its expert's weight [E, N, B, 16] -> [M, N]."""
    check_matmul(x_sorted, blocks, scales, bias, counts)
    sizes = counts.tolist()
    if min(sizes, default=0) < 0 or sum(sizes) != x_sorted.shape[0]:
        raise ValueError(f"counts must be non-negative and sum to the {x_sorted.shape[0]} rows of x_sorted: {sizes}")
    outputs = []
    start = 0
    for e, n in enumerate(sizes):
        if n == 0:
            continue
        # One expert decoded at a time, so the full-precision stack never exists at once.
        expert_bias = None if bias is None else bias[e]
        outputs.append(mxfp4_matmul(x_sorted[start : start + n], blocks[e], scales[e], expert_bias))  # [n, N]
        start += n
    if not outputs:
        # No rows at all: a zero-row product still ties the [0, N] output to x_sorted and bias for autograd.
        return mxfp4_matmul(x_sorted, blocks[0], scales[0], None if bias is None else bias[0])
    return torch.cat(outputs, dim=0)  # [M, N]
