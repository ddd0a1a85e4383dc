"""Weight sync from the learner ranks: the ranks' shares tile the policy exactly once, and a worker rebuilds it.

The reference is the full state of one Transformer: each rank's local state is cut from it the way expert
parallelism shards it (`shard_state`), and what the shares carry, put back together, must be that state bit for
bit (MXFP4 pieces: the MXFP4 encoding of the full tensors, since quantization acts on rows independently).
"""
import pytest
import torch

from jointrl.model.config import ModelConfig
from jointrl.model.mxfp4 import mxfp4_state_dict
from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer
from jointrl.rl.learner.expert_parallel import expert_keys, shard_state
from jointrl.rl.rollout.agent import Task
from jointrl.rl.rollout.worker import RolloutWorker
from jointrl.rl.weight_sync import WeightUpdate, bucketize, piece_key, rank_share, split_key
from tests.rl.agent_envs import ENV_SETUP, LOOKUP
from tests.rl.rollout.test_workers import ROLLOUT, InProcess

LAYOUTS = [(1, 1), (2, 1), (2, 2), (4, 2), (4, 4), (8, 2)]  # (world_size, ep_size)


def debug_model(tie: bool = True) -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig(**{**PRESETS["debug"].model_dump(), "tie_embeddings": tie})
    return Transformer(cfg)


def shares(model: Transformer, world_size: int, ep_size: int, mxfp4: bool = False) -> list[dict[str, torch.Tensor]]:
    """What every rank of the layout publishes, each from its own EP-sharded view of the model."""
    state, keys = model.state_dict(), expert_keys(model)
    return [
        rank_share(shard_state(state, keys, rank % ep_size, ep_size), keys, rank=rank, world_size=world_size,
                   ep_size=ep_size, mxfp4_experts=mxfp4)
        for rank in range(world_size)
    ]


def reassemble(parts: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Whole tensors as sent; pieces concatenated in row order, which must tile 0..n with no gap or overlap."""
    whole, rows = {}, {}
    for share in parts:
        for key, tensor in share.items():
            name, span = split_key(key)
            if span is None:
                assert name not in whole, f"{name} sent twice"
                whole[name] = tensor
            else:
                assert span[1] - span[0] == tensor.shape[0]
                rows.setdefault(name, []).append((span, tensor))
    for name, pieces in rows.items():
        assert name not in whole
        pieces.sort(key=lambda p: p[0])
        assert [p[0][0] for p in pieces] == [0] + [p[0][1] for p in pieces[:-1]], f"{name}: rows do not tile"
        whole[name] = torch.cat([t for _, t in pieces])
    return whole


@pytest.mark.parametrize("world_size,ep_size", LAYOUTS)
def test_the_ranks_shares_carry_every_tensor_once_and_rebuild_the_policy(world_size, ep_size):
    model = debug_model(tie=True)
    state = model.state_dict()
    rebuilt = reassemble(shares(model, world_size, ep_size))
    # The tied head is the embedding: it travels once, under the embedding's name.
    assert model.lm_head.weight is model.embed.weight
    assert set(state) - set(rebuilt) == {"lm_head.weight"}
    for name, tensor in rebuilt.items():
        assert torch.equal(tensor, state[name]), name
    # Every rank sends about its part: no more than an even split plus the largest single tensor.
    parts = shares(model, world_size, ep_size)
    sizes = [sum(t.numel() * t.element_size() for t in p.values()) for p in parts]
    largest = max(t.numel() * t.element_size() for t in state.values())
    assert max(sizes) <= sum(sizes) / world_size + largest


def test_mxfp4_pieces_are_the_mxfp4_encoding_of_the_full_experts():
    model = debug_model(tie=False)
    rebuilt = reassemble(shares(model, 4, 2, mxfp4=True))
    expected = mxfp4_state_dict(model.state_dict())
    assert rebuilt.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(rebuilt[name], tensor), name
    assert any(name.endswith("_blocks") for name in rebuilt)


def test_rank_share_rejects_a_layout_whose_ep_size_does_not_divide_the_ranks():
    model = debug_model()
    with pytest.raises(ValueError, match="ep_size=3 does not divide world_size=4"):
        rank_share(model.state_dict(), expert_keys(model), rank=0, world_size=4, ep_size=3)


def update_of(parts: list[dict[str, torch.Tensor]], version: int) -> WeightUpdate:
    buckets = [bucket for share in parts for bucket in bucketize(share, bucket_bytes=30_000)]
    return WeightUpdate(version, InProcess(), buckets, mxfp4_experts=False, nbytes=0)


def test_a_worker_rebuilds_the_policy_from_every_ranks_pieces_and_refuses_a_missing_share(lookup_policy):
    model, tokenizer = lookup_policy
    parts = shares(model, 4, 2)
    worker = RolloutWorker(model.cfg, tokenizer, ROLLOUT, max_rows=2, env_setup=[ENV_SETUP])
    with pytest.raises(ValueError, match="lacks"):
        worker.load_weights(update_of(parts[:3], version=1))  # rank 3's share never arrives
    assert worker.load_weights(update_of(parts, version=2)) == 2
    got = worker.state()
    for name, tensor in model.state_dict().items():
        assert torch.equal(got[name], tensor), name
    assert worker.run([Task(LOOKUP, 0, "low")])[0].policy_version.max() == 2
    # A piece whose rows do not fit the worker's tensor is an error naming the piece.
    name = expert_keys(model)[0]
    bad = {piece_key(name, 0, 3): model.state_dict()[name][:2].clone()}
    with pytest.raises(ValueError, match=r"piece .*\[0:3\] of shape"):
        worker.load_weights(WeightUpdate(3, InProcess(), [bad], mxfp4_experts=False, nbytes=0))
