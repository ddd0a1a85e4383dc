"""MXFP4 matmuls in Triton: the weight is decoded tile by tile inside the matmul, never written out in full.

Shape legend: M = rows of x (all leading dims flattened, or rows grouped by expert), N = output features,
K = contraction dim, B = K / 32 scale blocks per row, E = experts, T = row tiles of the grouped launch.

Forward: one program per (row tile, column tile) computes out[BM, BN] = x[BM, K] @ W[BN, K].T, walking K
in BK steps: it loads the packed bytes [BN, BK/2] and scale bytes [BN, BK/32], splits each byte into its
two codes (even element = low nibble), builds the fp32 value of each E2M1 code from bits, multiplies by
2^(s - 127), and feeds the tile to tl.dot with fp32 accumulation; the bias is added before the one store.
Every decoded weight is the same fp32 number the naive decode gives (both are one exact product of an
E2M1 value and a power of two), so results differ from the naive path only by summation order.

The grouped form runs the same program over a tile map: each row tile belongs to one expert's rows, so
the launch needs no host sync on counts (the grid is the static bound min(M, cdiv(M, BM) + E) and
surplus programs exit at once).

Backward (w.r.t. x and bias, as the naive path is differentiable in both): one program per (row tile,
K tile) computes grad_x[BM, BK] = grad_out[BM, N] @ W[N, BK], decoding W tiles the same way.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from jointrl.kernels import buffers
from jointrl.kernels.mxfp4.naive import BLOCK_SIZE, check_matmul

# One fixed config (the interpreter cannot autotune). BLOCK_K covers two scale blocks; tl.dot needs every
# dim >= 16. Small batches (decode steps, a few tokens per expert) get 16-row tiles to waste less padding.
BLOCK_N = 64
BLOCK_K = 64
NUM_WARPS = 4
SMALL_ROWS = 16
LARGE_ROWS = 64
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@triton.jit
def _decoded_tile(blocks_ptr, scales_ptr, offs_n, k0, N, K, BLOCK_K: tl.constexpr):
    """The fp32 weights W[offs_n, k0 : k0 + BLOCK_K] of one expert, zero outside [N, K]: [BN, BK]."""
    BN: tl.constexpr = offs_n.shape[0]
    offs_byte = k0 // 2 + tl.arange(0, BLOCK_K // 2)  # [BK/2]
    offs_scale = k0 // 32 + tl.arange(0, BLOCK_K // 32)  # [BK/32]
    row = offs_n[:, None].to(tl.int64)
    packed = tl.load(
        blocks_ptr + row * (K // 2) + offs_byte[None, :],
        mask=(offs_n[:, None] < N) & (offs_byte[None, :] < K // 2),
        other=0,
    ).to(tl.int32)  # [BN, BK/2]
    # Padding reads scale byte 127 (1.0) so the zero codes there stay zero rather than 0 * NaN.
    s = tl.load(
        scales_ptr + row * (K // 32) + offs_scale[None, :],
        mask=(offs_n[:, None] < N) & (offs_scale[None, :] < K // 32),
        other=127,
    ).to(tl.int32)  # [BN, BK/32]
    codes = tl.interleave(packed & 0xF, packed >> 4)  # [BN, BK]
    # E2M1 as fp32 bits: magnitude index m >= 2 is (1 + (m & 1) / 2) * 2^((m >> 1) - 1), m = 1 is 0.5, m = 0 is 0.
    m = codes & 7
    magnitude = tl.where(m >= 2, (((m >> 1) + 126) << 23) | ((m & 1) << 22), tl.where(m == 1, 126 << 23, 0))
    bits = ((codes & 8).to(tl.uint32) << 28) | magnitude.to(tl.uint32)
    values = bits.to(tl.float32, bitcast=True)  # [BN, BK]
    # E8M0 from bits as in the naive decode: byte 0 is the subnormal 2^-127, byte 255 is NaN.
    scale_bits = tl.where(s == 0, 1 << 22, s << 23)
    scale_bits = tl.where(s == 255, 0x7FC00000, scale_bits)
    scale = scale_bits.to(tl.float32, bitcast=True)  # [BN, BK/32]
    w = tl.reshape(values, (BN, BLOCK_K // 32, 32)) * scale[:, :, None]  # [BN, BK/32, 32]
    return tl.reshape(w, (BN, BLOCK_K))


@triton.jit
def _row_tile(tile_expert_ptr, tile_row_ptr, group_end_ptr, pid_m, M, GROUPED: tl.constexpr, BLOCK_M: tl.constexpr):
    """(expert as int64, first row, end of the expert's rows) of row tile pid_m; expert -1 marks a surplus tile."""
    if GROUPED:
        expert = tl.load(tile_expert_ptr + pid_m).to(tl.int64)
        row_start = tl.load(tile_row_ptr + pid_m)
        row_end = tl.load(group_end_ptr + tl.maximum(expert, 0))
    else:
        expert = tl.full((), 0, tl.int64)
        row_start = pid_m * BLOCK_M
        row_end = M
    return expert, row_start, row_end


@triton.jit
def _mxfp4_matmul_kernel(
    x_ptr, blocks_ptr, scales_ptr, bias_ptr, out_ptr,
    tile_expert_ptr, tile_row_ptr, group_end_ptr,
    M, N, K, stride_xm, stride_om,
    HAS_BIAS: tl.constexpr, GROUPED: tl.constexpr, DOT_PRECISION: tl.constexpr, DOT_FP32: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """out[rows, cols] = x[rows, :] @ W_e[cols, :].T (+ bias_e[cols]) for one (row tile, column tile)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    expert, row_start, row_end = _row_tile(tile_expert_ptr, tile_row_ptr, group_end_ptr, pid_m, M, GROUPED, BLOCK_M)
    if expert < 0:
        return
    offs_m = row_start + tl.arange(0, BLOCK_M)  # [BM]
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN]
    offs_k = tl.arange(0, BLOCK_K)  # [BK]
    row_ok = offs_m < row_end
    w_blocks = blocks_ptr + expert * N * (K // 2)
    w_scales = scales_ptr + expert * N * (K // 32)
    x_rows = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x = tl.load(x_rows + (k0 + offs_k)[None, :], mask=row_ok[:, None] & ((k0 + offs_k)[None, :] < K), other=0.0)
        w = _decoded_tile(w_blocks, w_scales, offs_n, k0, N, K, BLOCK_K)  # [BN, BK]
        if DOT_FP32:
            x = x.to(tl.float32)
        else:
            # Exact for bf16 (same exponent range, 2-bit significands); saturates fp16 like the naive cast.
            w = w.to(x.dtype)
        acc = tl.dot(x, tl.trans(w), acc, input_precision=DOT_PRECISION)  # [BM, BN]
    if HAS_BIAS:
        bias = tl.load(bias_ptr + expert * N + offs_n, mask=offs_n < N, other=0.0)
        # Rounded to the output dtype first, as the naive path adds bias.to(out.dtype).
        acc += bias.to(out_ptr.dtype.element_ty).to(tl.float32)[None, :]
    out = out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & (offs_n[None, :] < N))


@triton.jit
def _mxfp4_grad_x_kernel(
    dy_ptr, blocks_ptr, scales_ptr, dx_ptr,
    tile_expert_ptr, tile_row_ptr, group_end_ptr,
    M, N, K, stride_dym, stride_dxm,
    GROUPED: tl.constexpr, DOT_PRECISION: tl.constexpr, DOT_FP32: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """dx[rows, ks] = dy[rows, :] @ W_e[:, ks] for one (row tile, K tile)."""
    pid_m = tl.program_id(0)
    pid_k = tl.program_id(1)
    expert, row_start, row_end = _row_tile(tile_expert_ptr, tile_row_ptr, group_end_ptr, pid_m, M, GROUPED, BLOCK_M)
    if expert < 0:
        return
    k0 = pid_k * BLOCK_K
    offs_m = row_start + tl.arange(0, BLOCK_M)  # [BM]
    offs_n = tl.arange(0, BLOCK_N)  # [BN]
    offs_k = k0 + tl.arange(0, BLOCK_K)  # [BK]
    row_ok = offs_m < row_end
    w_blocks = blocks_ptr + expert * N * (K // 2)
    w_scales = scales_ptr + expert * N * (K // 32)
    dy_rows = dy_ptr + offs_m[:, None].to(tl.int64) * stride_dym
    acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    for n0 in range(0, N, BLOCK_N):
        dy = tl.load(dy_rows + (n0 + offs_n)[None, :], mask=row_ok[:, None] & ((n0 + offs_n)[None, :] < N), other=0.0)
        w = _decoded_tile(w_blocks, w_scales, n0 + offs_n, k0, N, K, BLOCK_K)  # [BN, BK]
        if DOT_FP32:
            dy = dy.to(tl.float32)
        else:
            w = w.to(dy.dtype)
        acc = tl.dot(dy, w, acc, input_precision=DOT_PRECISION)  # [BM, BK]
    dx = dx_ptr + offs_m[:, None].to(tl.int64) * stride_dxm + offs_k[None, :]
    tl.store(dx, acc.to(dx_ptr.dtype.element_ty), mask=row_ok[:, None] & (offs_k[None, :] < K))


# Under TRITON_INTERPRET=1, triton.jit hands back an InterpretedFunction that runs the kernel in numpy.
INTERPRETED = type(_mxfp4_matmul_kernel).__name__ == "InterpretedFunction"


class _Launch:
    """Row tiling of one call: plain row tiles, or a tile map over expert groups built on the device."""

    def __init__(self, m: int, counts: torch.Tensor | None, device: torch.device):
        n_groups = 1 if counts is None else counts.shape[0]
        self.block_m = SMALL_ROWS if m <= SMALL_ROWS * n_groups else LARGE_ROWS
        self.grouped = counts is not None
        if counts is None:
            self.n_tiles = triton.cdiv(m, self.block_m)
            # Unread placeholders: the GROUPED=False kernels never touch the tile map.
            self.tile_expert = self.tile_row = self.group_end = torch.empty(1, dtype=torch.int32, device=device)
            return
        counts = counts.to(device=device, dtype=torch.int64)
        group_end = torch.cumsum(counts, 0)  # [E]
        tiles = (counts + self.block_m - 1) // self.block_m  # [E]
        tile_end = torch.cumsum(tiles, 0)  # [E]
        # Tiles needed <= cdiv(M, BM) + E, and <= M since each holds a row: a bound known without a sync.
        self.n_tiles = min(m, triton.cdiv(m, self.block_m) + counts.shape[0])
        pid = torch.arange(self.n_tiles, device=device)  # [T]
        expert = torch.searchsorted(tile_end, pid, right=True)  # [T]; E marks a surplus tile
        e = expert.clamp(max=counts.shape[0] - 1)
        row = group_end[e] - counts[e] + (pid - (tile_end[e] - tiles[e])) * self.block_m  # [T]
        self.tile_expert = torch.where(expert < counts.shape[0], expert, -1).to(torch.int32)  # [T]
        self.tile_row = row.to(torch.int32)  # [T]
        self.group_end = group_end.to(torch.int32)  # [E]
        self.counts = counts  # [E]


def _dot_args(dtype: torch.dtype) -> dict:
    """DOT_FP32 and DOT_PRECISION for inputs of this dtype."""
    # The interpreter multiplies bf16 operands of tl.dot as their raw uint16 bit patterns, so there the
    # tiles go in as fp32: the same products (a bf16 product is exact in fp32) summed in fp32, as on a GPU.
    # The decoded weights then skip the bf16 cast, which is exact anyway.
    dot_fp32 = dtype == torch.float32 or (INTERPRETED and dtype == torch.bfloat16)
    # fp32 operands must not drop to tf32 on a GPU: the naive fp32 matmul keeps full fp32 products.
    return {"DOT_FP32": dot_fp32, "DOT_PRECISION": "ieee" if dot_fp32 else None}


def _forward(x2, blocks, scales, bias, launch: _Launch) -> torch.Tensor:
    m, k = x2.shape
    n = blocks.shape[-3]
    out = buffers.empty(m, n, dtype=x2.dtype, device=x2.device)  # [M, N]
    if m == 0 or n == 0:
        return out
    grid = (launch.n_tiles, triton.cdiv(n, BLOCK_N))
    _mxfp4_matmul_kernel[grid](
        x2, blocks, scales, bias if bias is not None else out, out,
        launch.tile_expert, launch.tile_row, launch.group_end,
        m, n, k, x2.stride(0), out.stride(0),
        HAS_BIAS=bias is not None, GROUPED=launch.grouped, **_dot_args(x2.dtype),
        BLOCK_M=launch.block_m, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=NUM_WARPS,
    )
    return out


def _grad_x(dy, blocks, scales, k: int, launch: _Launch) -> torch.Tensor:
    m, n = dy.shape
    dx = buffers.empty(m, k, dtype=dy.dtype, device=dy.device)  # [M, K]
    if m == 0:
        return dx
    grid = (launch.n_tiles, triton.cdiv(k, BLOCK_K))
    _mxfp4_grad_x_kernel[grid](
        dy, blocks, scales, dx,
        launch.tile_expert, launch.tile_row, launch.group_end,
        m, n, k, dy.stride(0), dx.stride(0),
        GROUPED=launch.grouped, **_dot_args(dy.dtype),
        BLOCK_M=launch.block_m, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=NUM_WARPS,
    )
    return dx


class _MXFP4Matmul(torch.autograd.Function):
    """x2 [M, K] times decoded weights [.., N, K].T; differentiable in x2 and bias, like the naive path."""

    @staticmethod
    def forward(ctx, x2, blocks, scales, bias, counts):
        launch = _Launch(x2.shape[0], counts, x2.device)
        ctx.launch, ctx.bias_dtype = launch, None if bias is None else bias.dtype
        ctx.save_for_backward(blocks, scales)
        return _forward(x2, blocks, scales, bias, launch)

    @staticmethod
    def backward(ctx, dy):
        blocks, scales = ctx.saved_tensors
        launch = ctx.launch
        dy = dy.contiguous()  # [M, N]
        grad_x = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_x = _grad_x(dy, blocks, scales, blocks.shape[-2] * BLOCK_SIZE, launch)  # [M, K]
        if ctx.needs_input_grad[3]:
            if launch.grouped:
                groups = torch.arange(blocks.shape[0], device=dy.device)  # [E]
                group_of_row = torch.repeat_interleave(groups, launch.counts, output_size=dy.shape[0])  # [M]
                grad_bias = dy.new_zeros(blocks.shape[0], dy.shape[1], dtype=torch.float32)  # [E, N]
                grad_bias.index_add_(0, group_of_row, dy.float())
            else:
                grad_bias = dy.float().sum(0)  # [N]
            grad_bias = grad_bias.to(ctx.bias_dtype)
        return grad_x, None, None, grad_bias, None


def _check_dtype(x: torch.Tensor) -> None:
    if x.dtype not in DTYPES:
        names = ", ".join(str(d) for d in DTYPES)
        raise ValueError(f"the Triton MXFP4 matmul takes x in {names}; got {x.dtype} (use JOINTRL_KERNELS=naive)")


def mxfp4_matmul(
    x: torch.Tensor, blocks: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x [..., K] @ dequantize_mxfp4(blocks [N, B, 16], scales [N, B]).T (+ bias [N]) -> [..., N] in x's dtype."""
    check_matmul(x, blocks, scales, bias)
    _check_dtype(x)
    k = x.shape[-1]
    x2 = x.reshape(-1, k)  # [M, K]
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    bias = None if bias is None else bias.contiguous()
    out = _MXFP4Matmul.apply(x2, blocks.contiguous(), scales.contiguous(), bias, None)  # [M, N]
    return out.view(*x.shape[:-1], blocks.shape[0])


def mxfp4_grouped_matmul(
    x_sorted: torch.Tensor,
    counts: torch.Tensor,
    blocks: torch.Tensor,
    scales: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rows of x_sorted [M, K] grouped by counts [E], each times its expert's weight [E, N, B, 16] -> [M, N]."""
    check_matmul(x_sorted, blocks, scales, bias, counts)
    _check_dtype(x_sorted)
    # Checking the sum on the host would sync the device each call; the device asserts it instead.
    valid = (counts.sum() == x_sorted.shape[0]) & (counts >= 0).all()
    torch._assert_async(valid, "mxfp4_grouped_matmul: counts must be non-negative and sum to the rows of x_sorted")
    x2 = x_sorted if x_sorted.stride(-1) == 1 else x_sorted.contiguous()
    bias = None if bias is None else bias.contiguous()
    return _MXFP4Matmul.apply(x2, blocks.contiguous(), scales.contiguous(), bias, counts)
