"""Gated DSA and the sparse-attention ops against loop references written here: selection, attention, cache, loss."""
import math

import pytest
import torch

from jointrl.kernels import sparse_attn
from jointrl.kernels.sparse_attn import naive
from jointrl.model.cache import ModelCache
from jointrl.model.dsa import GatedDSA
from jointrl.model.mla import GatedMLA
from jointrl.model.presets import PRESETS

ATOL = 1e-5  # fp32; outputs and losses are O(1)
PADS = [0, 3, 1]  # left padding per row
T = 8
# The debug preset's pattern is KSKL: layer 1 is a DSA layer.
LAYER = 1


def config(**update):
    return PRESETS["debug"].model_copy(update=update)


def spread(module: torch.nn.Module) -> None:
    """Weights wide enough that attention and index scores are far from uniform."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, 1.5 / math.sqrt(p.shape[1]))
            elif name.endswith("bias"):
                p.normal_(0.0, 0.2)
            else:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))


def make_layer(**update) -> GatedDSA:
    layer = GatedDSA(config(**update), LAYER)
    spread(layer)
    return layer


def padded_batch(dim: int):
    """x [B, T, D] with junk in padded columns, positions and valid as the model builds them."""
    valid = torch.ones(len(PADS), T, dtype=torch.bool)
    for b, pad in enumerate(PADS):
        valid[b, :pad] = False
    x = torch.randn(len(PADS), T, dim)
    x[~valid] = 50.0 * torch.randn(int((~valid).sum()), dim)
    positions = (valid.long().cumsum(1) - 1).clamp_min(0)
    return x, positions, valid


def rotate(x: torch.Tensor, pos: int, theta: float, interleaved: bool) -> torch.Tensor:
    """Rotate a vector's dim pairs by pos * theta^(-2i/R): pairs (2i, 2i+1), or (i, i + R/2) when split in halves."""
    out = x.clone()
    r = x.shape[-1]
    for i in range(r // 2):
        angle = pos * theta ** (-2 * i / r)
        a_idx, b_idx = (2 * i, 2 * i + 1) if interleaved else (i, i + r // 2)
        a, b = x[a_idx], x[b_idx]
        out[a_idx] = a * math.cos(angle) - b * math.sin(angle)
        out[b_idx] = a * math.sin(angle) + b * math.cos(angle)
    return out


def rms_norm(x, weight, eps):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def query_latent(p, cfg, x):
    return rms_norm(x @ p["q_a_proj.weight"].T, p["q_a_layernorm.weight"], cfg.norm_eps)


def reference_heads(layer, cfg, x, positions):
    """Expanded per-head q, k [B, T, H, N + R] (rotated) and v [B, T, H, V], one token at a time."""
    p = dict(layer.named_parameters())
    h, nope, rope, vd, c = cfg.attn_heads, cfg.qk_nope_dim, cfg.qk_rope_dim, cfg.v_head_dim, cfg.kv_lora_rank
    b, t = x.shape[:2]
    q = (query_latent(p, cfg, x) @ p["q_b_proj.weight"].T).view(b, t, h, nope + rope).clone()
    compressed = x @ p["kv_a_proj_with_mqa.weight"].T
    latent = rms_norm(compressed[..., :c], p["kv_a_layernorm.weight"], cfg.norm_eps)
    kv = (latent @ p["kv_b_proj.weight"].T).view(b, t, h, nope + vd)
    k = torch.empty(b, t, h, nope + rope)
    for i in range(b):
        for j in range(t):
            pos = int(positions[i, j])
            k_rope = rotate(compressed[i, j, c:], pos, cfg.rope_theta, interleaved=True)
            for head in range(h):
                q[i, j, head, nope:] = rotate(q[i, j, head, nope:], pos, cfg.rope_theta, interleaved=True)
                k[i, j, head] = torch.cat([kv[i, j, head, :nope], k_rope])
    return q, k, kv[..., nope:]


def reference_attention(layer, cfg, x, positions, allowed):
    """Query t sees exactly the slots allowed[b, t] [B, T, T]: (y [B, T, D], probs [B, T, H, T])."""
    p = dict(layer.named_parameters())
    q, k, v = reference_heads(layer, cfg, x, positions)
    b, t, h = q.shape[:3]
    scale = (cfg.qk_nope_dim + cfg.qk_rope_dim) ** -0.5
    out = torch.zeros(b, t, h, cfg.v_head_dim)
    probs = torch.zeros(b, t, h, t)
    for i in range(b):
        for j in range(t):
            slots = [s for s in range(t) if allowed[i, j, s]]
            if not slots:
                continue
            for head in range(h):
                scores = torch.stack([q[i, j, head] @ k[i, s, head] for s in slots]) * scale
                weights = torch.softmax(scores, dim=0)
                for w, s in zip(weights, slots):
                    probs[i, j, head, s] = w
                    out[i, j, head] += w * v[i, s, head]
    o = out.flatten(2) * torch.sigmoid(x @ p["g_proj.weight"].T)
    return o @ p["o_proj.weight"].T, probs


def reference_index_scores(layer, cfg, x, positions):
    """score(t, s) = sum_h w_h(t) relu(q_h(t) . k(s)) of the indexer, token by token: [B, T, T]."""
    p = dict(layer.named_parameters())
    hi, dim, ri = cfg.index_heads, cfg.index_head_dim, cfg.index_rope_dim
    b, t = x.shape[:2]
    iq = (query_latent(p, cfg, x) @ p["indexer.wq_b.weight"].T).view(b, t, hi, dim)
    ik = x @ p["indexer.wk.weight"].T
    mean, var = ik.mean(-1, keepdim=True), ik.var(-1, unbiased=False, keepdim=True)
    ik = (ik - mean) / torch.sqrt(var + cfg.norm_eps) * p["indexer.k_norm.weight"] + p["indexer.k_norm.bias"]
    weights = (x @ p["indexer.weights_proj.weight"].T) * hi**-0.5 * dim**-0.5
    scores = torch.zeros(b, t, t)
    for i in range(b):
        keys = [torch.cat([rotate(ik[i, s, :ri], int(positions[i, s]), cfg.rope_theta, False), ik[i, s, ri:]])
                for s in range(t)]
        for j in range(t):
            pos = int(positions[i, j])
            for head in range(hi):
                qh = torch.cat([rotate(iq[i, j, head, :ri], pos, cfg.rope_theta, False), iq[i, j, head, ri:]])
                for s in range(t):
                    scores[i, j, s] += weights[i, j, head] * torch.relu(qh @ keys[s])
    return scores


def causal_valid(valid):
    """[B, T, T]: slot s is a candidate of query t when s <= t and the slot is real."""
    t = valid.shape[1]
    return torch.ones(t, t, dtype=torch.bool).tril()[None] & valid[:, None, :]


def check_selection(indices, valid, k):
    """Each valid query lists min(k, #candidates) distinct causal, valid slots, then -1s."""
    allowed = causal_valid(valid)
    for b in range(valid.shape[0]):
        for t in range(valid.shape[1]):
            if not valid[b, t]:
                continue
            row = indices[b, t].tolist()
            n = min(k, int(allowed[b, t].sum()))
            assert all(s == -1 for s in row[n:]), row
            assert len(set(row[:n])) == n and all(allowed[b, t, s] for s in row[:n]), row


def as_allowed(indices, t):
    """Selections [B, T, K] (-1 = none) as a [B, T, T] bool mask."""
    allowed = torch.zeros(indices.shape[0], indices.shape[1], t + 1, dtype=torch.bool)
    allowed.scatter_(-1, indices.clamp_min(-1) % (t + 1), True)  # -1 lands in the spare last column
    return allowed[..., :t]


def test_indexer_topk_matches_brute_force():
    b, t, s, hi, dim, start = 2, 5, 9, 3, 4, 4
    q, k = torch.randn(b, t, hi, dim), torch.randn(b, s, dim)
    w = torch.randn(b, t, hi)
    k_valid = torch.rand(b, s) > 0.3
    for topk in (3, 12):
        got = naive.indexer_topk(q, w, k, k_valid, start, topk)
        assert got.shape == (b, t, topk) and got.dtype == torch.long
        for i in range(b):
            for j in range(t):
                cands = [c for c in range(s) if c <= start + j and k_valid[i, c]]
                score = {
                    c: sum(float(w[i, j, h]) * max(0.0, float(q[i, j, h] @ k[i, c])) for h in range(hi)) for c in cands
                }
                # Ties (ReLU zeros are common) go to the later slot.
                best = sorted(cands, key=lambda c: (-score[c], -c))[:topk]
                assert got[i, j].tolist() == best + [-1] * (topk - len(best))


def test_sparse_mla_attention_matches_loop_in_value_and_gradient():
    b, t, s, h, e, v_dim, scale = 2, 4, 7, 3, 6, 4, 0.4
    q = torch.randn(b, t, h, e, requires_grad=True)
    kv = torch.randn(b, s, e, requires_grad=True)
    indices = torch.randint(0, s, (b, t, 3))
    indices[0, 1, 1:] = -1
    indices[1, 2] = -1  # a query with nothing listed
    out = naive.sparse_mla_attention(q, kv, indices, scale, v_dim)
    expected = torch.zeros(b, t, h, v_dim)
    for i in range(b):
        for j in range(t):
            slots = [c for c in indices[i, j].tolist() if c >= 0]
            for head in range(h):
                if slots:
                    weights = torch.softmax(torch.stack([q[i, j, head] @ kv[i, c] for c in slots]) * scale, dim=0)
                    expected[i, j, head] = sum(wt * kv[i, c, :v_dim] for wt, c in zip(weights, slots))
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)
    probe = torch.randn_like(out)
    got_grads = torch.autograd.grad((out * probe).sum(), (q, kv))
    want_grads = torch.autograd.grad((expected * probe).sum(), (q, kv))
    for got, want in zip(got_grads, want_grads):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    assert (out[1, 2] == 0).all()


def test_large_k_equals_dense_gated_mla():
    cfg = config(index_topk=64)
    dsa = make_layer(index_topk=64)
    mla = GatedMLA(cfg, LAYER)
    missing, unexpected = mla.load_state_dict(dsa.state_dict(), strict=False)
    assert missing == [] and all(name.startswith("indexer.") for name in unexpected)
    x, positions, valid = padded_batch(cfg.dim)
    with torch.no_grad():
        y_sparse, aux = dsa(x, positions, valid)
        y_dense, _ = mla(x, positions, valid)
    torch.testing.assert_close(y_sparse[valid], y_dense[valid], atol=ATOL, rtol=0)
    check_selection(aux["topk_indices"], valid, 64)


def test_small_k_attends_exactly_the_selected_slots():
    cfg = config(index_topk=3)
    layer = make_layer(index_topk=3)
    x, positions, valid = padded_batch(cfg.dim)
    with torch.no_grad():
        y, aux = layer(x, positions, valid)
        chosen = aux["topk_indices"]
        check_selection(chosen, valid, 3)
        expected, _ = reference_attention(layer, cfg, x, positions, as_allowed(chosen, T))
        torch.testing.assert_close(y[valid], expected[valid], atol=ATOL, rtol=0)
        # The selection is the indexer's: the top 3 of the reference index scores among the candidates.
        scores = reference_index_scores(layer, cfg, x, positions)
        for b, t in valid.nonzero().tolist():
            cands = causal_valid(valid)[b, t].nonzero().flatten().tolist()
            best = sorted(cands, key=lambda s: (-float(scores[b, t, s]), -s))[:3]
            assert set(chosen[b, t].tolist()) - {-1} == set(best)


def test_forced_selection_is_replayed_bit_for_bit():
    cfg = config(index_topk=3)
    layer = make_layer(index_topk=3)
    x, positions, valid = padded_batch(cfg.dim)
    with torch.no_grad():
        y, aux = layer(x, positions, valid)
        replay, replay_aux = layer(x, positions, valid, topk_indices=aux["topk_indices"])
        assert torch.equal(replay, y) and torch.equal(replay_aux["topk_indices"], aux["topk_indices"])
        # Any other valid selection is honoured too: here, the most recent candidates.
        recent = torch.full_like(aux["topk_indices"], -1)
        for b, t in valid.nonzero().tolist():
            slots = [s for s in range(t, -1, -1) if valid[b, s]][:3]
            recent[b, t, : len(slots)] = torch.tensor(slots)
        forced, _ = layer(x, positions, valid, topk_indices=recent)
        expected, _ = reference_attention(layer, cfg, x, positions, as_allowed(recent, T))
        torch.testing.assert_close(forced[valid], expected[valid], atol=ATOL, rtol=0)
    future = aux["topk_indices"].clone()
    future[0, 0, 0] = 5
    with pytest.raises(ValueError, match="topk_indices"):
        layer(x, positions, valid, topk_indices=future)


@pytest.mark.parametrize("chunks", [[1] * T, [3, 1, 4]], ids=["token_by_token", "chunked"])
def test_cached_decode_matches_full_forward(chunks):
    cfg = config(index_topk=3)
    layer = make_layer(index_topk=3)
    x, positions, valid = padded_batch(cfg.dim)
    cache = ModelCache.allocate(cfg, x.shape[0], capacity=T + 1).layers[LAYER]
    with torch.no_grad():
        full, aux = layer(x, positions, valid)
        outs, picks, start = [], [], 0
        for size in chunks:
            cols = slice(start, start + size)
            y, step_aux = layer(x[:, cols], positions[:, cols], valid[:, cols], cache=cache)
            outs.append(y)
            picks.append(step_aux["topk_indices"])
            start += size
    stepped, stepped_picks = torch.cat(outs, dim=1), torch.cat(picks, dim=1)
    assert torch.isfinite(stepped).all()
    torch.testing.assert_close(stepped[valid], full[valid], atol=ATOL, rtol=0)
    assert torch.equal(stepped_picks.sort(-1).values[valid], aux["topk_indices"].sort(-1).values[valid])


def test_left_padding_does_not_change_valid_rows():
    cfg = config(index_topk=3)
    layer = make_layer(index_topk=3)
    x, positions, valid = padded_batch(cfg.dim)
    with torch.no_grad():
        y, aux = layer(x, positions, valid)
        for b, pad in enumerate(PADS):
            alone, alone_aux = layer(x[b : b + 1, pad:], positions[b : b + 1, pad:], valid[b : b + 1, pad:])
            torch.testing.assert_close(y[b, pad:], alone[0], atol=ATOL, rtol=0)
            # Slots are columns, so the padded row's selections are the same tokens, shifted by the padding.
            shifted = torch.where(alone_aux["topk_indices"][0] >= 0, alone_aux["topk_indices"][0] + pad, -1)
            assert torch.equal(aux["topk_indices"][b, pad:], shifted)


@pytest.mark.parametrize("stage", ["dense", "sparse"])
def test_indexer_loss_matches_hand_computed_kl(stage):
    cfg = config(index_topk=3)
    layer = make_layer(index_topk=3)
    layer.indexer_stage = stage
    x, positions, valid = padded_batch(cfg.dim)
    y, aux = layer(x, positions, valid)
    with torch.no_grad():
        candidates = causal_valid(valid) if stage == "dense" else as_allowed(aux["topk_indices"], T)
        _, probs = reference_attention(layer, cfg, x, positions, candidates)
        scores = reference_index_scores(layer, cfg, x, positions)
        total = 0.0
        rows = valid.nonzero().tolist()
        for b, t in rows:
            slots = candidates[b, t].nonzero().flatten()
            target = probs[b, t, :, slots].sum(0)
            target = target / target.sum()
            log_index = torch.log_softmax(scores[b, t, slots], dim=0)
            total += float((target * (target.log() - log_index)).sum())
    assert torch.isfinite(aux["indexer_loss"])
    assert aux["indexer_loss"].item() == pytest.approx(total / len(rows), abs=ATOL)
    if stage == "dense":
        # The dense stage's attention is the dense MLA, whatever the selection.
        mla = GatedMLA(cfg, LAYER)
        mla.load_state_dict(layer.state_dict(), strict=False)
        with torch.no_grad():
            torch.testing.assert_close(y[valid], mla(x, positions, valid)[0][valid], atol=ATOL, rtol=0)


def test_sparse_stage_indexer_loss_trains_only_the_indexer():
    layer = make_layer(index_topk=3)
    x, positions, valid = padded_batch(layer.dim)
    x.requires_grad_(True)
    _, aux = layer(x, positions, valid)
    aux["indexer_loss"].backward()
    assert x.grad is None
    for name, p in layer.named_parameters():
        if name.startswith("indexer."):
            assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name
        else:
            assert p.grad is None, name
    # In the dense warm-up the loss also reaches what feeds the indexer (the trainer freezes it instead).
    layer.zero_grad(set_to_none=True)
    layer.indexer_stage = "dense"
    _, aux = layer(x, positions, valid)
    aux["indexer_loss"].backward()
    assert layer.q_a_proj.weight.grad is not None and layer.q_a_proj.weight.grad.abs().sum() > 0


def test_gradients_reach_every_parameter():
    layer = make_layer(index_topk=3)
    x, positions, valid = padded_batch(layer.dim)
    y, aux = layer(x, positions, valid)
    ((y[valid] ** 2).sum() + aux["indexer_loss"]).backward()
    for name, p in layer.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def test_no_grad_forward_skips_the_loss_and_bad_settings_raise(monkeypatch):
    layer = make_layer(index_topk=3)
    x, positions, valid = padded_batch(layer.dim)
    with torch.no_grad():
        _, aux = layer(x, positions, valid)
    assert aux["indexer_loss"].item() == 0.0
    with pytest.raises(ValueError, match="indexer_stage"):
        layer.indexer_stage = "warmup"
    mla_cache = ModelCache.allocate(config(), x.shape[0], capacity=T).layers[3]
    with pytest.raises(ValueError, match="index keys"):
        layer(x, positions, valid, cache=mla_cache)
    monkeypatch.setenv("JOINTRL_KERNELS", "fast")
    with pytest.raises(ValueError, match="JOINTRL_KERNELS"):
        q, w, k = torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1), torch.zeros(1, 1, 2)
        sparse_attn.indexer_topk(q, w, k, torch.ones(1, 1, dtype=torch.bool), 0, 1)
    monkeypatch.setenv("JOINTRL_KERNELS", "naive")
    with torch.no_grad():
        forced_naive, _ = layer(x, positions, valid)
    monkeypatch.delenv("JOINTRL_KERNELS")
    with torch.no_grad():
        assert torch.equal(forced_naive, layer(x, positions, valid)[0])


def test_gate_off_loads_into_transformers_deepseek_v32_attention_and_matches():
    """The export promise: ungated DSA is transformers' deepseek_v32 attention + indexer, key for key."""
    from transformers import DeepseekV32Config
    from transformers.models.deepseek_v32.modeling_deepseek_v32 import DeepseekV32Attention, DeepseekV32RotaryEmbedding

    # deepseek_v32 rotates the indexer with the attention's rotary dims; 8 heads make ReLU-zero ties rare,
    # since its top-k breaks ties its own way.
    update = {"attn_output_gate": False, "index_heads": 8, "index_topk": 3, "index_rope_dim": 8}
    cfg = config(**update)
    layer = make_layer(**update)
    hf_cfg = DeepseekV32Config(
        hidden_size=cfg.dim, num_attention_heads=cfg.attn_heads, num_key_value_heads=cfg.attn_heads,
        q_lora_rank=cfg.q_lora_rank, kv_lora_rank=cfg.kv_lora_rank, qk_nope_head_dim=cfg.qk_nope_dim,
        qk_rope_head_dim=cfg.qk_rope_dim, v_head_dim=cfg.v_head_dim, attention_bias=False, rms_norm_eps=cfg.norm_eps,
        rope_theta=cfg.rope_theta, index_topk=cfg.index_topk, index_head_dim=cfg.index_head_dim,
        index_n_heads=cfg.index_heads,
    )
    hf_cfg._attn_implementation = "eager"
    hf_layer = DeepseekV32Attention(hf_cfg, 0)
    hf_layer.load_state_dict(layer.state_dict(), strict=True)
    t = 10
    x, positions = torch.randn(1, t, cfg.dim), torch.arange(t)[None]
    causal = torch.full((t, t), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        expected, _ = hf_layer(x, DeepseekV32RotaryEmbedding(hf_cfg)(x, positions), causal)
        y, _ = layer(x, positions, torch.ones(1, t, dtype=torch.bool))
    torch.testing.assert_close(y, expected, atol=ATOL, rtol=0)
