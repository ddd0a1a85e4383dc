"""Rollout workers as real Ray actors: envs resolved inside them, faults, and versioned (MXFP4) weight pushes.

The test envs live in tests/rl/agent_envs.py, an importable module: each worker calls its `register`
through env_setup and imports its env classes by entry point, with the repository root on its PYTHONPATH.
"""
import copy
import os
import threading
import time
from collections import Counter

import pytest
import ray
import torch

from jointrl.envs import registry
from jointrl.model.mxfp4 import MXFP4Experts, quantize_experts_
from jointrl.rl.actor_group import Placement
from jointrl.rl.rollout.agent import AgentLoop, LoopLimits, Task
from jointrl.rl.config.rollout import RolloutConfig
from jointrl.rl.rollout.engine import Engine
from jointrl.rl.rollout.manager import RolloutManager
from jointrl.rl.rollout.worker import RolloutWorker, sampling_params
from jointrl.rl.weight_sync import WeightSync, WeightTransport, bucketize, prepare_state
from tests.rl.agent_envs import BROKEN, ENV_SETUP, HANG, LOOKUP, SLOW, WORKER_RUNTIME_ENV

ROLLOUT = RolloutConfig(
    tiers={"low": 64, "high": 64, "max": 64}, max_turns=4, max_new_tokens_per_turn=48,
    max_new_tokens_per_episode=192, temperature=0.0,
)
PLACEMENT = Placement(num_cpus=1, runtime_env=WORKER_RUNTIME_ENV, ready_timeout_s=120)
# A chunk of two lookup episodes takes well under a second; this leaves room for a loaded machine.
CHUNK_TIMEOUT_S = 6.0


def task_key(task):
    """What identifies a task: (env id, seed, group)."""
    return task.env_id, task.seed, task.group_id


def key(trajectory):
    """The task a trajectory answers."""
    return task_key(trajectory.episode)


@pytest.fixture(scope="module")
def managers(ray_session, lookup_policy):
    """The manager for a rollout config, built on first use; one is alive at a time, so at most two workers exist."""
    model, tokenizer = lookup_policy
    alive = {}

    def get(rollout=ROLLOUT, n_workers=2):
        wanted = (rollout.model_dump_json(), n_workers)
        if wanted not in alive:
            for manager in alive.values():
                manager.shutdown()
            alive.clear()
            alive[wanted] = RolloutManager(
                model.cfg, tokenizer, rollout, n_workers=n_workers, chunk_size=2, chunk_timeout_s=CHUNK_TIMEOUT_S,
                placement=PLACEMENT, env_setup=[ENV_SETUP], max_rows=4,
            )
        return alive[wanted]

    yield get
    for manager in alive.values():
        manager.shutdown()


def push_next(manager, state):
    """Push a state dict as the version after the manager's latest; returns the update."""
    latest = manager.sync.latest
    return manager.push_weights(state, version=1 if latest is None else latest.version + 1)


def local_play(lookup_policy, tasks):
    """The same tasks through an engine and agent loop in this process."""
    model, tokenizer = lookup_policy
    engine = Engine(model, tokenizer.think_start_id, tokenizer.think_end_id, max_rows=4, record_routing=True)
    return AgentLoop(engine, tokenizer, LoopLimits.from_rollout(ROLLOUT), sampling_params(ROLLOUT)).run(tasks)


def test_prepare_and_bucketize_send_each_tensor_once_in_bounded_buckets(lookup_policy):
    model, _ = lookup_policy
    state = model.state_dict()
    prepared = prepare_state(state)
    assert list(prepared) == list(state)
    buckets = bucketize(prepared, bucket_bytes=40_000)
    assert len(buckets) > 2 and [n for b in buckets for n in b] == list(state)
    for bucket in buckets:
        size = sum(t.numel() * t.element_size() for t in bucket.values())
        assert size <= 40_000 or len(bucket) == 1
    # A tied tensor travels once; the receiver's module shares it already.
    shared = torch.ones(4)
    assert list(prepare_state({"embed.weight": shared, "lm_head.weight": shared})) == ["embed.weight"]
    # MXFP4: routed experts become uint8 blocks and scales, about a quarter of their fp32 bytes; the rest is unchanged.
    quantized = prepare_state(state, mxfp4_experts=True)
    experts = [n for n in state if n.endswith(("gate_proj", "up_proj", "down_proj")) and state[n].dim() == 3]
    assert experts
    for name in experts:
        assert name not in quantized and quantized[name + "_blocks"].dtype == torch.uint8
        fp32_bytes = state[name].numel() * 4
        assert quantized[name + "_blocks"].numel() + quantized[name + "_scales"].numel() < 0.3 * fp32_bytes
    assert all(torch.equal(quantized[n], t) for n, t in state.items() if n not in experts)


def test_placement_rejects_options_ray_cannot_honour():
    with pytest.raises(ValueError, match="strategy"):
        Placement(strategy="EVERYWHERE")
    with pytest.raises(ValueError, match="positive CPU or GPU share"):
        Placement(num_cpus=0)
    assert Placement(num_cpus=0.5, num_gpus=1).bundle() == {"CPU": 0.5, "GPU": 1}
    assert Placement(num_cpus=2).bundle() == {"CPU": 2}


class InProcess(WeightTransport):
    """Buckets handed over as they are: a worker built in this process, no Ray."""

    def publish(self, buckets):
        return list(buckets)

    def fetch(self, handles):
        yield from handles


def test_a_worker_converts_updates_of_the_other_expert_format_and_refuses_incomplete_ones(lookup_policy):
    model, tokenizer = lookup_policy
    tokens = local_play(lookup_policy, [Task(LOOKUP, 0, "low")])[0].tokens.tolist()
    quantized = copy.deepcopy(model)
    quantize_experts_(quantized)
    with torch.no_grad():
        expected = quantized(torch.tensor([tokens])).logits[0]
    for worker_mxfp4 in (False, True):
        rollout = ROLLOUT.model_copy(update={"mxfp4_experts": worker_mxfp4})
        worker = RolloutWorker(model.cfg, tokenizer, rollout, max_rows=2, env_setup=[ENV_SETUP])
        with pytest.raises(RuntimeError, match="no weights yet"):
            worker.run([Task(LOOKUP, 0, "low")])
        sync = WeightSync(InProcess(), bucket_bytes=50_000, mxfp4_experts=not worker_mxfp4)
        incomplete = {k: v for k, v in model.state_dict().items() if not k.startswith("layers.1.")}
        with pytest.raises(ValueError, match="lacks"):
            worker.load_weights(sync.publish(incomplete, version=1))
        assert worker.load_weights(sync.publish(model.state_dict(), version=2)) == 2
        assert worker.info().mxfp4_experts == worker_mxfp4 and worker.info().version == 2
        # Either way the experts went through MXFP4 once: the worker computes what the MXFP4 model computes.
        torch.testing.assert_close(worker.logits(tokens), expected, atol=1e-5, rtol=1e-5)
        assert worker.run([Task(LOOKUP, 1, "low")])[0].policy_version.max() == 2


def test_workers_resolve_envs_themselves_and_return_every_task(managers, lookup_policy):
    model, _ = lookup_policy
    manager = managers()
    push_next(manager, model.state_dict())
    infos = ray.get(manager.group.call("info"))
    # Each worker registered the test specs itself (env_setup) next to the built-in domains.
    assert len({i.pid for i in infos} | {os.getpid()}) == 3
    assert all(i.version == manager.sync.latest.version and i.env_ids == len(registry.env_ids()) for i in infos)
    lookups = [Task(LOOKUP, seed, "low", group_id=seed) for seed in range(4)]
    tasks = lookups + [Task(BROKEN, 0, "low", group_id=7), Task("test/unknown-v0:easy", 0, "low", group_id=8)]
    faults = len(manager.faults)
    out = manager.run(tasks)
    assert [key(t) for t in out] == [task_key(t) for t in tasks]
    # The workers' episodes are the ones this process plays with the same weights.
    for remote, local in zip(out[:4], local_play(lookup_policy, lookups)):
        assert not remote.episode.failed and remote.episode.turns >= 2
        assert torch.equal(remote.tokens, local.tokens)
        torch.testing.assert_close(remote.behavior_logprobs, local.behavior_logprobs, atol=1e-5, rtol=1e-5)
    assert out[4].episode.failed and "generator crashed" in out[4].episode.error
    # An id the workers' registry does not know comes back failed with the registry's error, not lost:
    # its chunk raised, was split, and the unknown id raised again on its own.
    assert out[5].episode.failed and "unknown env id" in out[5].episode.error and out[5].tokens.numel() == 0
    assert [(f.kind, len(f.tasks)) for f in manager.faults[faults:]] == [("error", 2), ("error", 1)]


def test_a_worker_killed_mid_batch_is_restarted_and_no_task_is_lost_or_doubled(managers, lookup_policy):
    model, _ = lookup_policy
    manager = managers()
    push_next(manager, model.state_dict())
    pid_before = ray.get(manager.workers[0].info.remote()).pid
    restarts, faults = manager.restarts, len(manager.faults)
    tasks = [Task(SLOW, seed, "low", group_id=g) for g in range(2) for seed in range(4)]
    killed = []

    def kill_worker_0_while_it_plays():
        # Wait until slot 0 has been inside a chunk for a moment (its env resets take 0.6 s each), then kill it.
        while not killed:
            chunk = manager.in_flight().get(0)
            if chunk is not None and time.monotonic() - chunk[1] > 0.3:
                ray.kill(manager.workers[0], no_restart=True)
                killed.append(chunk[0])
            time.sleep(0.05)

    killer = threading.Thread(target=kill_worker_0_while_it_plays, daemon=True)
    killer.start()
    out = manager.run(tasks)
    killer.join(timeout=1)
    assert killed, "the batch finished before worker 0 could be killed"
    assert Counter(key(t) for t in out) == Counter(task_key(t) for t in tasks) and len(out) == len(tasks)
    assert not any(t.episode.failed for t in out) and all(t.episode.turns >= 2 for t in out)
    assert manager.restarts == restarts + 1 and [f.kind for f in manager.faults[faults:]] == ["died"]
    assert [task_key(t) for t in manager.faults[faults].tasks] == [task_key(tasks[i]) for i in killed[0]]
    info = ray.get(manager.workers[0].info.remote())
    assert info.pid != pid_before and info.version == manager.sync.latest.version


def test_a_hanging_env_times_out_alone_and_the_others_finish(managers, lookup_policy):
    model, _ = lookup_policy
    manager = managers()
    push_next(manager, model.state_dict())
    faults = len(manager.faults)
    tasks = [Task(LOOKUP, 0, "low"), Task(HANG, 1, "low"), Task(LOOKUP, 1, "low"), Task(LOOKUP, 2, "low")]
    out = manager.run(tasks)
    assert [key(t) for t in out] == [task_key(t) for t in tasks]
    hung = out[1].episode
    assert hung.failed and hung.error.startswith("timeout") and f"chunk_timeout_s={CHUNK_TIMEOUT_S:g}s" in hung.error
    assert all(not t.episode.failed and t.episode.turns >= 2 for i, t in enumerate(out) if i != 1)
    # First the pair [lookup, hang] timed out, then the hanging task alone: the record names it.
    assert [(f.kind, len(f.tasks)) for f in manager.faults[faults:]] == [("timeout", 2), ("timeout", 1)]
    assert task_key(manager.faults[-1].tasks[0]) == task_key(tasks[1])
    # The hung worker was killed, not left blocking its slot.
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(manager.workers[manager.faults[-1].worker].info.remote())


def perturbed(state, scale, seed):
    """The state dict with every float tensor moved by Gaussian noise."""
    g = torch.Generator().manual_seed(seed)
    return {k: v + scale * torch.randn(v.shape, generator=g) if v.is_floating_point() else v for k, v in state.items()}


def test_a_weight_push_sets_version_and_the_workers_compute_with_the_pushed_weights(managers, lookup_policy):
    model, _ = lookup_policy
    manager = managers()
    v = push_next(manager, model.state_dict()).version
    tasks = [Task(LOOKUP, seed, "low", group_id=seed) for seed in range(4)]
    first = manager.run(tasks)
    assert all((t.policy_version[t.loss_mask.bool()] == v).all() for t in first)

    new_state = perturbed(model.state_dict(), scale=0.02, seed=1)
    with pytest.raises(ValueError, match="not newer"):
        manager.push_weights(new_state, version=v)
    update = manager.push_weights(new_state, version=v + 1)
    assert len(update.handles) >= 1 and update.nbytes > 0
    local = copy.deepcopy(model)
    local.load_state_dict(new_state)
    second = manager.run(tasks)
    for t in second:
        sampled = t.loss_mask.bool()
        assert sampled.any() and (t.policy_version[sampled] == v + 1).all()
        assert set(t.policy_version.tolist()) <= {-1, v + 1}
    tokens = first[0].tokens.tolist()
    with torch.no_grad():
        expected, old = local(torch.tensor([tokens])).logits[0], model(torch.tensor([tokens])).logits[0]
    for logits in ray.get(manager.group.call("logits", tokens)):
        torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)
        assert (logits - old).abs().max() > 1e-2  # the old weights would not pass


def test_mxfp4_push_gives_mxfp4_experts_and_logprobs_close_to_full_precision(managers, lookup_policy):
    model, _ = lookup_policy
    manager = managers(ROLLOUT.model_copy(update={"mxfp4_experts": True}), n_workers=1)
    with pytest.raises(RuntimeError, match="push weights"):
        manager.run([Task(LOOKUP, 0, "low")])
    update = push_next(manager, model.state_dict())
    full_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    assert update.mxfp4_experts and update.nbytes < full_bytes
    assert ray.get(manager.workers[0].info.remote()).mxfp4_experts
    out = manager.run([Task(LOOKUP, seed, "low", group_id=seed) for seed in range(4)])
    assert all(not t.episode.failed for t in out)
    quantized = copy.deepcopy(model)
    assert quantize_experts_(quantized) == len(model.moe_layers)
    assert all(isinstance(quantized.layers[i].ffn.experts, MXFP4Experts) for i in model.moe_layers)
    gaps = []
    for t in out:
        tokens, sampled = t.tokens, t.loss_mask[1:].bool()
        with torch.no_grad():
            full = torch.log_softmax(model(tokens[None, :-1]).logits[0], -1)
            mx = torch.log_softmax(quantized(tokens[None, :-1]).logits[0], -1)
        picked = tokens[1:, None]
        full, mx = full.gather(-1, picked).squeeze(-1)[sampled], mx.gather(-1, picked).squeeze(-1)[sampled]
        # The worker's behaviour log-probs are those of the same MXFP4 model in this process...
        torch.testing.assert_close(t.behavior_logprobs[1:][sampled], mx, atol=1e-4, rtol=1e-4)
        gaps.append((mx - full).abs())
    # ...and within MXFP4's error of full precision. Each expert weight moves by at most a quarter of its
    # 32-block's largest magnitude; on this policy a sampled token's log-prob then moves by < 0.02 and by
    # < 0.005 on average (measured: 0.0035 and 0.0005 over the 120 sampled tokens).
    gap = torch.cat(gaps)
    assert gap.max() < 0.02 and gap.mean() < 0.005, (gap.max(), gap.mean())


def play_partial(manager, keys, seed=0):
    """Rounds of partial mode until every key's trajectory is back; key -> trajectory."""
    ended = {}
    while len(ended) < len(keys):
        for k, trajectory in manager.advance(seed=seed):
            assert k not in ended, "a key comes back once"
            ended[k] = trajectory
    assert not manager.carried()
    return ended


def test_partial_mode_workers_take_new_weights_mid_episode_and_later_tokens_carry_the_new_version(
    managers, lookup_policy
):
    model, _ = lookup_policy
    manager = managers()
    v = push_next(manager, model.state_dict()).version
    tasks = [Task(LOOKUP, seed, "low", group_id=seed) for seed in range(4)]
    keys = manager.submit(tasks)
    # Two decode steps: every episode is still inside its first turn (a tool call takes more tokens).
    assert manager.advance(seed=0, max_steps=2) == []
    assert set(manager.carried()) == set(keys)
    push_next(manager, model.state_dict())  # the same weights as version v + 1, loaded while the episodes run
    ended = play_partial(manager, keys)
    for k, task, local in zip(keys, tasks, local_play(lookup_policy, tasks)):
        trajectory = ended[k]
        assert key(trajectory) == task_key(task) and not trajectory.episode.failed and trajectory.episode.turns >= 2
        versions = trajectory.policy_version[trajectory.policy_version >= 0].tolist()
        # The first two tokens came from version v, every later one from v + 1.
        assert versions == [v, v] + [v + 1] * (len(versions) - 2)
        # Same weights under both versions and the cache kept: the episode is the one played in one go.
        assert torch.equal(trajectory.tokens, local.tokens)


def test_partial_mode_a_killed_worker_is_restarted_and_its_episodes_are_played_again(managers, lookup_policy):
    model, _ = lookup_policy
    manager = managers()
    push_next(manager, model.state_dict())
    tasks = [Task(LOOKUP, seed, "low", group_id=seed) for seed in range(4)]
    keys = manager.submit(tasks)
    assert manager.advance(seed=0, max_steps=2) == []
    restarts, faults = manager.restarts, len(manager.faults)
    ray.kill(manager.workers[0], no_restart=True)
    ended = play_partial(manager, keys)
    assert [key(ended[k]) for k in keys] == [task_key(t) for t in tasks]
    assert not any(t.episode.failed for t in ended.values())
    assert manager.restarts == restarts + 1 and [f.kind for f in manager.faults[faults:]] == ["died"]
    # Worker 0 held half of the episodes (the least-loaded slot takes each task).
    assert len(manager.faults[faults].tasks) == 2
