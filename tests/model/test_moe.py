"""MoE FFN against dense einsum references, hand-built routings and hand-computed losses (dispatch ops: tests/kernels)."""
import pytest
import torch
import torch.nn.functional as F

from jointrl.model.moe import MoE, select_experts, sequence_balance_loss
from jointrl.model.presets import PRESETS

# fp32 on CPU; references are dense einsums over the same fp32 parameters.
ATOL, RTOL = 1e-5, 1e-5


def make_moe(**update) -> MoE:
    # A larger init than the default keeps outputs O(1), so the tolerances above mean something.
    cfg = PRESETS["debug"].model_copy(update={"init_std": 0.3, **update})
    return MoE(cfg, layer_idx=1)


def ref_scores(moe: MoE, flat: torch.Tensor) -> torch.Tensor:
    logits = flat @ moe.gate.weight.t()
    return logits.softmax(-1) if moe.cfg.router_scoring == "softmax" else logits.sigmoid()


def ref_output(moe: MoE, flat: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Every expert on every token, mixed by a dense [N, E] weight matrix that is zero off the chosen ids."""
    cfg = moe.cfg
    s = ref_scores(moe, flat)
    chosen = s.gather(1, ids)
    if cfg.norm_topk_prob:
        chosen = chosen / chosen.sum(-1, keepdim=True)
    dense_w = torch.zeros_like(s).scatter(1, ids, chosen * cfg.route_scale)  # [N, E]
    ex = moe.experts
    h = F.silu(torch.einsum("nd,efd->nef", flat, ex.gate_proj)) * torch.einsum("nd,efd->nef", flat, ex.up_proj)
    every = torch.einsum("nef,edf->ned", h, ex.down_proj)  # [N, E, D]
    y = torch.einsum("ne,ned->nd", dense_w, every)
    if moe.shared_experts is not None:
        sh = moe.shared_experts
        y = y + (F.silu(flat @ sh.gate_proj.weight.t()) * (flat @ sh.up_proj.weight.t())) @ sh.down_proj.weight.t()
    return y


@pytest.mark.parametrize(
    "update",
    [
        {},
        {"router_scoring": "softmax"},
        {"norm_topk_prob": False, "route_scale": 2.5},
        {"router_scoring": "softmax", "norm_topk_prob": False, "n_shared": 0},
        {"n_shared": 2, "n_active": 3, "route_scale": 1.7},
    ],
    ids=["sigmoid", "softmax", "unnormalised-scaled", "softmax-raw-no-shared", "two-shared-top3"],
)
def test_dispatch_matches_dense_reference(update):
    moe = make_moe(**update)
    with torch.no_grad():
        moe.gate.e_score_correction_bias.normal_(0.0, 0.3)
    x = torch.randn(3, 11, moe.cfg.dim)
    y, aux = moe(x)
    flat = x.reshape(-1, moe.cfg.dim)
    ids = aux["expert_ids"].reshape(-1, moe.cfg.n_active)
    torch.testing.assert_close(y.reshape(-1, moe.cfg.dim), ref_output(moe, flat, ids), atol=ATOL, rtol=RTOL)

    # The ids are the k best of s + bias, found here by a full sort.
    biased = ref_scores(moe, flat) + moe.gate.e_score_correction_bias
    best = biased.argsort(-1, descending=True)[:, : moe.cfg.n_active]
    assert torch.equal(ids.sort(-1).values, best.sort(-1).values)
    unbiased_best = ref_scores(moe, flat).argsort(-1, descending=True)[:, : moe.cfg.n_active]
    assert not torch.equal(best.sort(-1).values, unbiased_best.sort(-1).values), "bias should matter here"


def test_bias_changes_selection_not_weight_formula():
    moe = make_moe(route_scale=1.0)
    x = torch.randn(2, 9, moe.cfg.dim)
    flat = x.reshape(-1, moe.cfg.dim)
    with torch.no_grad():
        moe.gate.e_score_correction_bias[5] = 10.0
    y, aux = moe(x)
    ids = aux["expert_ids"].reshape(-1, moe.cfg.n_active)
    assert (ids == 5).any(-1).all(), "a +10 bias must put expert 5 in every token's top-k"
    # Weights come from the unbiased s: expert 5's weight is s_5 / (s_5 + s_other), not near 1.
    torch.testing.assert_close(y.reshape(-1, moe.cfg.dim), ref_output(moe, flat, ids), atol=ATOL, rtol=RTOL)


def test_routing_replay_reproduces_and_keeps_router_gradient():
    moe = make_moe()
    x = torch.randn(2, 13, moe.cfg.dim)
    y, aux = moe(x)
    y_replay, aux_replay = moe(x, routing=aux["expert_ids"])
    assert torch.equal(y, y_replay)
    assert torch.equal(aux["expert_ids"], aux_replay["expert_ids"])

    # After an update the router would choose differently; replay keeps the old ids, weights follow the router.
    with torch.no_grad():
        moe.gate.weight.add_(torch.randn_like(moe.gate.weight))
    _, fresh = moe(x)
    assert not torch.equal(fresh["expert_ids"], aux["expert_ids"])
    y_replay, aux_replay = moe(x, routing=aux["expert_ids"])
    assert torch.equal(aux_replay["expert_ids"], aux["expert_ids"])
    flat = x.reshape(-1, moe.cfg.dim)
    ids = aux["expert_ids"].reshape(-1, moe.cfg.n_active)
    ref = ref_output(moe, flat, ids)
    torch.testing.assert_close(y_replay.reshape(-1, moe.cfg.dim), ref, atol=ATOL, rtol=RTOL)

    # The router gradient under replay equals the dense reference's gradient.
    (y_replay**2).sum().backward()
    got = moe.gate.weight.grad.clone()
    moe.zero_grad()
    (ref**2).sum().backward()
    assert got.abs().sum() > 0
    torch.testing.assert_close(got, moe.gate.weight.grad, atol=1e-4, rtol=1e-4)


def test_routing_replay_arbitrary_ids_and_padded_garbage():
    moe = make_moe()
    x = torch.randn(2, 5, moe.cfg.dim)
    valid = torch.tensor([[True] * 5, [True, True, True, False, False]])
    routing = torch.tensor([0, 7]).repeat(2, 5, 1)  # [B, T, k], not what the router would pick
    routing[1, 3:] = -1  # padding marker at padded positions is allowed
    y, aux = moe(x, valid=valid, routing=routing)
    assert torch.equal(aux["expert_ids"][valid], routing[valid])
    assert ((aux["expert_ids"] >= 0) & (aux["expert_ids"] < moe.cfg.n_experts)).all()
    flat = x.reshape(-1, moe.cfg.dim)
    ref = ref_output(moe, flat, aux["expert_ids"].reshape(-1, moe.cfg.n_active))
    torch.testing.assert_close(y.reshape(-1, moe.cfg.dim), ref, atol=ATOL, rtol=RTOL)
    assert torch.equal(aux["expert_load"], torch.tensor([8.0, 0, 0, 0, 0, 0, 0, 8.0]))


def test_group_limited_routing_hand_built_scores():
    # 4 groups of 2. Group sums of the top two: 0.9, 0.98, 1.05, 0.2 -> keep groups 2 and 1.
    scores = torch.tensor([[0.9, 0.0, 0.5, 0.48, 0.6, 0.45, 0.1, 0.1]])
    zero = torch.zeros(8)
    ids = select_experts(scores, zero, k=2, n_groups=4, topk_groups=2)
    assert sorted(ids[0].tolist()) == [2, 4]  # expert 0 has the best score but sits in a dropped group
    assert sorted(select_experts(scores, zero, k=2)[0].tolist()) == [0, 4]
    # The bias counts in group scores too: lifting expert 1 makes group 0 (sum 1.4) the best group.
    bias = torch.zeros(8)
    bias[1] = 0.5
    ids = select_experts(scores, bias, k=2, n_groups=4, topk_groups=1)
    assert sorted(ids[0].tolist()) == [0, 1]
    # Negative biased scores must still beat the masked experts.
    ids = select_experts(scores, torch.full((8,), -5.0), k=3, n_groups=4, topk_groups=2)
    assert sorted(ids[0].tolist()) == [2, 3, 4]


def test_group_limited_routing_property_through_layer():
    moe = make_moe(n_groups=4, topk_groups=2, n_active=3)
    with torch.no_grad():
        moe.gate.e_score_correction_bias.normal_(0.0, 0.2)
    x = torch.randn(4, 16, moe.cfg.dim)
    _, aux = moe(x)
    flat = x.reshape(-1, moe.cfg.dim)
    biased = ref_scores(moe, flat) + moe.gate.e_score_correction_bias
    ids = aux["expert_ids"].reshape(-1, 3)
    size = moe.cfg.n_experts // 4
    for n in range(flat.shape[0]):
        group_score = [sorted(biased[n, g * size : (g + 1) * size].tolist())[-2:] for g in range(4)]
        allowed = sorted(range(4), key=lambda g: -sum(group_score[g]))[:2]
        candidates = [e for e in range(moe.cfg.n_experts) if e // size in allowed]
        best = sorted(candidates, key=lambda e: -biased[n, e].item())[:3]
        assert sorted(ids[n].tolist()) == sorted(best)


def test_zero_token_expert():
    moe = make_moe()
    with torch.no_grad():
        moe.gate.e_score_correction_bias[3] = -100.0
    x = torch.randn(2, 8, moe.cfg.dim)
    y, aux = moe(x)
    assert aux["expert_load"][3] == 0
    flat = x.reshape(-1, moe.cfg.dim)
    ref = ref_output(moe, flat, aux["expert_ids"].reshape(-1, moe.cfg.n_active))
    torch.testing.assert_close(y.reshape(-1, moe.cfg.dim), ref, atol=ATOL, rtol=RTOL)
    y.sum().backward()
    for weight in (moe.experts.gate_proj, moe.experts.up_proj, moe.experts.down_proj):
        assert torch.equal(weight.grad[3], torch.zeros_like(weight.grad[3]))
        assert weight.grad.abs().sum() > 0


def test_update_router_bias_formula():
    moe = make_moe(router_bias_rate=0.25)
    moe.update_router_bias(torch.tensor([3.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]))  # mean 2
    expected = torch.tensor([-0.25, 0.25, 0, 0, 0, 0, 0, 0])
    assert torch.equal(moe.gate.e_score_correction_bias, expected)
    with pytest.raises(ValueError, match="load has shape"):
        moe.update_router_bias(torch.ones(7))


def test_bias_updates_balance_a_skewed_router():
    moe = make_moe(router_bias_rate=0.01)
    d = moe.cfg.dim
    u = torch.zeros(d)
    u[0] = 1.0
    # Every token shares a direction that experts 0 and 1 align with: they win nearly every top-2.
    x = torch.randn(4, 64, d) + 2.0 * u
    with torch.no_grad():
        moe.gate.weight.mul_(0.3)
        moe.gate.weight[:2] += 2.0 * u

    def cv(load):
        return (load.std(unbiased=False) / load.mean()).item()

    with torch.no_grad():
        history = []
        for _ in range(200):
            _, aux = moe(x)
            history.append(cv(aux["expert_load"]))
            moe.update_router_bias(aux["expert_load"])
    # Sign steps on a fixed batch end in a small limit cycle, so average its last steps.
    start, end = history[0], sum(history[-20:]) / 20
    assert start > 1.4, f"the batch should start skewed (cv {start:.2f})"
    assert end < start / 6, f"cv {start:.2f} -> {end:.2f}: the bias did not balance the load"


def test_sequence_balance_loss_hand_computed():
    # Row 0: tokens 0, 1 valid (scores normalise to [.5,.25,.25] and [.2,.6,.2]), token 2 padded.
    #   f = 3 / (1 * 2) * [1, 1, 0] = [1.5, 1.5, 0]; P = [.35, .425, .225]; sum f*P = 1.1625.
    # Row 1: token 0 valid (scores -> [.25,.25,.5]), picks expert 2: f = [0, 0, 3], P = s' -> 1.5.
    # Row 2: nothing valid, left out of the mean. Loss = (1.1625 + 1.5) / 2 = 1.33125.
    scores = torch.tensor(
        [
            [[1.0, 0.5, 0.5], [0.1, 0.3, 0.1], [9.0, 9.0, 9.0]],
            [[1.0, 1.0, 2.0], [5.0, 1.0, 1.0], [1.0, 1.0, 1.0]],
            [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]],
        ]
    )
    ids = torch.tensor([[[0], [1], [2]], [[2], [0], [0]], [[0], [1], [2]]])
    valid = torch.tensor([[True, True, False], [True, False, False], [False, False, False]])
    loss = sequence_balance_loss(scores, ids, valid)
    assert abs(loss.item() - 1.33125) < 1e-6


def test_balance_loss_in_layer_and_padding_excluded():
    coef = 0.1
    moe = make_moe(seq_aux_loss_coef=coef)
    x = torch.randn(2, 6, moe.cfg.dim)
    valid = torch.tensor([[True] * 6, [True, True, True, True, False, False]])
    y, aux = moe(x, valid=valid)
    assert torch.isfinite(y).all()

    # Reference by loops over valid tokens only.
    flat_ids = aux["expert_ids"]
    s = ref_scores(moe, x.reshape(-1, moe.cfg.dim)).view(2, 6, -1)
    e, k = moe.cfg.n_experts, moe.cfg.n_active
    load = torch.zeros(e)
    per_row = []
    for b in range(2):
        tokens = [t for t in range(6) if valid[b, t]]
        picks = torch.zeros(e)
        prob = torch.zeros(e)
        for t in tokens:
            for j in flat_ids[b, t].tolist():
                picks[j] += 1
            prob += s[b, t] / s[b, t].sum()
        load += picks
        per_row.append((picks * e / (k * len(tokens)) * prob / len(tokens)).sum())
    torch.testing.assert_close(aux["expert_load"], load, atol=0, rtol=0)
    torch.testing.assert_close(aux["balance_loss"], coef * sum(per_row) / 2, atol=1e-6, rtol=1e-5)

    # Whatever sits at padded positions changes neither load nor loss.
    x2 = x.clone()
    x2[1, 4:] = 50.0 * torch.randn(2, moe.cfg.dim)
    y2, aux2 = moe(x2, valid=valid)
    assert torch.isfinite(y2).all()
    assert torch.equal(aux2["expert_load"], aux["expert_load"])
    torch.testing.assert_close(aux2["balance_loss"], aux["balance_loss"], atol=1e-7, rtol=1e-6)
    # Padded tokens still join their experts' grouped matmuls, whose shapes (and so the BLAS blocking, and the
    # last bits of a sum) depend on them; the valid outputs agree to rounding, not bit for bit on every CPU.
    torch.testing.assert_close(y2[valid], y[valid], atol=1e-5, rtol=1e-4)

    _, aux_off = make_moe(seq_aux_loss_coef=0.0)(x, valid=valid)
    assert aux_off["balance_loss"].item() == 0.0


def test_gradients_reach_every_parameter_and_not_the_bias():
    moe = make_moe(seq_aux_loss_coef=0.01)
    x = torch.randn(4, 16, moe.cfg.dim)
    y, aux = moe(x)
    assert (aux["expert_load"] > 0).all(), "every expert should get tokens with this seed"
    (y.square().mean() + aux["balance_loss"]).backward()
    for name, p in moe.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name
    bias = moe.gate.e_score_correction_bias
    assert "gate.e_score_correction_bias" not in dict(moe.named_parameters())
    assert not bias.requires_grad and bias.grad is None
    assert "gate.e_score_correction_bias" in moe.state_dict()


def test_bias_stays_fp32_under_a_cast():
    moe = make_moe()
    with torch.no_grad():
        moe.gate.e_score_correction_bias.fill_(1e-3 + 1e-6)
    moe = moe.to(torch.bfloat16)
    assert moe.gate.weight.dtype == torch.bfloat16
    assert moe.gate.e_score_correction_bias.dtype == torch.float32
    assert moe.gate.e_score_correction_bias[0].item() == pytest.approx(1e-3 + 1e-6, rel=1e-6)
    y, _ = moe(torch.randn(1, 3, moe.cfg.dim, dtype=torch.bfloat16))
    assert y.dtype == torch.bfloat16 and torch.isfinite(y).all()


def test_bad_inputs_raise():
    moe = make_moe()
    x = torch.randn(2, 3, moe.cfg.dim)
    with pytest.raises(ValueError, match="routing has shape"):
        moe(x, routing=torch.zeros(2, 3, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="outside"):
        moe(x, routing=torch.full((2, 3, 2), 8))
    with pytest.raises(ValueError, match="integer"):
        moe(x, routing=torch.zeros(2, 3, 2))
    with pytest.raises(ValueError, match="valid has shape"):
        moe(x, valid=torch.ones(3, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="dense layer"):
        MoE(PRESETS["debug"], layer_idx=0)
    with pytest.raises(ValueError, match="cannot hold n_active"):
        make_moe(n_groups=8, topk_groups=1)
