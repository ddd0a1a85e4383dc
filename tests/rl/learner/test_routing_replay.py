"""Routing replay on a real rollout: the learner reproduces the sampler's log-probs once selection state has moved.

The rollout is the continuous-batching engine (cached, chunked, multi-turn), recording the experts and DSA
slots of every fed token; the learner is one padded full forward. Moving the router biases and the
lightning indexer changes only *which* experts and slots are chosen, so replaying the rollout's choices
(r3) must give back the behaviour log-probs, and routing afresh (off) must not.
"""
import pytest
import torch

from jointrl.envs.episode import Episode
from jointrl.model.generate import SamplingParams
from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer
from jointrl.rl.learner.critic import PolicyWithValue
from jointrl.rl.rollout.engine import Engine, TurnRequest
from jointrl.rl.learner.batch import pack, samples_from_trajectories
from jointrl.rl.learner.forward import forward_micro_batch, reference_logprobs
from jointrl.rl.trajectory import Trajectory

THINK, END_THINK = 5, 6
PAD = 0
ATOL = 1e-5
TEMPERATURE = 0.8


def build_model() -> Transformer:
    torch.manual_seed(0)
    # A larger init than the default makes a different expert choice show clearly in the log-probs (a gap
    # of ~0.4 rather than ~0.07) while fp32 still matches to ~1e-6; index_topk 4 makes DSA truly sparse.
    cfg = PRESETS["debug"].model_copy(update={"index_topk": 4, "init_std": 0.05})
    return Transformer(cfg)


def episode() -> Episode:
    return Episode(env_id="test/replay-v0:easy", domain="test", family="replay", difficulty="easy", seed=0, tier="low")


class Recorder:
    """Builds a Trajectory the way the agent loop does: fed spans masked 0, sampled tokens masked 1."""

    def __init__(self):
        self.tokens, self.mask, self.logprobs, self.versions, self.routing, self.topk = [], [], [], [], [], []

    def feed(self, ids):
        self.tokens += ids
        self.mask += [0.0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.versions += [-1] * len(ids)

    def turn(self, result):
        assert not any(result.forced)
        self.tokens += result.tokens
        self.mask += [1.0] * len(result.tokens)
        self.logprobs += result.logprobs
        self.versions += result.versions
        self.routing.append(result.routing)
        self.topk.append(result.sparse_topk)

    def trajectory(self, reward: float) -> Trajectory:
        return Trajectory(
            episode=episode(), tokens=torch.tensor(self.tokens), loss_mask=torch.tensor(self.mask),
            behavior_logprobs=torch.tensor(self.logprobs), policy_version=torch.tensor(self.versions),
            routed_experts=torch.cat(self.routing), sparse_topk=torch.cat(self.topk), reward=reward,
        )


def roll_out(model: Transformer) -> list[Trajectory]:
    """Three sequences of different lengths sampled at temperature 0.8 (the second has two turns with a
    tool result between them), and a fourth, greedy one, all in the same engine steps."""
    g = torch.Generator().manual_seed(1)
    engine = Engine(model, THINK, END_THINK, max_rows=4, record_routing=True, generator=g)
    sampling = [SamplingParams(temperature=TEMPERATURE)] * 3 + [SamplingParams(temperature=0.0)]
    prompts = [torch.randint(8, 512, (n,), generator=g).tolist() for n in (7, 5, 11, 6)]
    recorders = [Recorder() for _ in prompts]
    for r, p in zip(recorders, prompts):
        r.feed(p)
    budgets = (9, 5, 3, 6)
    first = engine.run([TurnRequest(i, p, n, s) for i, (p, n, s) in enumerate(zip(prompts, budgets, sampling))])
    for r, result in zip(recorders, first):
        r.turn(result)
    tool = [11, 12, 13, 14]
    recorders[1].feed(tool)
    (second,) = engine.run([TurnRequest(1, tool, 4, sampling[1])])
    recorders[1].turn(second)
    for i in range(len(prompts)):
        engine.release(i)
    return [r.trajectory(reward=float(i)) for i, r in enumerate(recorders)]


def move_selection_state(model: Transformer, seed: int) -> None:
    """Shift every router bias and perturb every lightning indexer: both change choices, nothing else."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for i in model.moe_layers:
            bias = model.layers[i].ffn.gate.e_score_correction_bias
            bias += 2.0 * torch.randn(bias.shape, generator=g)
        for i in model.dsa_layers:
            for p in model.layers[i].attn.indexer.parameters():
                p += torch.randn(p.shape, generator=g)


def on_mask(x, mb):
    return x[mb.mask > 0]


@pytest.fixture(scope="module")
def rollout():
    """(model, micro-batch of the three sampled rows, micro-batch of the greedy row)."""
    model = build_model()
    trajectories = roll_out(model)
    samples = samples_from_trajectories(trajectories, advantages=[0.0] * len(trajectories))
    (mb,) = pack(samples[:3], micro_batch_tokens=10_000, pad_id=PAD)
    (greedy,) = pack(samples[3:], micro_batch_tokens=10_000, pad_id=PAD)
    return model, mb, greedy


def test_rollout_is_recorded_per_fed_token(rollout):
    model, mb, _ = rollout
    rows, width = mb.inputs.shape
    assert rows == 3 and not mb.valid.all(), "rows of different lengths: the micro-batch has padding"
    assert mb.routing.shape == (rows, width, len(model.moe_layers), model.cfg.n_active)
    assert mb.sparse_topk.shape == (rows, width, len(model.dsa_layers), 4)
    # The two-turn row: a 0-mask gap (the tool result) between two sampled spans.
    row = mb.index.tolist().index(1)
    trained = mb.mask[row][mb.valid[row]].tolist()
    assert trained == [0.0] * 4 + [1.0] * 5 + [0.0] * 4 + [1.0] * 4


def test_r3_reproduces_behaviour_logprobs_after_selection_state_moved(rollout):
    model, mb, _ = rollout
    policy = PolicyWithValue(model)
    with torch.no_grad():
        before = forward_micro_batch(policy, mb, temperature=TEMPERATURE, replay="off")
    # Unchanged weights: the learner's own routing is the rollout's, so even "off" reproduces the sampler.
    torch.testing.assert_close(on_mask(before.logprobs, mb), on_mask(mb.behavior_logprobs, mb), atol=ATOL, rtol=0)

    state = {k: v.clone() for k, v in model.state_dict().items()}
    move_selection_state(model, seed=2)
    try:
        with torch.no_grad():
            replayed = forward_micro_batch(policy, mb, temperature=TEMPERATURE, replay="r3")
            fresh = forward_micro_batch(policy, mb, temperature=TEMPERATURE, replay="off")
    finally:
        model.load_state_dict(state)

    valid = mb.valid
    assert torch.equal(replayed.routing[valid], mb.routing[valid])
    assert torch.equal(replayed.sparse_topk[valid], mb.sparse_topk[valid])
    torch.testing.assert_close(on_mask(replayed.logprobs, mb), on_mask(mb.behavior_logprobs, mb), atol=ATOL, rtol=0)

    # Routing afresh really does choose differently, and it shows in the log-probs.
    assert not torch.equal(fresh.routing[valid], mb.routing[valid])
    assert not torch.equal(fresh.sparse_topk[valid], mb.sparse_topk[valid])
    gap = (on_mask(fresh.logprobs, mb) - on_mask(mb.behavior_logprobs, mb)).abs().max()
    assert gap > 1e-2, f"off routing should change the log-probs, max gap {float(gap):.2e}"


def test_r2_replays_the_learners_old_pass(rollout):
    model, mb, _ = rollout
    policy = PolicyWithValue(model)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        move_selection_state(model, seed=3)
        with torch.no_grad():
            old = forward_micro_batch(policy, mb, temperature=TEMPERATURE, replay="off")
        # Between the old pass and an update the selection state moves again (a bias step, say).
        move_selection_state(model, seed=4)
        with torch.no_grad():
            replayed = forward_micro_batch(policy, mb, temperature=TEMPERATURE, replay="r2", replay_from=old)
            fresh = forward_micro_batch(policy, mb, temperature=TEMPERATURE, replay="off")
    finally:
        model.load_state_dict(state)
    valid = mb.valid
    torch.testing.assert_close(replayed.logprobs[valid], old.logprobs[valid], atol=ATOL, rtol=0)
    assert (fresh.logprobs[valid] - old.logprobs[valid]).abs().max() > 1e-2


def test_the_reference_routes_as_configured_under_r3(rollout):
    model, mb, _ = rollout
    reference = build_model()
    move_selection_state(reference, seed=5)  # the reference would choose other experts and slots than the rollout
    with torch.no_grad():
        ref = reference_logprobs(PolicyWithValue(reference), mb, temperature=TEMPERATURE, routing="own", replay="r3")
        replayed = reference_logprobs(PolicyWithValue(reference), mb, temperature=TEMPERATURE, routing="replay",
                                      replay="r3")
    # replay: with the rollout's experts and slots, a reference that differs from the sampler only in how it
    # would choose them gives back the sampler's own log-probs.
    torch.testing.assert_close(on_mask(replayed, mb), on_mask(mb.behavior_logprobs, mb), atol=ATOL, rtol=0)
    # own: the reference's own routing, checked row by row against a plain forward of the reference.
    for r, i in enumerate(mb.index.tolist()):
        n = int(mb.valid[r].sum())
        tokens = torch.cat([mb.inputs[r, :1], mb.targets[r, :n]])
        with torch.no_grad():
            logits = reference(tokens[None, :-1]).logits[0] / TEMPERATURE  # the row alone: the reference's own routing
        expected = torch.log_softmax(logits, dim=-1).gather(1, tokens[1:, None]).squeeze(1)
        on = mb.mask[r, :n] != 0  # scored positions; the rest read 0
        torch.testing.assert_close(ref[r, :n][on], expected[on], atol=ATOL, rtol=0)
        assert (ref[r, :n][~on] == 0).all()
    gap = (on_mask(ref, mb) - on_mask(replayed, mb)).abs().max()
    assert gap > 1e-2, f"the two routings should give different reference log-probs, gap {gap:.2e}"
    with pytest.raises(ValueError, match="reference routing 'mine'"):
        reference_logprobs(PolicyWithValue(reference), mb, temperature=TEMPERATURE, routing="mine", replay="r3")


def test_greedy_rollout_is_scored_at_temperature_one(rollout):
    model, _, greedy = rollout
    state = {k: v.clone() for k, v in model.state_dict().items()}
    move_selection_state(model, seed=5)
    try:
        with torch.no_grad():
            replayed = forward_micro_batch(PolicyWithValue(model), greedy, temperature=0.0, replay="r3")
    finally:
        model.load_state_dict(state)
    expected = on_mask(greedy.behavior_logprobs, greedy)
    torch.testing.assert_close(on_mask(replayed.logprobs, greedy), expected, atol=ATOL, rtol=0)


def test_replay_needs_its_source(rollout):
    model, mb, _ = rollout
    policy = PolicyWithValue(model)
    with pytest.raises(ValueError, match="replay_from"):
        forward_micro_batch(policy, mb, temperature=1.0, replay="r2")
    with pytest.raises(ValueError, match="replay='r9'"):
        forward_micro_batch(policy, mb, temperature=1.0, replay="r9")
    bare = type(mb)(**{**mb.__dict__, "routing": None})
    with pytest.raises(ValueError, match="no rollout routing"):
        forward_micro_batch(policy, bare, temperature=1.0, replay="r3")
    with pytest.raises(ValueError, match="temperature=-1"):
        forward_micro_batch(policy, mb, temperature=-1.0, replay="off")
