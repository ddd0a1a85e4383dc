"""Rows that open with the same tokens (an env's system prompt and tool schemas): found, and run through the model once.

The engine prefills such an opening once per admission. Training runs it once per batch with autograd and continues
every row that shares it from a copy of its state: the cache writes are differentiable, so the loss and gradients are
those of the full forward, for a fraction of the tokens when the opening is most of each row.
"""
from __future__ import annotations

import torch

from jointrl.model.transformer import ModelOutput, Transformer

# Rows sharing at least this many leading tokens are run through one forward over them.
MIN_SHARED = 32


def shared_openings(feeds: list[list[int]], minimum: int) -> list[tuple[int, list[int]]]:
    """Clusters of feeds that open with the same >= minimum tokens: (shared length, feed indices), each cluster of two
    or more."""
    if not feeds:
        return []
    order = sorted(range(len(feeds)), key=lambda j: feeds[j])
    clusters: list[tuple[int, list[int]]] = []
    run, length = [order[0]], 0
    for a, b in zip(order, order[1:]):
        shorter = min(len(feeds[a]), len(feeds[b]))
        common = next((k for k in range(shorter) if feeds[a][k] != feeds[b][k]), shorter)
        if common >= minimum:
            length = common if len(run) == 1 else min(length, common)
            run.append(b)
            continue
        if len(run) > 1:
            clusters.append((length, run))
        run = [b]
    if len(run) > 1:
        clusters.append((length, run))
    return clusters


def opening_limits(needed: torch.Tensor, valid: torch.Tensor) -> list[int]:
    """How far each row's shared opening may reach: its first position whose output is needed (needed [B, W]), or its
    whole length when none is."""
    return torch.where(needed.any(dim=1), needed.int().argmax(dim=1), valid.sum(dim=1)).tolist()


def forward_sharing_openings(model: Transformer, tokens: torch.Tensor, valid: torch.Tensor, limits: list[int],
                             routing: torch.Tensor | None = None, sparse_topk: torch.Tensor | None = None,
                             minimum: int = MIN_SHARED) -> ModelOutput:
    """The model over right-padded rows tokens [B, W] (valid [B, W]), each opening that rows share run once.

    Row b's shared opening covers at most its first limits[b] tokens: the positions whose outputs are used must come
    after it. routing [B, W, L, k] and sparse_topk [B, W, S, k_s] (token indices) replay selections as in
    `Transformer.forward`; an opening replays its first row's. Returns, in the rows' frame, hidden [B, W, D] (zeros
    inside a shared opening, whose states live in the opening's own forward) and the routing and DSA selections used
    (an opening's copied to every row that shares it); expert_load summed over the forwards and aux_loss as their
    token-weighted mean: an opening counts once, not once per row, in the balance and indexer losses.
    """
    lengths = valid.sum(dim=1).tolist()
    device = tokens.device
    if not torch.equal(valid, torch.arange(valid.shape[1], device=device)[None, :] < valid.sum(dim=1, keepdim=True)):
        raise ValueError("forward_sharing_openings needs right-padded rows (real tokens first)")
    rows = [tokens[i, : min(n, limit)].tolist() for i, (n, limit) in enumerate(zip(lengths, limits))]
    clusters = shared_openings(rows, minimum)
    if not clusters:
        return model(tokens, valid=valid, routing=routing, sparse_topk=sparse_topk, return_logits=False)
    b, width = tokens.shape
    cache = model.allocate_cache(b, width)
    start = [0] * b
    heads: list[tuple[ModelOutput, int, list[int]]] = []
    for n, members in sorted(clusters, key=lambda c: -c[0]):  # longest first: every opening ends at the last column
        opening = model.allocate_cache(1, n)
        first = members[0]
        head = model(tokens[first : first + 1, :n], cache=opening, return_logits=False,
                     routing=None if routing is None else routing[first : first + 1, :n],
                     sparse_topk=None if sparse_topk is None else sparse_topk[first : first + 1, :n])
        heads.append((head, n, members))
        cache.put_rows(members, opening, [0] * len(members))
        for i in members:
            start[i] = n
    # Each row's tokens sit `shift` slots after their token index (its opening ends at the cache's last column, its
    # tail follows), and DSA selections name slots here but token indices in the rows' frame.
    shift = [cache.length - s for s in start]
    tails = [n - s for n, s in zip(lengths, start)]
    steps = torch.arange(max(tails), device=device)[None, :]  # [1, T]
    index = (torch.tensor(start, device=device)[:, None] + steps).clamp_max(width - 1)  # [B, T]
    tail_valid = steps < torch.tensor(tails, device=device)[:, None]  # [B, T]
    shifts = torch.tensor(shift, device=device)[:, None, None, None]  # [B, 1, 1, 1]
    take = index[..., None, None]
    tail_routing = None if routing is None else routing.gather(1, take.expand(-1, -1, *routing.shape[2:]))
    tail_topk = None
    if sparse_topk is not None:
        picked = sparse_topk.gather(1, take.expand(-1, -1, *sparse_topk.shape[2:]))
        keep = (picked >= 0) & tail_valid[..., None, None]  # a padding query's selection may name any slot
        tail_topk = torch.where(keep, picked + shifts, -1)
    out = model(tokens.gather(1, index), valid=tail_valid, cache=cache, routing=tail_routing, sparse_topk=tail_topk,
                return_logits=False)

    hidden = out.hidden.new_zeros(b, width, out.hidden.shape[-1])
    used_routing = None if out.routing is None else out.routing.new_zeros(b, width, *out.routing.shape[2:])
    used_topk = None
    if out.sparse_topk is not None:
        used_topk = out.sparse_topk.new_full((b, width, *out.sparse_topk.shape[2:]), -1)
    for i, (s, t) in enumerate(zip(start, tails)):
        hidden[i, s : s + t] = out.hidden[i, :t]
        if used_routing is not None:
            used_routing[i, s : s + t] = out.routing[i, :t]
        if used_topk is not None:
            slots = out.sparse_topk[i, :t]
            used_topk[i, s : s + t] = torch.where(slots >= 0, slots - shift[i], -1)
    for head, n, members in heads:
        for i in members:
            if used_routing is not None:
                used_routing[i, :n] = head.routing[0]
            if used_topk is not None:
                used_topk[i, :n] = head.sparse_topk[0]
    forwards = [(head, n) for head, n, _ in heads] + [(out, sum(tails))]
    loads = [f.expert_load for f, _ in forwards if f.expert_load is not None]
    return ModelOutput(
        logits=None, hidden=hidden, routing=used_routing, sparse_topk=used_topk,
        expert_load=torch.stack(loads).sum(dim=0) if loads else None,
        aux_loss=sum(f.aux_loss * n for f, n in forwards) / sum(n for _, n in forwards),
    )
