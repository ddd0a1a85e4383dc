"""The learner's forward and loss plumbing: per-sequence references, fused vs full logits, hand-computed GAE
inputs, and the invariance of the step loss (and its gradients) to how the step is cut into micro-batches."""
import math
from dataclasses import replace

import pytest
import torch

from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer
from jointrl.rl.algorithms.table import ALGORITHMS
from jointrl.rl.config.training import AlgorithmConfig
from jointrl.rl.learner.critic import PolicyWithValue, ValueHead
from jointrl.rl.learner.batch import SequenceSample, pack, totals
from jointrl.rl.learner.forward import (
    ForwardOut,
    build_loss_inputs,
    combine_metrics,
    critic_targets,
    detached,
    forward_micro_batch,
    micro_batch_loss,
    token_rewards,
)

PAD = 0


def build_policy(critic: bool = False) -> PolicyWithValue:
    torch.manual_seed(0)
    model = Transformer(PRESETS["debug"].model_copy(update={"index_topk": 4, "init_std": 0.05}))
    return PolicyWithValue.build(model, critic=critic)


def random_samples(lengths: list[int], seed: int) -> list[SequenceSample]:
    g = torch.Generator().manual_seed(seed)
    samples = []
    for i, n in enumerate(lengths):
        mask = (torch.rand(n, generator=g) < 0.7).float()
        samples.append(SequenceSample(
            tokens=torch.randint(8, 512, (n,), generator=g),
            loss_mask=mask,
            behavior_logprobs=(-3.0 - torch.rand(n, generator=g)) * mask,
            policy_version=torch.zeros(n, dtype=torch.long),
            advantage=float(torch.randn((), generator=g)),
            reward=float(torch.rand((), generator=g)),
            routed_experts=None,
            sparse_topk=None,
            index=i,
        ))
    return samples


def param_grads(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None}


def test_fused_and_full_logprobs_match_a_per_sequence_reference():
    policy = build_policy()
    samples = random_samples([9, 17, 4, 12], seed=1)
    (mb,) = pack(samples, 10_000, PAD)
    with torch.no_grad():
        fused = forward_micro_batch(policy, mb, temperature=0.7, replay="off", need_entropy=True)
        full = forward_micro_batch(policy, mb, temperature=0.7, replay="off", need_entropy=True, fused=False)
    torch.testing.assert_close(fused.logprobs, full.logprobs, atol=1e-5, rtol=0)
    torch.testing.assert_close(fused.entropy, full.entropy, atol=1e-5, rtol=0)
    for r, i in enumerate(mb.index.tolist()):
        tokens = samples[i].tokens
        n = tokens.shape[0] - 1
        scored = samples[i].loss_mask[1:] != 0  # [n]: position t predicts token t + 1
        with torch.no_grad():
            logits = policy.policy(tokens[None, :-1]).logits[0] / 0.7  # [n, V], the row alone, unpadded
        logp = torch.log_softmax(logits, dim=-1)
        expected = logp.gather(1, tokens[1:, None]).squeeze(1)
        entropy = -(logp.exp() * logp).sum(-1)
        # Scored at the loss mask's positions only; prompt positions and padding read 0.
        torch.testing.assert_close(fused.logprobs[r, :n][scored], expected[scored], atol=1e-5, rtol=0)
        torch.testing.assert_close(fused.entropy[r, :n][scored], entropy[scored], atol=1e-5, rtol=0)
        assert 0 < scored.sum() < n and (fused.logprobs[r, :n][~scored] == 0).all()
        assert (fused.logprobs[r, n:] == 0).all() and (fused.entropy[r, n:] == 0).all()
    assert fused.values is None and fused.expert_load.shape == (3, policy.policy.cfg.n_experts)
    # Each MoE layer routes every valid position to n_active experts; padding does not count.
    assert (fused.expert_load.sum(-1) == mb.valid.sum() * policy.policy.cfg.n_active).all()


def test_fused_and_full_give_the_same_gradients():
    policy = build_policy(critic=True)
    with torch.no_grad():
        policy.value_head.proj.weight.normal_(0.0, 0.1)
    (mb,) = pack(random_samples([11, 6, 15], seed=2), 10_000, PAD)
    g = torch.Generator().manual_seed(3)
    w_logp, w_ent, w_val = (torch.randn(mb.inputs.shape, generator=g) for _ in range(3))
    grads = []
    for fused in (True, False):
        policy.zero_grad(set_to_none=True)
        out = forward_micro_batch(policy, mb, temperature=1.3, replay="off", need_entropy=True, fused=fused)
        loss = (w_logp * out.logprobs).sum() + (w_ent * out.entropy).sum() + (w_val * out.values).sum() + out.aux_loss
        loss.backward()
        grads.append(param_grads(policy))
    assert grads[0].keys() == grads[1].keys() and "policy.lm_head.weight" in grads[0]
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], atol=1e-5, rtol=1e-4, msg=name)


def test_a_micro_batch_without_loss_tokens_scores_nothing_and_backpropagates():
    # Rows whose loss mask is empty (an overlong episode filtered out) can fill a whole micro-batch.
    policy = build_policy()
    samples = random_samples([9, 6], seed=6)
    for sample in samples:
        sample.loss_mask = torch.zeros_like(sample.loss_mask)
        sample.behavior_logprobs = torch.zeros_like(sample.behavior_logprobs)
    (mb,) = pack(samples, 10_000, PAD)
    out = forward_micro_batch(policy, mb, temperature=1.0, replay="off", need_entropy=True)
    assert (out.logprobs == 0).all() and (out.entropy == 0).all()
    (out.logprobs.sum() + out.aux_loss).backward()
    grad = policy.policy.lm_head.weight.grad
    assert grad is None or (grad == 0).all()


def test_temperature_zero_scores_like_one():
    policy = build_policy()
    (mb,) = pack(random_samples([8, 5], seed=4), 10_000, PAD)
    with torch.no_grad():
        zero = forward_micro_batch(policy, mb, temperature=0.0, replay="off")
        one = forward_micro_batch(policy, mb, temperature=1.0, replay="off")
        hot = forward_micro_batch(policy, mb, temperature=2.0, replay="off")
    assert torch.equal(zero.logprobs, one.logprobs) and not torch.equal(one.logprobs, hot.logprobs)
    assert zero.entropy is None


def test_value_head_starts_at_zero_and_workers_get_plain_policy_weights():
    policy = build_policy(critic=True)
    (mb,) = pack(random_samples([7, 3], seed=5), 10_000, PAD)
    with torch.no_grad():
        out = forward_micro_batch(policy, mb, temperature=1.0, replay="off")
    assert out.values.dtype == torch.float32 and (out.values == 0).all()
    assert ValueHead(8)(torch.randn(2, 3, 8, dtype=torch.bfloat16)).dtype == torch.float32
    with pytest.raises(ValueError, match="dim=0"):
        ValueHead(0)

    state = policy.policy_state_dict()
    assert not any(key.startswith(("policy.", "value_head")) for key in state)
    assert any(key.startswith("value_head.") for key in policy.state_dict())
    torch.manual_seed(123)
    worker = Transformer(policy.policy.cfg)
    worker.load_state_dict(state, strict=True)
    tokens = mb.inputs[:1]
    with torch.no_grad():
        torch.testing.assert_close(worker(tokens).logits, policy.policy(tokens).logits, atol=0, rtol=0)


def hand_sample(mask: list[float], reward: float, index: int) -> SequenceSample:
    n = len(mask)
    return SequenceSample(
        tokens=torch.arange(20, 20 + n), loss_mask=torch.tensor(mask), behavior_logprobs=torch.zeros(n),
        policy_version=torch.zeros(n, dtype=torch.long), advantage=0.5 * (index + 1), reward=reward,
        routed_experts=None, sparse_topk=None, index=index,
    )


def fake_out(logprobs: torch.Tensor, values: torch.Tensor | None) -> ForwardOut:
    return ForwardOut(
        logprobs=logprobs, entropy=None, values=values, routing=None, sparse_topk=None, expert_load=None,
        aux_loss=torch.zeros(()),
    )


def test_ppo_inputs_by_hand():
    samples = [
        hand_sample([0, 0, 1, 1, 0, 1], 2.0, 0), hand_sample([0, 0, 0, 0], 5.0, 1), hand_sample([0, 1, 1], -1.0, 2)
    ]
    (mb,) = pack(samples, 10_000, PAD)
    assert mb.index.tolist() == [0, 1, 2]
    # Rewards sit on each row's last trained position (mask[1:]); the filtered row gets none.
    expected_rewards = torch.tensor([[0, 0, 0, 0, 2.0], [0, 0, 0, 0, 0], [0, -1.0, 0, 0, 0]])
    assert torch.equal(token_rewards(mb), expected_rewards)

    old_values = torch.tensor([[0.3, 0.1, -0.2, 0.4, 0.7], [1.0, 1.0, 1.0, 0.0, 0.0], [0.5, -0.5, 0.0, 0.0, 0.0]])
    logprobs = torch.randn(3, 5, requires_grad=True)
    values = torch.randn(3, 5, requires_grad=True)
    cfg = AlgorithmConfig(name="ppo", gamma=1.0, gae_lambda=1.0)
    (targets,) = critic_targets(cfg, [mb], [old_values])
    x = build_loss_inputs(cfg, mb, fake_out(logprobs, values), fake_out(logprobs + 0.1, old_values), None, targets)
    # gamma = lambda = 1: the return of every step is the episode reward, the raw advantage is return - value.
    on = mb.mask > 0
    assert torch.equal(x.returns, torch.where(on, torch.tensor([[2.0], [0.0], [-1.0]]), 0.0))
    raw = [2.0 - 0.1, 2.0 - (-0.2), 2.0 - 0.7, -1.0 - 0.5, -1.0 - (-0.5)]
    mean = sum(raw) / len(raw)
    std = math.sqrt(sum((a - mean) ** 2 for a in raw) / len(raw))
    torch.testing.assert_close(x.advantages[on], torch.tensor([(a - mean) / std for a in raw]), atol=1e-6, rtol=0)
    assert (x.advantages[~on] == 0).all()
    assert x.values is values and torch.equal(x.old_values, old_values) and not x.old_logprobs.requires_grad
    torch.testing.assert_close(x.old_logprobs, (logprobs + 0.1).detach())

    grpo = build_loss_inputs(AlgorithmConfig(name="grpo"), mb, fake_out(logprobs, None), fake_out(logprobs, None), None)
    assert torch.equal(grpo.advantages, mb.advantages) and grpo.values is None
    with pytest.raises(ValueError, match="needs a critic"):
        build_loss_inputs(cfg, mb, fake_out(logprobs, None), fake_out(logprobs, None), None, targets)
    with pytest.raises(ValueError, match="needs the step's critic targets"):
        build_loss_inputs(cfg, mb, fake_out(logprobs, values), fake_out(logprobs, old_values), None)


def test_a_sequence_packed_alone_keeps_its_reward_sign():
    # A fresh critic (values 0) and gamma = lambda = 1: every token's raw advantage is its episode's reward.
    samples = [hand_sample([0, 1, 1, 1], 1.0, 0), hand_sample([0, 1, 1, 1], -1.0, 1)]
    cfg = AlgorithmConfig(name="ppo", gamma=1.0, gae_lambda=1.0)
    alone = pack(samples, 4, PAD)  # one sequence per micro-batch
    assert len(alone) == 2
    targets = critic_targets(cfg, alone, [torch.zeros_like(mb.mask) for mb in alone])
    # Over the step: 3 tokens at +1 and 3 at -1, mean 0 and std 1, so the advantages stay +1 and -1
    # (whitening each micro-batch alone would make every one of them 0).
    for mb, target, sign in zip(alone, targets, (1.0, -1.0)):
        on = mb.mask > 0
        torch.testing.assert_close(target.advantages[on], torch.full((3,), sign), atol=1e-6, rtol=0)
        torch.testing.assert_close(target.returns[on], torch.full((3,), sign))
    # A filler copy is not counted: the step's statistics stay those of the two real sequences.
    with_filler = critic_targets(cfg, alone + alone[:1], [torch.zeros_like(mb.mask) for mb in alone + alone[:1]],
                                 counted=[True, True, False])
    for a, b in zip(targets, with_filler):
        torch.testing.assert_close(a.advantages, b.advantages)


def old_pass(mb, current: ForwardOut) -> tuple[ForwardOut, torch.Tensor]:
    """A stand-in old policy and reference that depend only on (token, position), so on the sample, not the packing."""
    position = torch.arange(mb.inputs.shape[1], dtype=torch.float32)
    shift = 0.3 * torch.sin(1.7 * mb.targets.float() + position)
    old = replace(detached(current), logprobs=torch.where(mb.valid, current.logprobs.detach() + shift, 0.0))
    ref = torch.where(mb.valid, current.logprobs.detach() - 0.2 * torch.cos(mb.targets.float()), 0.0)
    return old, ref


def step_loss(policy, cfg, batches, step_totals):
    """Backward over the micro-batches; (summed loss, combined metrics, gradients)."""
    policy.zero_grad(set_to_none=True)
    targets = None
    if policy.value_head is not None:
        # The critic's old values come from a pass over the whole step before any loss, as on a learner rank.
        with torch.no_grad():
            olds = [forward_micro_batch(policy, mb, temperature=1.0, replay="off").values for mb in batches]
        targets = critic_targets(cfg, batches, olds)
    total, parts = 0.0, []
    for i, mb in enumerate(batches):
        current = forward_micro_batch(policy, mb, temperature=1.0, replay="off", need_entropy=True)
        old, ref = old_pass(mb, current)
        loss, metrics = micro_batch_loss(cfg, mb, current, old, ref, step_totals, targets[i] if targets else None)
        loss.backward()
        total += float(loss.detach())
        parts.append(metrics)
    return total, combine_metrics(parts), param_grads(policy)


@pytest.mark.parametrize("loss_agg", ["token", "sequence", None])
@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_step_loss_and_gradients_do_not_depend_on_the_packing(algorithm, loss_agg):
    critic = ALGORITHMS[algorithm].critic
    policy = build_policy(critic=critic)
    if critic:
        # A critic that is not yet 0, so GAE's advantages differ per token and whitening has work to do.
        torch.nn.init.normal_(policy.value_head.proj.weight, std=0.3)
    cfg = AlgorithmConfig(name=algorithm, loss_agg=loss_agg, kl_coef=0.05, entropy_coef=0.01, tis_cap=1.5)
    samples = random_samples([14, 5, 9, 12, 3, 7], seed=6)
    step_totals = totals(samples, token_budget=16)
    whole = pack(samples, 10_000, PAD)
    split = pack(samples, 30, PAD)
    assert len(whole) == 1 and len(split) >= 3
    loss_1, metrics_1, grads_1 = step_loss(policy, cfg, whole, step_totals)
    loss_n, metrics_n, grads_n = step_loss(policy, cfg, split, step_totals)
    assert metrics_1["learner/aux_loss"] > 0, "the indexer loss is part of the step loss"
    assert metrics_1["policy/clip_frac"] > 0, "the stand-in old policy is far enough to clip"
    assert loss_1 == pytest.approx(loss_n, abs=1e-6)
    assert metrics_1.keys() == metrics_n.keys()
    for key in metrics_1:
        assert metrics_1[key] == pytest.approx(metrics_n[key], abs=1e-6), key
    assert grads_1.keys() == grads_n.keys()
    for name in grads_1:
        torch.testing.assert_close(grads_1[name], grads_n[name], atol=1e-6, rtol=1e-4, msg=name)


def test_ppo_trains_the_value_head_and_the_policy():
    policy = build_policy(critic=True)
    cfg = AlgorithmConfig(name="ppo")
    samples = random_samples([10, 6, 8], seed=7)
    step_totals = totals(samples)
    losses = []
    policy.zero_grad(set_to_none=True)
    batches = pack(samples, 20, PAD)
    with torch.no_grad():
        olds = [forward_micro_batch(policy, mb, temperature=1.0, replay="off").values for mb in batches]
    for mb, targets in zip(batches, critic_targets(cfg, batches, olds)):
        current = forward_micro_batch(policy, mb, temperature=1.0, replay="off")
        loss, metrics = micro_batch_loss(cfg, mb, current, detached(current), None, step_totals, targets)
        loss.backward()
        losses.append(float(loss.detach()))
        assert metrics["loss/value"] > 0, "fresh values are 0 and the rewards are not"
    assert all(math.isfinite(x) for x in losses) and len(losses) >= 2
    head = policy.value_head.proj
    assert head.weight.grad.abs().sum() > 0 and head.bias.grad.abs().sum() > 0
    assert policy.policy.lm_head.weight.grad.abs().sum() > 0


def test_detached_and_combine_metrics():
    x = torch.randn(2, 3, requires_grad=True)
    out = replace(fake_out(x * 2, x * 3), aux_loss=x.sum())
    cut = detached(out)
    assert not any(t.requires_grad for t in (cut.logprobs, cut.values, cut.aux_loss)) and cut.entropy is None
    assert torch.equal(cut.logprobs, out.logprobs) and out.logprobs.requires_grad
    parts = [{"a": 1.0, "ratio_max": 2.0}, {"a": 3.0, "ratio_max": 1.5, "b": -1.0}]
    assert combine_metrics(parts) == {"a": 4.0, "ratio_max": 2.0, "b": -1.0}
    assert combine_metrics([]) == {}


def test_shared_openings_score_and_train_like_the_full_forward():
    policy = build_policy()
    g = torch.Generator().manual_seed(4)
    openings = [torch.randint(8, 512, (n,), generator=g) for n in (40, 33)]
    samples = random_samples([12, 20, 7, 15, 9], seed=5)
    for s, opening in zip(samples, [openings[0], openings[1], openings[0], None, openings[1]]):
        if opening is not None:  # a prompt shared with other rows, never scored
            s.tokens = torch.cat([opening, s.tokens])
            s.loss_mask = torch.cat([torch.zeros(len(opening) + 1), s.loss_mask[1:]])  # first scored after it
            s.behavior_logprobs = torch.cat([torch.zeros(len(opening)), s.behavior_logprobs])
            s.policy_version = torch.zeros(len(s.tokens), dtype=torch.long)
    (mb,) = pack(samples, 10_000, PAD)
    with torch.no_grad():  # what a rollout would have recorded, to replay under r3
        recorded = forward_micro_batch(policy, mb, temperature=1.0, replay="off")
    mb = replace(mb, routing=recorded.routing, sparse_topk=recorded.sparse_topk)
    outs, grads = [], []
    for share in (False, True):
        policy.zero_grad(set_to_none=True)
        out = forward_micro_batch(policy, mb, temperature=0.9, replay="r3", need_entropy=True, share_openings=share)
        ((out.logprobs * mb.advantages).sum() + out.entropy.sum()).backward()
        outs.append(out)
        grads.append(param_grads(policy))
    torch.testing.assert_close(outs[1].logprobs, outs[0].logprobs, atol=1e-5, rtol=0)
    torch.testing.assert_close(outs[1].entropy, outs[0].entropy, atol=1e-5, rtol=0)
    # Replayed selections come back as they went in, in the rows' frame.
    assert torch.equal(outs[1].sparse_topk[mb.valid], mb.sparse_topk[mb.valid])
    assert torch.equal(outs[1].routing[mb.valid], mb.routing[mb.valid])
    # Each opening is routed once for its two rows: 40 + 33 positions fewer than the full forward routes.
    saved = (40 + 33) * policy.policy.cfg.n_active
    assert (outs[1].expert_load.sum(-1) == outs[0].expert_load.sum(-1) - saved).all()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-5, rtol=1e-4, msg=name)
    with pytest.raises(ValueError, match="value head"):
        forward_micro_batch(build_policy(critic=True), mb, temperature=1.0, replay="r3", share_openings=True)
