"""Shared openings: found exactly, and run once in training with the loss and gradients of the full forward."""
import pytest
import torch
import torch.nn.functional as F

from jointrl.model.openings import forward_sharing_openings, opening_limits, shared_openings
from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer


def lcp(a, b):
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def test_shared_openings_cluster_exactly_the_feeds_that_open_alike():
    g = torch.Generator().manual_seed(12)
    for _ in range(50):
        # A small alphabet and shared stems make long common openings frequent.
        def draw(high, longest):
            return torch.randint(0, high, (int(torch.randint(0, longest, (1,), generator=g)),), generator=g).tolist()

        stems = [draw(3, 8) for _ in range(3)]
        feeds = []
        for _ in range(int(torch.randint(0, 9, (1,), generator=g))):
            feed = stems[int(torch.randint(0, 3, (1,), generator=g))] + draw(3, 5)
            if feed and feed not in feeds:
                feeds.append(feed)
        clusters = shared_openings(feeds, 4)
        where = {j: c for c, (_, js) in enumerate(clusters) for j in js}
        assert len(where) == sum(len(js) for _, js in clusters), "clusters are disjoint"
        for n, js in clusters:
            assert len(js) >= 2 and n >= 4
            assert n == min(lcp(feeds[a], feeds[b]) for a in js for b in js if a != b)
        for a in range(len(feeds)):
            for b in range(a + 1, len(feeds)):
                same = a in where and where.get(a) == where.get(b)
                assert same == (lcp(feeds[a], feeds[b]) >= 4), (feeds, clusters)


@pytest.fixture(scope="module")
def model(one_thread):
    torch.manual_seed(0)
    return Transformer(PRESETS["debug"]).train()


def batch_of(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded tokens [B, W] and valid [B, W]."""
    width = max(len(r) for r in rows)
    tokens = torch.zeros(len(rows), width, dtype=torch.long)
    valid = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, r in enumerate(rows):
        tokens[i, : len(r)], valid[i, : len(r)] = torch.tensor(r), True
    return tokens, valid


def two_families(seed: int) -> tuple[list[list[int]], list[int]]:
    """Rows of two openings (50 and 36 tokens) with tails of 5-20 tokens, one row of its own; and each row's limit."""
    g = torch.Generator().manual_seed(seed)

    def draw(n):
        return torch.randint(8, 500, (n,), generator=g).tolist()

    a, b = draw(50), draw(36)
    rows = [a + draw(5), b + draw(20), a + draw(12), draw(30), b + draw(9), a + draw(20)]
    return rows, [len(r) for r in rows]


def loss_of(hidden: torch.Tensor, model: Transformer, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token loss where mask [B, W] is set (the SFT loss's form)."""
    logits = model.head(hidden[:, :-1][mask[:, 1:]])
    return F.cross_entropy(logits, tokens[:, 1:][mask[:, 1:]])


def grads(model: Transformer, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_shared_openings_give_the_full_forwards_loss_and_gradients(model):
    rows, _ = two_families(1)
    tokens, valid = batch_of(rows)
    # The loss counts each row's last 4 positions, all after its opening, as an SFT loss counts assistant tokens.
    mask = torch.zeros_like(valid)
    for i, r in enumerate(rows):
        mask[i, len(r) - 4 : len(r)] = True
    limits = [len(r) - 5 for r in rows]
    full = model(tokens, valid=valid, return_logits=False)
    reference = loss_of(full.hidden, model, tokens, mask)
    expected = grads(model, reference)
    shared = forward_sharing_openings(model, tokens, valid, limits, minimum=16)
    loss = loss_of(shared.hidden, model, tokens, mask)
    got = grads(model, loss)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-5)
    assert expected.keys() == got.keys()
    for name, g in expected.items():
        scale = g.abs().max().clamp_min(1e-8)
        assert ((got[name] - g).abs().max() / scale).item() < 1e-4, name


def test_each_opening_is_routed_once_and_limits_cap_it(model):
    rows, limits = two_families(2)
    tokens, valid = batch_of(rows)
    with torch.no_grad():
        shared = forward_sharing_openings(model, tokens, valid, limits, minimum=16)
        full = model(tokens, valid=valid, return_logits=False)
    k = PRESETS["debug"].n_active
    # Openings of 50 tokens (3 rows) and 36 (2 rows) are routed once instead of once per row.
    saved = 50 * 2 + 36
    assert (full.expert_load.sum(dim=1) == k * valid.sum()).all()
    assert (shared.expert_load.sum(dim=1) == k * (valid.sum() - saved)).all()
    # Tails' states equal the full forward's; inside an opening the rows' frame holds zeros.
    for i, r in enumerate(rows):
        start = 50 if i in (0, 2, 5) else 36 if i in (1, 4) else 0
        assert torch.allclose(shared.hidden[i, start : len(r)], full.hidden[i, start : len(r)], atol=1e-5)
        assert (shared.hidden[i, :start] == 0).all()
    # A limit below the common opening caps it: rows 0 and 2 may share only their first 40 tokens.
    capped = list(limits)
    capped[0] = capped[2] = capped[5] = 40
    with torch.no_grad():
        out = forward_sharing_openings(model, tokens, valid, capped, minimum=16)
    assert (out.expert_load.sum(dim=1) == k * (valid.sum() - (40 * 2 + 36))).all()
    assert torch.allclose(out.hidden[0, 40:len(rows[0])], full.hidden[0, 40:len(rows[0])], atol=1e-5)


def test_rows_that_share_nothing_run_as_one_plain_forward(model):
    tokens, valid = batch_of([[9, 10, 11, 12], [13, 14], [9, 10, 15]])
    with torch.no_grad():
        out = forward_sharing_openings(model, tokens, valid, [4, 2, 3], minimum=16)
        plain = model(tokens, valid=valid, return_logits=False)
    assert torch.equal(out.hidden, plain.hidden)
    with pytest.raises(ValueError, match="right-padded"):
        forward_sharing_openings(model, tokens, valid.flip(1), [4, 2, 3])


def test_replayed_selections_go_in_and_come_out_in_the_rows_frame(model):
    rows, limits = two_families(3)
    tokens, valid = batch_of(rows)
    with torch.no_grad():
        full = model(tokens, valid=valid, return_logits=False)
        # Replay the full forward's experts and DSA selections (token indices): the same states, and the same
        # selections reported back, though each row's slots sit at another offset in the shared forward's cache.
        replayed = forward_sharing_openings(model, tokens, valid, limits, routing=full.routing,
                                            sparse_topk=full.sparse_topk, minimum=16)
        assert torch.equal(replayed.routing[valid], full.routing[valid])
        assert torch.equal(replayed.sparse_topk[valid], full.sparse_topk[valid])
        # Choosing afresh: what it reports is what it used, so a full forward replaying that reproduces it.
        fresh = forward_sharing_openings(model, tokens, valid, limits, minimum=16)
        again = model(tokens, valid=valid, routing=fresh.routing, sparse_topk=fresh.sparse_topk, return_logits=False)
    for out in (replayed, fresh):
        reference = full if out is replayed else again
        for i, r in enumerate(rows):
            start = 50 if i in (0, 2, 5) else 36 if i in (1, 4) else 0
            assert torch.allclose(out.hidden[i, start : len(r)], reference.hidden[i, start : len(r)], atol=1e-5)


def test_a_shared_opening_trains_to_the_same_bits_every_time():
    """Two intra-op threads sum repeated indices' gradients in a racy order unless every copy is an index_select."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(0)
        model = Transformer(PRESETS["mini"]).train()
        g = torch.Generator().manual_seed(5)
        opening = torch.randint(8, 4000, (240,), generator=g).tolist()
        rows = [opening + torch.randint(8, 4000, (int(n),), generator=g).tolist()
                for n in torch.randint(60, 120, (16,), generator=g)]
        tokens, valid = batch_of(rows)
        mask = valid.clone()
        mask[:, :241] = False
        runs = []
        for _ in range(2):
            shared = forward_sharing_openings(model, tokens, valid, [241] * len(rows))
            runs.append(grads(model, loss_of(shared.hidden, model, tokens, mask) + shared.aux_loss))
        assert all(torch.equal(runs[0][name], runs[1][name]) for name in runs[0])
    finally:
        torch.set_num_threads(before)


def test_an_opening_reaches_to_the_first_needed_position_or_the_whole_row():
    valid = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    needed = torch.tensor([[0, 0, 1, 1, 0], [0, 0, 0, 0, 0], [1, 0, 0, 0, 1]], dtype=torch.bool)
    assert opening_limits(needed, valid) == [2, 3, 0]
