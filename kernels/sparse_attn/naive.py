"""Pure-torch ground truth of sparse attention: lightning-indexer scores and top-k, attention over listed slots.

Shape legend: B = batch rows, T = queries, S = key slots, K = listed slots per query, H = attention
heads, Hi = indexer heads, I = indexer dim, E = query/key width of the absorbed (MQA) latent form
(latent + rotary dims), C = value width (the leading C channels of each kv row).

Queries are the T tokens at slots start .. start + T - 1; keys are slots 0 .. S - 1 (a cache read, or the
same T tokens with start = 0). Query t may see slot s when s <= start + t and the slot is valid. Index
lists hold slot numbers (int64) and -1 where there is no slot. Everything computes in fp32.

Memory: the dense indexer scores are [B, T, S] and listed attention gathers [B, T, K, E]; the no-grad
ops walk the queries in chunks to bound that. A Triton form streams instead and keeps these signatures.
"""
from __future__ import annotations

import torch

# Elements one step of a no-grad op may hold (256 MiB of fp32), so a long prefill never holds [B, T, S] at once.
_STEP_ELEMENTS = 1 << 26


def _query_chunk(per_query: int) -> int:
    """Queries per step when each query needs `per_query` elements."""
    return max(1, _STEP_ELEMENTS // max(1, per_query))


def candidate_mask(k_valid: torch.Tensor, start: int, t: int) -> torch.Tensor:
    """Slots each query may see, causal and valid: k_valid [B, S] bool -> [B, T, S] bool."""
    s = k_valid.shape[1]
    q_slot = start + torch.arange(t, device=k_valid.device)  # [T]
    causal = torch.arange(s, device=k_valid.device)[None, :] <= q_slot[:, None]  # [T, S]
    return causal[None] & k_valid[:, None, :]


def _gather_slots(x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Rows of x [B, S, F] at indices [B, T, K] (-1 reads slot 0; callers mask it) -> [B, T, K, F]."""
    b, s, f = x.shape
    rows = torch.arange(b, device=x.device)[:, None, None] * s  # [B, 1, 1]
    # index_select on the flattened rows, not gather on an expanded x (whose backward scatters into [B, T, S, F]) and
    # not advanced indexing (whose backward accumulates repeated slots in a thread-dependent order on CPU).
    flat = (rows + indices.clamp_min(0)).flatten()  # [B * T * K]
    return x.reshape(b * s, f).index_select(0, flat).view(*indices.shape, f)


def indexer_scores(
    q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor, indices: torch.Tensor | None = None
) -> torch.Tensor:
    """Lightning-indexer scores sum_h w_h relu(q_h . k_s); differentiable.

    q [B, T, Hi, I], weights [B, T, Hi], k [B, S, I]. Without indices: every slot, [B, T, S], unmasked.
    With indices [B, T, K]: the listed slots, [B, T, K], -inf where the index is -1.
    """
    q, weights, k = q.float(), weights.float(), k.float()
    # Scoring every slot and picking the listed ones is the same numbers; where S * Hi is at most K * I
    # (CPU training lengths) it also moves less memory than gathering [B, T, K, I] and scattering it back.
    if indices is None or q.shape[2] * k.shape[1] <= indices.shape[-1] * k.shape[-1]:
        scores = q.new_zeros(q.shape[0], q.shape[1], k.shape[1])  # [B, T, S]
        # One head at a time keeps the live intermediate at [B, T, S] rather than [B, T, Hi, S].
        for h in range(q.shape[2]):
            dots = torch.einsum("bti,bsi->bts", q[:, :, h], k)
            scores = scores + weights[:, :, h, None] * dots.relu()
        if indices is None:
            return scores
        return scores.gather(-1, indices.clamp_min(0)).masked_fill(indices < 0, float("-inf"))
    picked = _gather_slots(k, indices)  # [B, T, K, I]
    dots = torch.einsum("bthi,btki->bthk", q, picked)
    scores = torch.einsum("bthk,bth->btk", dots.relu(), weights)
    return scores.masked_fill(indices < 0, float("-inf"))


@torch.no_grad()
def indexer_topk(
    q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor, k_valid: torch.Tensor, start: int, topk: int
) -> torch.Tensor:
    """The `topk` highest-scoring causal, valid slots per query, best first, -1 padded: -> [B, T, topk] int64.

    q [B, T, Hi, I], weights [B, T, Hi], k [B, S, I], k_valid [B, S] bool; queries sit at slots start + t.
    Equal scores rank the later slot first.
    """
    b, t = q.shape[:2]
    out = torch.full((b, t, topk), -1, dtype=torch.long, device=q.device)
    width = min(topk, k.shape[1])
    step = _query_chunk(b * k.shape[1])
    for t0 in range(0, t, step):
        t1 = min(t, t0 + step)
        scores = indexer_scores(q[:, t0:t1], weights[:, t0:t1], k)  # [B, t, S]
        allowed = candidate_mask(k_valid, start + t0, t1 - t0)
        scores = scores.masked_fill(~allowed, float("-inf"))
        out[:, t0:t1, :width] = _top_slots(scores, width)
    return out


def _top_slots(scores: torch.Tensor, width: int) -> torch.Tensor:
    """The `width` best slots of fp32 scores [..., S], best first, the later slot first among equal scores, -1 for
    -inf: -> [..., width] int64.

    ReLU scores tie often (at 0), and the tie rule must hold across chunked prefill, decode and left padding alike.
    topk does not order ties, so it ranks one int64 key per slot: the score's bits, made to order as the floats do,
    above the slot index. A partial top-k instead of a full sort of S slots: 2.5-4x faster at CPU widths.
    """
    bits = (scores + 0.0).view(torch.int32)  # + 0.0 turns -0.0 into +0.0, which the floats count as equal
    ordered = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(torch.int64)  # negative floats order backwards
    slot = torch.arange(scores.shape[-1], dtype=torch.int64, device=scores.device)
    top = ((ordered << 32) | slot).topk(width, dim=-1).values  # [..., width]
    return (top & 0xFFFFFFFF).masked_fill((top >> 32) == _NEG_INF_KEY, -1)


_NEG_INF_KEY = torch.tensor(float("-inf")).view(torch.int32).item() ^ 0x7FFFFFFF


def _listed_probs(q: torch.Tensor, picked: torch.Tensor, listed: torch.Tensor, scale: float) -> torch.Tensor:
    """Softmax of each head over its listed slots: q [B, T, H, E], picked [B, T, K, E] -> [B, T, H, K].

    A query with no listed slot gets all-zero weights (its output is 0), never NaN, in value or gradient.
    """
    scores = torch.einsum("bthe,btke->bthk", q.float(), picked.float()) * scale
    scores = scores.masked_fill(~listed[:, :, None, :], float("-inf"))
    peak = scores.amax(dim=-1, keepdim=True).detach()
    peak = peak.masked_fill(peak == float("-inf"), 0.0)
    weights = torch.exp(scores - peak)  # 0 at unlisted slots
    return weights / weights.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)


def _listed_mask(indices: torch.Tensor, s: int) -> torch.Tensor | None:
    """indices [B, T, K] as a [B, T, S] bool mask of listed slots, or None when a slot is listed twice."""
    mask = torch.zeros(*indices.shape[:2], s + 1, dtype=torch.bool, device=indices.device)
    mask.scatter_(-1, torch.where(indices < 0, s, indices), True)  # -1 lands in the spare column S
    mask = mask[..., :s]
    if not torch.equal(mask.sum(-1), (indices >= 0).sum(-1)):
        return None  # duplicates weigh twice in the listed form; a mask cannot say that
    return mask


def _dense_is_cheaper(q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor) -> bool:
    """Whether masked dense scores [H, S] per query hold fewer elements than the gathered rows [K, E]."""
    return q.shape[2] * kv.shape[1] <= indices.shape[-1] * kv.shape[-1]


def _masked_probs(q: torch.Tensor, kv: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """Softmax of each head over the masked-in slots: q [B, T, H, E], kv [B, S, E], mask [B, T, S] -> [B, T, H, S]."""
    scores = torch.einsum("bthe,bse->bths", q.float(), kv.float()) * scale
    scores = scores.masked_fill(~mask[:, :, None, :], float("-inf"))
    peak = scores.amax(dim=-1, keepdim=True).detach()
    peak = peak.masked_fill(peak == float("-inf"), 0.0)
    weights = torch.exp(scores - peak)  # 0 at slots not listed
    return weights / weights.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)


def sparse_mla_attention(
    q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, scale: float, v_dim: int
) -> torch.Tensor:
    """Each query head attends over its listed slots of a shared (MQA) kv; differentiable in q and kv.

    q [B, T, H, E], kv [B, S, E] (values are kv[..., :v_dim]), indices [B, T, K] (-1 = none) ->
    out [B, T, H, v_dim] in q's dtype; a query with no listed slot outputs zeros.
    """
    # Where S is short next to K * E / H (CPU training lengths), dense scores masked to the list are the
    # same numbers for a fraction of the memory traffic: gathering [B, T, K, E] and scattering its
    # gradient back dominated a CPU training step.
    mask = _listed_mask(indices, kv.shape[1]) if _dense_is_cheaper(q, kv, indices) else None
    if mask is not None:
        probs = _masked_probs(q, kv, mask, scale)  # [B, T, H, S]
        return torch.einsum("bths,bsc->bthc", probs, kv[..., :v_dim].float()).to(q.dtype)
    return gathered_attention(q, kv, indices, scale, v_dim)


def gathered_attention(
    q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, scale: float, v_dim: int
) -> torch.Tensor:
    """`sparse_mla_attention` by gathering the listed rows: the literal definition, for any K and S."""
    picked = _gather_slots(kv, indices)  # [B, T, K, E]
    probs = _listed_probs(q, picked, indices >= 0, scale)  # [B, T, H, K]
    out = torch.einsum("bthk,btkc->bthc", probs, picked[..., :v_dim].float())
    return out.to(q.dtype)


@torch.no_grad()
def attention_mass(q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, scale: float) -> torch.Tensor:
    """The attention distribution over the listed slots, summed over heads and renormalised: -> [B, T, K].

    Same inputs as `sparse_mla_attention`; rows sum to 1 (all zero for a query with no listed slot).
    This is the indexer's training target, so it carries no gradient.
    """
    b, t, h, e = q.shape
    mass = q.new_zeros(b, t, indices.shape[-1], dtype=torch.float32)
    mask = _listed_mask(indices, kv.shape[1]) if _dense_is_cheaper(q, kv, indices) else None
    per_query = h * kv.shape[1] if mask is not None else indices.shape[-1] * (e + h)
    step = _query_chunk(b * per_query)
    for t0 in range(0, t, step):
        t1 = min(t, t0 + step)
        chunk = indices[:, t0:t1]
        if mask is not None:  # the same numbers as the gathered form, as in sparse_mla_attention
            dense = _masked_probs(q[:, t0:t1], kv, mask[:, t0:t1], scale).sum(dim=2)  # [B, t, S]
            summed = dense.gather(-1, chunk.clamp_min(0)).masked_fill(chunk < 0, 0.0)  # [B, t, K]
        else:
            picked = _gather_slots(kv, chunk)  # [B, t, K, E]
            summed = _listed_probs(q[:, t0:t1], picked, chunk >= 0, scale).sum(dim=2)  # [B, t, K]
        mass[:, t0:t1] = summed / summed.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)
    return mass
