"""The learner's data path (trajectories to samples, packing, totals, splits) by round trips and properties."""
import random

import pytest
import torch

from jointrl.envs.episode import Episode
from jointrl.rl.learner.batch import (
    LossTotals,
    SequenceSample,
    pack,
    samples_from_trajectories,
    split_for_ranks,
    split_minibatches,
    totals,
)
from jointrl.rl.trajectory import Trajectory

PAD = 3
L, K, S, KS = 2, 2, 1, 3


def make_sample(n: int, index: int, g: torch.Generator, recorded: bool = True) -> SequenceSample:
    """A random sample of n tokens whose fields are all distinguishable from padding."""
    return SequenceSample(
        tokens=torch.randint(10, 500, (n,), generator=g),
        loss_mask=(torch.rand(n, generator=g) < 0.6).float(),
        behavior_logprobs=-torch.rand(n, generator=g) - 0.1,
        policy_version=torch.randint(0, 5, (n,), generator=g),
        advantage=float(torch.randn((), generator=g)),
        reward=float(torch.rand((), generator=g)),
        routed_experts=torch.randint(0, 8, (n - 1, L, K), generator=g) if recorded else None,
        sparse_topk=torch.randint(0, n, (n - 1, S, KS), generator=g) if recorded else None,
        index=index,
    )


def random_samples(count: int, seed: int, max_len: int = 40) -> list[SequenceSample]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, max_len + 1, (count,), generator=g).tolist()
    # Indices with gaps, as after dropping empty trajectories.
    return [make_sample(n, 3 * i + 1, g) for i, n in enumerate(lengths)]


def episode() -> Episode:
    return Episode(env_id="test/dummy-v0:easy", domain="test", family="dummy", difficulty="easy", seed=0, tier="low")


def trajectory(n: int, reward: float | None, g: torch.Generator) -> Trajectory:
    return Trajectory(
        episode=episode(),
        tokens=torch.randint(0, 50, (n,), generator=g),
        loss_mask=torch.ones(n),
        behavior_logprobs=-torch.rand(n, generator=g),
        policy_version=torch.zeros(n, dtype=torch.long),
        routed_experts=torch.randint(0, 8, (max(n - 1, 0), L, K), generator=g),
        sparse_topk=torch.randint(-1, max(n - 1, 1), (max(n - 1, 0), S, KS), generator=g),
        reward=reward,
    )


def test_samples_from_trajectories_drop_short_keep_indices_and_zero_filtered_masks():
    g = torch.Generator().manual_seed(0)
    trajs = [trajectory(5, 1.0, g), trajectory(0, None, g), trajectory(1, 0.5, g), trajectory(4, None, g),
             trajectory(3, -2.0, g)]
    samples = samples_from_trajectories(trajs, [0.1, 0.2, 0.3, 0.4, 0.5], keep=[True, True, True, False, True])
    assert [s.index for s in samples] == [0, 3, 4]
    assert [s.advantage for s in samples] == pytest.approx([0.1, 0.4, 0.5])
    assert [s.reward for s in samples] == [1.0, 0.0, -2.0]
    assert samples[1].loss_mask.sum() == 0 and trajs[3].loss_mask.sum() == 4, "the trajectory itself is untouched"
    assert torch.equal(samples[0].tokens, trajs[0].tokens) and torch.equal(samples[2].loss_mask, trajs[4].loss_mask)
    assert torch.equal(samples[2].routed_experts, trajs[4].routed_experts)


def test_segments_of_one_episode_train_as_their_own_sequences_with_its_advantage():
    g = torch.Generator().manual_seed(1)
    first, second, third = trajectory(6, 1.0, g), trajectory(4, None, g), trajectory(1, None, g)
    first.segments = [second, third]  # the last one is too short to predict anything
    other = trajectory(3, 0.0, g)
    samples = samples_from_trajectories([first, other], [0.7, -0.2], keep=[True, False])
    assert [s.index for s in samples] == [0, 0, 1]
    assert [s.advantage for s in samples] == pytest.approx([0.7, 0.7, -0.2])
    assert [s.reward for s in samples] == [1.0, 1.0, 0.0]
    assert torch.equal(samples[1].tokens, second.tokens) and torch.equal(samples[1].routed_experts, second.routed_experts)
    assert samples[2].loss_mask.sum() == 0


def test_samples_from_trajectories_reject_mismatched_inputs():
    g = torch.Generator().manual_seed(1)
    trajs = [trajectory(4, 1.0, g)]
    with pytest.raises(ValueError, match="2 advantages for 1"):
        samples_from_trajectories(trajs, [0.0, 1.0])
    with pytest.raises(ValueError, match="keep"):
        samples_from_trajectories(trajs, [0.0], keep=[True, False])
    trajs[0].routed_experts = torch.zeros(4, L, K, dtype=torch.long)  # one row too many: [T, L, k]
    with pytest.raises(ValueError, match="routed_experts has shape"):
        samples_from_trajectories(trajs, [0.0])


def test_totals_by_hand():
    g = torch.Generator().manual_seed(2)
    a, b, c = make_sample(5, 0, g), make_sample(4, 1, g), make_sample(3, 2, g)
    a.loss_mask = torch.tensor([0.0, 1, 1, 0, 1])
    b.loss_mask = torch.zeros(4)  # filtered out: no trained token, not a sequence of the loss
    c.loss_mask = torch.tensor([1.0, 0, 1])  # the first token is never predicted, so its 1 does not count
    assert totals([a, b, c]) == LossTotals(tokens=4.0, sequences=2.0, positions=4.0 + 3.0 + 2.0)


@pytest.mark.parametrize("budget", [1, 30, 64, 500], ids=lambda b: f"budget{b}")
@pytest.mark.parametrize("seed", [0, 1])
def test_pack_round_trips_respects_the_budget_and_pads_cleanly(seed, budget):
    samples = random_samples(23, seed)
    by_index = {s.index: s for s in samples}
    batches = pack(samples, budget, PAD)
    seen = [int(i) for mb in batches for i in mb.index]
    assert sorted(seen) == sorted(by_index), "every sample exactly once"
    for mb in batches:
        rows, width = mb.inputs.shape
        assert mb.n_tokens == rows * width
        assert mb.n_tokens <= budget or rows == 1, "only a lone sequence may exceed the budget"
        assert width == max(by_index[int(i)].tokens.shape[0] for i in mb.index) - 1
        for r, i in enumerate(mb.index.tolist()):
            s, n = by_index[i], by_index[i].tokens.shape[0] - 1
            assert torch.equal(mb.inputs[r, :n], s.tokens[:-1]) and torch.equal(mb.targets[r, :n], s.tokens[1:])
            assert torch.equal(mb.mask[r, :n], s.loss_mask[1:])
            assert torch.equal(mb.behavior_logprobs[r, :n], s.behavior_logprobs[1:])
            assert torch.equal(mb.versions[r, :n], s.policy_version[1:])
            assert torch.equal(mb.routing[r, :n], s.routed_experts)
            assert torch.equal(mb.sparse_topk[r, :n], s.sparse_topk)
            assert torch.all(mb.advantages[r, :n] == s.advantage) and mb.rewards[r] == s.reward
            assert mb.valid[r, :n].all() and not mb.valid[r, n:].any()
            assert (mb.inputs[r, n:] == PAD).all() and (mb.targets[r, n:] == PAD).all()
            assert (mb.mask[r, n:] == 0).all() and (mb.advantages[r, n:] == 0).all()
            assert (mb.behavior_logprobs[r, n:] == 0).all() and (mb.versions[r, n:] == -1).all()
            assert (mb.routing[r, n:] == -1).all() and (mb.sparse_topk[r, n:] == -1).all()


@pytest.mark.parametrize("budget", [40, 100])
def test_pack_is_greedy_and_independent_of_input_order(budget):
    samples = random_samples(30, seed=3)
    batches = pack(samples, budget, PAD)
    # Greedy filling: the first (longest) row of the next micro-batch did not fit into the previous one.
    for prev, nxt in zip(batches, batches[1:]):
        assert (prev.inputs.shape[0] + 1) * prev.inputs.shape[1] > budget
        assert nxt.inputs.shape[1] <= prev.inputs.shape[1]
    shuffled = list(samples)
    random.Random(5).shuffle(shuffled)
    again = pack(shuffled, budget, PAD)
    assert [mb.index.tolist() for mb in again] == [mb.index.tolist() for mb in batches]
    assert all(torch.equal(a.inputs, b.inputs) for a, b in zip(again, batches))


def test_pack_without_recordings_and_bad_arguments():
    g = torch.Generator().manual_seed(4)
    plain = [make_sample(n, i, g, recorded=False) for i, n in enumerate([5, 7, 2])]
    (mb,) = pack(plain, 1000, PAD)
    assert mb.routing is None and mb.sparse_topk is None and mb.inputs.shape == (3, 6)
    assert mb.index.tolist() == [1, 0, 2], "longest first"
    assert pack([], 100, PAD) == []
    with pytest.raises(ValueError, match="have no routed_experts"):
        pack(plain + [make_sample(4, 9, g)], 1000, PAD)
    with pytest.raises(ValueError, match="micro_batch_tokens=0"):
        pack(plain, 0, PAD)


def test_split_for_ranks_by_hand():
    g = torch.Generator().manual_seed(6)
    samples = [make_sample(n, i, g) for i, n in enumerate([3, 10, 5, 8, 6])]
    # Longest first onto the lightest: 10->r0, 8->r1, 6->r1 (14), 5->r0 (15), 3->r1 (17).
    shares = split_for_ranks(samples, 2)
    assert [[s.index for s in share] for share in shares] == [[1, 2], [0, 3, 4]]
    assert [[s.index for s in share] for share in split_for_ranks(samples[:1], 3)] == [[0], [], []]
    with pytest.raises(ValueError, match="n_ranks=0"):
        split_for_ranks(samples, 0)


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 7])
def test_split_for_ranks_is_a_balanced_deterministic_partition(n_ranks):
    samples = random_samples(25, seed=7, max_len=200)
    shares = split_for_ranks(samples, n_ranks)
    assert len(shares) == n_ranks
    assert sorted(s.index for share in shares for s in share) == sorted(s.index for s in samples)
    loads = [sum(s.tokens.shape[0] for s in share) for share in shares]
    longest = max(s.tokens.shape[0] for s in samples)
    assert max(loads) <= min(loads) + longest
    shuffled = list(samples)
    random.Random(1).shuffle(shuffled)
    again = split_for_ranks(shuffled, n_ranks)
    assert [[s.index for s in share] for share in again] == [[s.index for s in share] for share in shares]


def test_split_minibatches_interleaves_over_index_order():
    g = torch.Generator().manual_seed(8)
    samples = [make_sample(4, i, g) for i in (6, 0, 5, 1, 4, 2, 3)]
    parts = split_minibatches(samples, 3)
    assert [[s.index for s in part] for part in parts] == [[0, 3, 6], [1, 4], [2, 5]]
    assert [[s.index for s in part] for part in split_minibatches(samples[:2], 3)] == [[0], [6], []]
    with pytest.raises(ValueError, match="n=0"):
        split_minibatches(samples, 0)


def test_micro_batch_to_moves_every_tensor():
    g = torch.Generator().manual_seed(9)
    (mb,) = pack([make_sample(6, 0, g), make_sample(3, 1, g)], 100, PAD)
    moved = mb.to("meta")
    assert moved.inputs.device.type == "meta" and moved.routing.device.type == "meta"
    assert mb.inputs.device.type == "cpu"
