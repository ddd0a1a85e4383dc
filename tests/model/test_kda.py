"""KDA op (recurrent and chunkwise forms) and layer against step loops written here, plus cache parity."""
import math

import pytest
import torch
import torch.nn.functional as F

from jointrl.kernels.kda import chunk_kda, recurrent_kda
from jointrl.model.cache import KDAState, ModelCache
from jointrl.model.kda import KDAttention
from jointrl.model.presets import PRESETS

# fp32 throughout; the forms agree to ~1e-6 on O(1) values, so 1e-5 leaves room without hiding a bug.
ATOL = RTOL = 1e-5


def reference_kda(q, k, v, g, beta, scale, state=None):
    """S_t = (I - b k k^T) Diag(exp g) S_{t-1} + b k v^T, o_t = S_t^T (scale q), one (row, head, step) at a time."""
    b, t, h, dk = q.shape
    dv = v.shape[-1]
    eye = torch.eye(dk)
    o_rows, s_rows = [], []
    for row in range(b):
        o_heads, s_heads = [], []
        for head in range(h):
            s = torch.zeros(dk, dv) if state is None else state[row, head]
            o_steps = []
            for i in range(t):
                kk, bb = k[row, i, head], beta[row, i, head]
                transition = (eye - bb * torch.outer(kk, kk)) @ torch.diag(g[row, i, head].exp())
                s = transition @ s + bb * torch.outer(kk, v[row, i, head])
                o_steps.append(s.T @ (scale * q[row, i, head]))
            o_heads.append(torch.stack(o_steps))  # [T, V]
            s_heads.append(s)
        o_rows.append(torch.stack(o_heads, dim=1))  # [T, H, V]
        s_rows.append(torch.stack(s_heads))  # [H, K, V]
    return torch.stack(o_rows), torch.stack(s_rows)


def make_inputs(b=2, t=63, h=2, dk=8, dv=8, log_decay=None, with_state=False):
    """Random op inputs in the layer's ranges: unit keys, beta in (0, 1), g <= 0."""
    q = torch.randn(b, t, h, dk)
    k = F.normalize(torch.randn(b, t, h, dk), dim=-1)
    v = torch.randn(b, t, h, dv)
    g = F.logsigmoid(torch.randn(b, t, h, dk)) if log_decay is None else log_decay(b, t, h, dk)
    beta = torch.rand(b, t, h)
    state = torch.randn(b, h, dk, dv) if with_state else None
    return q, k, v, g, beta, state


OP_CASES = {
    "T63-chunk16": dict(t=63, chunk=16),
    "T64-chunk4": dict(t=64, chunk=4),
    "T63-chunk64-one-partial-chunk": dict(t=63, chunk=64),
    "T10-chunk16-shorter-than-chunk": dict(t=10, chunk=16),
    "T1-chunk16": dict(t=1, chunk=16),
    "one-head-T40-chunk16": dict(t=40, chunk=16, h=1),
    "K8-V12-T30-chunk8": dict(t=30, chunk=8, dv=12),
    "initial-state-T63-chunk16": dict(t=63, chunk=16, with_state=True),
    "initial-state-T17-chunk64": dict(t=17, chunk=64, with_state=True),
}


@pytest.mark.parametrize("case", OP_CASES.values(), ids=OP_CASES.keys())
def test_both_forms_match_step_loop(case):
    case = dict(case)
    chunk = case.pop("chunk")
    q, k, v, g, beta, state = make_inputs(**case)
    scale = q.shape[-1] ** -0.5
    want_o, want_s = reference_kda(q, k, v, g, beta, scale, state)
    for o, s in (
        recurrent_kda(q, k, v, g, beta, scale, state, output_final_state=True),
        chunk_kda(q, k, v, g, beta, scale, state, output_final_state=True, chunk_size=chunk),
    ):
        torch.testing.assert_close(o, want_o, atol=ATOL, rtol=RTOL)
        torch.testing.assert_close(s, want_s, atol=ATOL, rtol=RTOL)
        assert s.dtype == torch.float32


@pytest.mark.parametrize("chunk", [4, 16, 64], ids=lambda c: f"chunk{c}")
def test_state_carries_across_calls(chunk):
    q, k, v, g, beta, _ = make_inputs(t=63)
    scale = 0.5
    want_o, want_s = reference_kda(q, k, v, g, beta, scale)
    first = [x[:, :30] for x in (q, k, v, g, beta)]
    second = [x[:, 30:] for x in (q, k, v, g, beta)]
    o1, s1 = chunk_kda(*first, scale, output_final_state=True, chunk_size=chunk)
    o2, s2 = chunk_kda(*second, scale, initial_state=s1, output_final_state=True, chunk_size=chunk)
    torch.testing.assert_close(torch.cat([o1, o2], dim=1), want_o, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(s2, want_s, atol=ATOL, rtol=RTOL)
    # Decode steps after a chunked prefill, as generation does.
    o1, s = chunk_kda(*first, scale, output_final_state=True, chunk_size=chunk)
    steps = []
    for i in range(30, 63):
        o_i, s = recurrent_kda(*[x[:, i : i + 1] for x in (q, k, v, g, beta)], scale, s, output_final_state=True)
        steps.append(o_i)
    torch.testing.assert_close(torch.cat([o1, *steps], dim=1), want_o, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(s, want_s, atol=ATOL, rtol=RTOL)


def test_final_state_only_on_request():
    q, k, v, g, beta, _ = make_inputs(t=5)
    assert chunk_kda(q, k, v, g, beta, 1.0, chunk_size=4)[1] is None
    assert recurrent_kda(q, k, v, g, beta, 1.0)[1] is None


def test_chunk_gradients_match_step_loop():
    q, k, v, g, beta, state = make_inputs(b=1, t=21, h=2, dk=4, dv=3, with_state=True)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g, beta, state)]
    w_o, w_s = torch.randn(1, 21, 2, 3), torch.randn(1, 2, 4, 3)

    def grads(fn):
        o, s = fn(*leaves)
        return torch.autograd.grad((o * w_o).sum() + (s * w_s).sum(), leaves)

    want = grads(lambda *a: reference_kda(*a[:5], 0.5, a[5]))
    got = grads(lambda *a: chunk_kda(*a[:5], 0.5, a[5], output_final_state=True, chunk_size=8))
    for name, x, y in zip(("q", "k", "v", "g", "beta", "initial_state"), got, want):
        torch.testing.assert_close(x, y, atol=1e-4, rtol=1e-4, msg=lambda m, name=name: f"d{name}: {m}")


def _strong(b, t, h, dk):
    # About -5 per step on half the channels (exp(-5 * 64) underflows fp32), mild on the rest so the
    # output still depends on the past.
    g = -5.0 + 0.5 * torch.randn(b, t, h, dk)
    g[..., dk // 2 :] = -0.05 * torch.rand(b, t, h, dk - dk // 2)
    return g.clamp(max=0.0)


@pytest.mark.parametrize("log_decay", [_strong, lambda *s: torch.full(s, -60.0)], ids=["g-about-5", "g-minus-60"])
def test_strong_decay_is_stable(log_decay):
    q, k, v, g, beta, state = make_inputs(b=1, t=128, h=1, log_decay=log_decay, with_state=True)
    want_o, want_s = reference_kda(q, k, v, g, beta, 0.5, state)
    g = g.requires_grad_()
    o, s = chunk_kda(q, k, v, g, beta, 0.5, state, output_final_state=True, chunk_size=64)
    torch.testing.assert_close(o, want_o, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(s, want_s, atol=ATOL, rtol=RTOL)
    (dg,) = torch.autograd.grad(o.sum() + s.sum(), g)
    assert torch.isfinite(dg).all()


def test_output_keeps_input_dtype_state_stays_fp32():
    q, k, v, g, beta, _ = make_inputs(b=1, t=6, h=1, dk=4, dv=4)
    o, s = chunk_kda(*(x.bfloat16() for x in (q, k, v, g, beta)), 1.0, output_final_state=True, chunk_size=4)
    assert o.dtype == torch.bfloat16 and s.dtype == torch.float32


def test_bad_shapes_and_backend_are_named(monkeypatch):
    q, k, v, g, beta, _ = make_inputs(b=1, t=6, h=2, dk=4, dv=4)
    with pytest.raises(ValueError, match="beta"):
        chunk_kda(q, k, v, g, beta[..., :1], 1.0)
    with pytest.raises(ValueError, match="initial_state"):
        recurrent_kda(q, k, v, g, beta, 1.0, initial_state=torch.zeros(1, 2, 4, 5))
    monkeypatch.setenv("JOINTRL_KERNELS", "cuda")
    with pytest.raises(ValueError, match="JOINTRL_KERNELS='cuda'"):
        chunk_kda(q, k, v, g, beta, 1.0)


# Layer tests. Larger init than the preset so every sub-path moves the output by more than the tolerance.
CFG = PRESETS["debug"].model_copy(update={"init_std": 0.1, "kda_chunk_size": 8})
B, T = 2, 37


def make_layer():
    layer = KDAttention(CFG, layer_idx=0)
    layer.o_norm.weight.data.uniform_(0.5, 1.5)
    return layer


def positions_for(b, t):
    return torch.arange(t).expand(b, t)


def reference_layer(layer, x):
    """The layer's forward from its parameters: explicit conv taps, the step loop, the gated norm."""
    h, dk = layer.heads, layer.head_dim
    taps = layer.q_conv1d.weight.shape[-1]
    branches = []
    for proj, conv in ((layer.q_proj, layer.q_conv1d), (layer.k_proj, layer.k_conv1d), (layer.v_proj, layer.v_conv1d)):
        pre = x @ proj.weight.T  # [B, T, H*K]
        out = torch.zeros_like(pre)
        for i in range(x.shape[1]):
            for tap in range(taps):
                src = i - (taps - 1) + tap
                if src >= 0:
                    out[:, i] += conv.weight[:, 0, tap] * pre[:, src]
        branches.append((out * torch.sigmoid(out)).reshape(*x.shape[:2], h, dk))
    q, k, v = branches
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    pre_g = (x @ layer.f_a_proj.weight.T @ layer.f_b_proj.weight.T + layer.dt_bias).reshape(*x.shape[:2], h, dk)
    g = -layer.A_log.exp()[:, None] * torch.log1p(torch.exp(pre_g))
    beta = torch.sigmoid(x @ layer.b_proj.weight.T)
    o, _ = reference_kda(q, k, v, g, beta, dk**-0.5)
    gate = (x @ layer.g_a_proj.weight.T @ layer.g_b_proj.weight.T).reshape(*x.shape[:2], h, dk)
    o = o / torch.sqrt((o * o).mean(-1, keepdim=True) + CFG.norm_eps) * layer.o_norm.weight * torch.sigmoid(gate)
    return o.reshape(*x.shape[:2], h * dk) @ layer.o_proj.weight.T


def test_layer_matches_reference():
    layer = make_layer()
    x = torch.randn(B, T, CFG.dim)
    y, aux = layer(x, positions_for(B, T), torch.ones(B, T, dtype=torch.bool))
    assert aux == {}
    torch.testing.assert_close(y, reference_layer(layer, x), atol=ATOL, rtol=RTOL)


SPLITS = {"token-by-token": [1] * T, "two-chunks": [20, 17], "prefill-decode-prefill": [3, 1, 20, 1, 12]}


@pytest.mark.parametrize("splits", SPLITS.values(), ids=SPLITS.keys())
def test_cached_calls_match_full_forward(splits):
    layer = make_layer()
    x = torch.randn(B, T, CFG.dim)
    pos, valid = positions_for(B, T), torch.ones(B, T, dtype=torch.bool)
    full, _ = layer(x, pos, valid)
    state = ModelCache.allocate(CFG, batch=B, capacity=T).layers[0]
    assert isinstance(state, KDAState)
    outs, start = [], 0
    for n in splits:
        y, _ = layer(x[:, start : start + n], pos[:, start : start + n], valid[:, start : start + n], cache=state)
        outs.append(y)
        start += n
    torch.testing.assert_close(torch.cat(outs, dim=1), full, atol=ATOL, rtol=RTOL)
    assert state.recurrent.shape == (B, CFG.kda_heads, CFG.kda_head_dim, CFG.kda_head_dim)
    assert state.conv.shape == (B, CFG.kda_conv_size - 1, 3 * CFG.kda_heads * CFG.kda_head_dim)


PAD, TOK = False, True
# (validity of row 0's columns, call lengths or None for one uncached forward). Row 1 is always unpadded.
PADDING = {
    "left-padding": ([PAD] * 5 + [TOK] * 24, None),
    "left-padding-prefill-then-decode": ([PAD] * 5 + [TOK] * 24, [12] + [1] * 17),
    "padding-mid-sequence": ([TOK] * 8 + [PAD] * 3 + [TOK] * 16, None),
    "ragged-chunk-and-padded-decode-steps": (
        [PAD] * 2 + [TOK] * 10 + [PAD] * 3 + [TOK] * 6 + [TOK, PAD, TOK, TOK, PAD, TOK],
        [12, 9, 1, 1, 1, 1, 1, 1],
    ),
}


@pytest.mark.parametrize("layout", PADDING.values(), ids=PADDING.keys())
def test_padding_does_not_change_real_tokens(layout):
    columns, calls = layout
    layer = make_layer()
    row0_valid = torch.tensor(columns)
    n, width = int(row0_valid.sum()), len(columns)
    real = torch.randn(1, n, CFG.dim)
    # Row 0 holds `real` at its valid columns and large junk at the padded ones.
    row0 = 100 * torch.randn(1, width, CFG.dim)
    row0[0, row0_valid] = real[0]
    row1 = torch.randn(1, width, CFG.dim)
    x = torch.cat([row0, row1])
    valid = torch.stack([row0_valid, torch.ones(width, dtype=torch.bool)])
    pos = positions_for(2, width)
    if calls is None:
        y, _ = layer(x, pos, valid)
    else:
        assert sum(calls) == width
        state = ModelCache.allocate(CFG, batch=2, capacity=width).layers[0]
        ys, start = [], 0
        for length in calls:
            cols = slice(start, start + length)
            ys.append(layer(x[:, cols], pos[:, cols], valid[:, cols], cache=state)[0])
            start += length
        y = torch.cat(ys, dim=1)
    alone, _ = layer(real, positions_for(1, n), torch.ones(1, n, dtype=torch.bool))
    row1_alone, _ = layer(row1, positions_for(1, width), torch.ones(1, width, dtype=torch.bool))
    torch.testing.assert_close(y[0, row0_valid], alone[0], atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(y[1], row1_alone[0], atol=ATOL, rtol=RTOL)
    assert torch.isfinite(y).all()


def test_decay_gate_is_nonpositive_and_finite():
    layer = make_layer()
    x = torch.cat([torch.randn(1, 16, CFG.dim), 1e3 * torch.randn(1, 16, CFG.dim)], dim=1)
    g = layer.decay_gate(x)
    assert g.shape == (1, 32, CFG.kda_heads, CFG.kda_head_dim)
    assert torch.isfinite(g).all() and (g <= 0).all()
    # With the low-rank path off, g is the per-channel bias alone: -exp(A_log)[h] * softplus(dt_bias).
    layer.f_b_proj.weight.data.zero_()
    got = layer.decay_gate(torch.randn(1, 1, CFG.dim))[0, 0]
    h, c = 1, 3
    want = -math.exp(layer.A_log[h].item()) * math.log1p(math.exp(layer.dt_bias[h * CFG.kda_head_dim + c].item()))
    assert got[h, c].item() == pytest.approx(want, rel=1e-5)


def test_init_ranges():
    layer = make_layer()
    assert ((layer.A_log.exp() >= 1) & (layer.A_log.exp() <= 16 + 1e-3)).all()
    dt = F.softplus(layer.dt_bias)
    assert ((dt >= 1e-3 * 0.999) & (dt <= 0.1 * 1.001)).all()
    with torch.device("meta"):
        meta = KDAttention(CFG, layer_idx=0)
    assert meta.A_log.is_meta


def test_backward_reaches_every_parameter():
    layer = make_layer()
    x = torch.randn(B, 20, CFG.dim, requires_grad=True)
    y, _ = layer(x, positions_for(B, 20), torch.ones(B, 20, dtype=torch.bool))
    (y * torch.randn_like(y)).sum().backward()
    for name, param in layer.named_parameters():
        assert param.grad is not None, name
        assert torch.isfinite(param.grad).all() and param.grad.abs().sum() > 0, name


def test_cache_batch_mismatch_is_named():
    layer = make_layer()
    state = ModelCache.allocate(CFG, batch=3, capacity=4).layers[0]
    with pytest.raises(ValueError, match="3 rows"):
        layer(torch.randn(2, 1, CFG.dim), positions_for(2, 1), torch.ones(2, 1, dtype=torch.bool), cache=state)
