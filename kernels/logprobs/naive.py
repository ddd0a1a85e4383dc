"""Pure-torch token log-probabilities and entropy of a linear head, walked over vocabulary chunks.

Shape legend: N = tokens, D = hidden dim, V = vocabulary, C = vocabulary columns per chunk.

With logits z = (hidden @ weight^T) / temperature, each token gets
    logprob = z[target] - lse,   lse = logsumexp(z)
    entropy = -sum_v p_v log p_v = lse - sum_v p_v z_v
`token_logprobs` never holds more than an [N, C] block of logits: the forward keeps a running max m,
s = sum exp(z - m) and a = sum exp(z - m) (z - m) per token, so entropy = log s - a / s with every term
measured from the max (no cancellation between two large numbers). Its backward recomputes each
chunk's logits and log p = (z - m) - log s from the saved m, log s and entropy (subtracting the max
first, as log_softmax does, keeps log p of the likely tokens accurate to its own size), with
    d logprob / d z_v = onehot_v - p_v
    d entropy / d z_v = -p_v (log p_v + entropy)
Everything computes in fp32 (fp64 for fp64 inputs, so gradcheck applies); outputs are fp32 (fp64),
gradients come back in the inputs' dtypes.
`full_logprobs` is the plain full-logits form the tests and benchmarks compare against.
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

# Vocabulary columns per step: an [N, 4096] fp32 block is 64 MiB at N = 4096 tokens, an eighth of the
# logits of a 32k vocabulary, and still wide enough for each chunk's matmul to run near full speed.
DEFAULT_CHUNK = 4096


def check_inputs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, temperature: float) -> None:
    """Raise ValueError naming the offending argument when the inputs do not fit the op's contract."""
    if hidden.dim() != 2:
        raise ValueError(f"hidden {tuple(hidden.shape)} must be [N, D]; flatten batch and time first")
    if weight.dim() != 2 or weight.shape[1] != hidden.shape[1]:
        raise ValueError(f"weight {tuple(weight.shape)} must be [V, D] with the D of hidden {tuple(hidden.shape)}")
    if weight.shape[0] == 0:
        raise ValueError("weight has an empty vocabulary (V = 0)")
    if weight.dtype != hidden.dtype:
        raise ValueError(f"hidden ({hidden.dtype}) and weight ({weight.dtype}) must share a dtype")
    if not hidden.dtype.is_floating_point:
        raise ValueError(f"hidden has dtype {hidden.dtype}; expected a floating dtype")
    if weight.device != hidden.device or targets.device != hidden.device:
        devices = f"{hidden.device}, {weight.device}, {targets.device}"
        raise ValueError(f"hidden, weight, targets are on {devices}; expected one device")
    if targets.shape != hidden.shape[:1] or targets.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"targets {tuple(targets.shape)} {targets.dtype} must be [N] = [{hidden.shape[0]}] int64")
    if not temperature > 0:
        raise ValueError(f"temperature={temperature} must be positive")
    if targets.numel():
        # One host sync per call: a silent out-of-range gather would return garbage log-probabilities.
        lo, hi = torch.aminmax(targets)
        lo, hi = int(lo), int(hi)
        if lo < 0 or hi >= weight.shape[0]:
            raise ValueError(f"targets span [{lo}, {hi}]; expected ids in [0, {weight.shape[0] - 1}]")


def check_chunk(chunk_size: int) -> None:
    """Raise ValueError for a chunk size that is not a positive integer."""
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size!r} must be a positive int")


def full_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    temperature: float = 1.0,
    return_entropy: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Reference: materialise all [N, V] logits, log_softmax, gather; fp32 (fp64 for fp64 inputs) outputs."""
    check_inputs(hidden, weight, targets, temperature)
    dtype = torch.float64 if hidden.dtype == torch.float64 else torch.float32
    logits = (hidden.to(dtype) @ weight.to(dtype).t()) / temperature  # [N, V]
    logp = torch.log_softmax(logits, dim=-1)  # [N, V]
    chosen = logp.gather(1, targets.long()[:, None]).squeeze(1)  # [N]
    entropy = -(logp.exp() * logp).sum(dim=-1) if return_entropy else None
    return chosen, entropy


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    """fp64 for fp64 inputs, else fp32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _chunk_logits(h32: torch.Tensor, weight: torch.Tensor, v0: int, v1: int, temperature: float) -> torch.Tensor:
    """Logits of vocabulary columns v0 .. v1 - 1 in h32's dtype: -> [N, C]."""
    z = h32 @ weight[v0:v1].to(h32.dtype).t()  # [N, C]
    return z.div_(temperature)


def _pick(z: torch.Tensor, targets: torch.Tensor, v0: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Which tokens' targets fall in this chunk [N] bool, and their logits there [N] (garbage elsewhere)."""
    inside = (targets >= v0) & (targets < v0 + z.shape[1])
    local = (targets - v0).clamp(0, z.shape[1] - 1)
    return inside, z.gather(1, local[:, None]).squeeze(1)


class _ChunkedLogprobs(torch.autograd.Function):
    """Forward and backward over vocabulary chunks; saves only [N]-sized statistics besides the inputs."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, temperature, chunk_size, with_entropy):
        n, v = hidden.shape[0], weight.shape[0]
        h32 = hidden.to(_compute_dtype(hidden))  # [N, D]
        m = h32.new_full((n,), float("-inf"))  # running max
        s = h32.new_zeros(n)  # sum exp(z - m)
        a = h32.new_zeros(n)  # sum exp(z - m) (z - m)
        picked = h32.new_zeros(n)  # z[target]
        for v0 in range(0, v, chunk_size):
            z = _chunk_logits(h32, weight, v0, min(v, v0 + chunk_size), temperature)  # [N, C]
            inside, at_target = _pick(z, targets, v0)
            picked = torch.where(inside, at_target, picked)
            m_new = torch.maximum(m, z.amax(dim=1))
            rescale = torch.exp(m - m_new)
            # Re-measure the old terms from the new max: exp(z - m)(z - m) -> rescale (.. + (m - m_new) ..).
            # The first chunk has s = 0 and m = -inf; the where keeps 0 * inf out of a.
            shift = torch.where(s > 0, (m - m_new) * s, torch.zeros_like(s))
            z.sub_(m_new[:, None])  # z - m_new, in place: the chunk is the only [N, C] buffer besides e
            e = z.exp()
            s = s * rescale + e.sum(dim=1)
            if with_entropy:
                a = (a + shift) * rescale + e.mul_(z).sum(dim=1)
            m = m_new
            del z, e
        log_s = s.log()
        logprobs = (picked - m) - log_s
        entropy = log_s - a / s if with_entropy else None
        ctx.save_for_backward(hidden, weight, targets, m, log_s, entropy if with_entropy else m.new_zeros(0))
        ctx.temperature, ctx.chunk_size = temperature, chunk_size
        ctx.set_materialize_grads(False)
        return logprobs, entropy if with_entropy else m.new_zeros(0)

    @staticmethod
    @once_differentiable
    def backward(ctx, g_logprobs, g_entropy):
        hidden, weight, targets, m, log_s, entropy = ctx.saved_tensors
        want_h, want_w = ctx.needs_input_grad[:2]
        if g_entropy is not None and entropy.numel() == 0:
            g_entropy = None  # the entropy was not returned, so nothing downstream used it
        if (g_logprobs is None and g_entropy is None) or not (want_h or want_w):
            return None, None, None, None, None, None
        v = weight.shape[0]
        h32 = hidden.to(_compute_dtype(hidden))  # [N, D]
        d_hidden = torch.zeros_like(h32) if want_h else None  # [N, D] fp32 accumulator
        d_weight = torch.empty(weight.shape, dtype=weight.dtype, device=weight.device) if want_w else None
        for v0 in range(0, v, ctx.chunk_size):
            v1 = min(v, v0 + ctx.chunk_size)
            z = _chunk_logits(h32, weight, v0, v1, ctx.temperature)  # [N, C]
            logp = z.sub_(m[:, None]).sub_(log_s[:, None])  # log p, in place
            p = logp.exp()  # [N, C]
            # In place throughout: the chunk's logits buffer becomes dz, so two [N, C] buffers are live.
            if g_entropy is not None:
                dz = logp.add_(entropy[:, None]).mul_(p).mul_(-g_entropy[:, None])
            else:
                dz = logp.zero_()
            if g_logprobs is not None:
                dz.addcmul_(p, g_logprobs[:, None], value=-1.0)
                # + g at each target inside this chunk; a scatter, so no host sync on where they are.
                inside, local = (targets >= v0) & (targets < v1), (targets - v0).clamp(0, v1 - v0 - 1)
                dz.scatter_add_(1, local[:, None], (g_logprobs * inside)[:, None])
            del p
            # z was divided by the temperature, so d(hidden @ weight^T) = dz / temperature.
            dz.div_(ctx.temperature)
            if want_h:
                d_hidden.addmm_(dz, weight[v0:v1].to(dz.dtype))
            if want_w:
                d_weight[v0:v1] = (dz.t() @ h32).to(weight.dtype)  # [C, D]
            del dz
        return (d_hidden.to(hidden.dtype) if want_h else None), d_weight, None, None, None, None


def token_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    temperature: float = 1.0,
    chunk_size: int = DEFAULT_CHUNK,
    return_entropy: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log_softmax(hidden @ weight^T / temperature) at targets [N] fp32, and entropy [N] fp32 (or None)."""
    check_inputs(hidden, weight, targets, temperature)
    check_chunk(chunk_size)
    logprobs, entropy = _ChunkedLogprobs.apply(
        hidden, weight, targets.long(), float(temperature), chunk_size, bool(return_entropy)
    )
    return logprobs, entropy if return_entropy else None
