"""Black-box episodes: an agent program with the official openai client plays an env through the server, and the
learner gets exactly the tokens the model saw, which replay to the behaviour log-probs."""
import json

import openai
import pytest
import torch

from jointrl.model.transformer import Transformer
from jointrl.rl.serve.app import ServedModel, build_app
from jointrl.rl.serve.background import BackgroundServer
from jointrl.rl.serve.blackbox import openai_agent, play
from jointrl.rl.serve.scheduler import Scheduler
from jointrl.rl.serve.sessions import Sessions
from jointrl.rl.config.rollout import RolloutConfig
from jointrl.rl.rollout.agent import Task
from jointrl.rl.weight_sync import WeightSync
from jointrl.rl.rollout.worker import RolloutWorker
from tests.rl.agent_envs import ENV_SETUP, LOOKUP, SERVED_TOKENS
from tests.rl.rollout.test_workers import InProcess

NAME = "lookup-debug"


@pytest.fixture(scope="module")
def server(lookup_policy):
    fitted, tokenizer = lookup_policy
    # The same weights with room for a terminal task's prompt.
    model = Transformer(fitted.cfg.model_copy(update={"max_seq_len": 4096}))
    model.load_state_dict(fitted.state_dict())
    model.eval()
    sessions = Sessions()
    scheduler = Scheduler(model, tokenizer, max_rows=4, sessions=sessions)
    scheduler.start()
    app = build_app(scheduler, ServedModel(NAME, {"low": 64, "high": 128, "max": 256}, default_tier="low"))
    with BackgroundServer(app) as web:
        yield web.url, sessions, model, tokenizer
    scheduler.stop()


def _replays(model, trajectory):
    """The learner's forward over the recorded tokens, with the recorded routing: same log-probs as sampled."""
    with torch.no_grad():
        out = model(trajectory.tokens[None, :-1], routing=trajectory.routed_experts[None],
                    sparse_topk=trajectory.sparse_topk[None])
    logp = torch.log_softmax(out.logits[0], dim=-1).gather(-1, trajectory.tokens[1:, None]).squeeze(-1)
    mask = trajectory.loss_mask[1:].bool()
    assert mask.sum() > 0
    torch.testing.assert_close(logp[mask], trajectory.behavior_logprobs[1:][mask], atol=1e-4, rtol=1e-4)


def _forgetful_agent(client, model, env, observation, tier):
    """Drops the reasoning of its earlier turns when it asks again, as many harnesses do."""
    messages = list(observation.messages)
    first = client.chat.completions.create(model=model, messages=messages, tools=observation.tools, temperature=0)
    call = first.choices[0].message.tool_calls[0]
    result = env.step({"id": call.id, "type": "function",
                       "function": {"name": call.function.name, "arguments": call.function.arguments}})
    messages += [{"role": "assistant", "content": first.choices[0].message.content or "",
                  "tool_calls": [{"id": call.id, "type": "function", "function": {
                      "name": call.function.name, "arguments": call.function.arguments}}]},
                 {"role": "tool", "tool_call_id": call.id, "content": result.content}]
    second = client.chat.completions.create(model=model, messages=messages, tools=observation.tools, temperature=0)
    forgetful_agent_seen.append(messages)
    return second.choices[0].message.content or ""


forgetful_agent_seen: list = []


def test_an_agent_episode_is_recorded_token_for_token(server):
    url, sessions, model, tokenizer = server
    turns = []
    for seed in range(4):
        # One sequence, continued in its row however many turns: the conversation as the model saw it.
        trajectory = play(openai_agent, url, NAME, sessions, LOOKUP, seed, "low")
        assert trajectory.segments == []
        episode = trajectory.episode
        assert not episode.failed and episode.signals["success"] in (0.0, 1.0)
        turns.append(episode.turns)
        _replays(model, trajectory)
    assert max(turns) >= 2, turns


def test_an_agent_that_edits_its_history_gets_one_segment_per_sequence(server):
    url, sessions, model, tokenizer = server
    forgetful_agent_seen.clear()
    first = play(_forgetful_agent, url, NAME, sessions, LOOKUP, 1, "low")
    trajectories = [first, *first.segments]
    # The second request no longer extends what the row holds (its reasoning is gone): a new segment from
    # that request's own prompt, never a re-tokenised splice of the first.
    assert len(trajectories) == 2
    for trajectory in trajectories:
        _replays(model, trajectory)
    second = trajectories[1].tokens.tolist()
    prompt = tokenizer.render(forgetful_agent_seen[0], trajectories[1].episode.tools, "low", add_generation_prompt=True)
    assert second[:len(prompt)] == prompt


def test_an_unknown_or_closed_episode_key_is_refused(server):
    url, sessions, _, _ = server
    key = sessions.open()
    sessions.close(key)
    for api_key in (key, "ep-" + "0" * 32):
        client = openai.OpenAI(base_url=url + "/v1", api_key=api_key, max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            client.chat.completions.create(model=NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=2)


def test_a_terminal_env_played_by_the_example_agent(server):
    """The example agent plays one of the shipped terminal envs end to end (the policy knows nothing of it)."""
    url, sessions, model, _ = server
    first = play(lambda *a: openai_agent(*a, max_turns=3, max_tokens=24), url, NAME, sessions,
                 "terminal/text-count-v0:easy", 1_000_000, "low")
    trajectories = [first, *first.segments]
    episode = trajectories[0].episode
    assert not episode.failed, episode.error
    assert "success" in episode.signals and episode.turns >= 1
    for trajectory in trajectories:
        if trajectory.loss_mask.sum() > 0:
            _replays(model, trajectory)
    assert json.dumps(episode.messages)


def test_a_rollout_worker_plays_agent_tasks_through_its_server_and_returns_what_it_sampled(lookup_policy):
    model, tokenizer = lookup_policy
    rollout = RolloutConfig(tiers={"low": 64, "high": 64, "max": 64}, max_turns=4, max_new_tokens_per_turn=48,
                            max_new_tokens_per_episode=192, temperature=1.0)
    worker = RolloutWorker(model.cfg, tokenizer, rollout, max_rows=4, env_setup=[ENV_SETUP])
    worker.load_weights(WeightSync(InProcess(), bucket_bytes=1 << 20).publish(model.state_dict(), version=3))
    agent = "tests.rl.agent_envs:recording_agent"
    SERVED_TOKENS.clear()
    tasks = [Task(LOOKUP, 0, "low", 0), Task(LOOKUP, 1, "low", 1, agent), Task(LOOKUP, 2, "low", 2, agent)]
    trajectories = worker.run(tasks, seed=0)
    assert [t.episode.seed for t in trajectories] == [0, 1, 2]
    sampled = []
    for trajectory in trajectories[1:]:
        assert not trajectory.episode.failed and trajectory.segments == []
        tokens, mask = trajectory.tokens.tolist(), trajectory.loss_mask.tolist()
        # The learner's sampled tokens are the served answers' tokens, turn after turn, at this weights version.
        turn: list[str] = []
        for i, (token, m) in enumerate(zip(tokens, mask)):
            if m:
                turn.append(tokenizer.decode([token]))
                assert trajectory.policy_version[i] == 3
            elif turn:
                sampled.append(turn)
                turn = []
        sampled += [turn] if turn else []
        _replays(model, trajectory)
    assert sorted(map(tuple, sampled)) == sorted(map(tuple, SERVED_TOKENS))
    # The worker's engine is its own again: the built-in loop plays on after the black-box phase.
    assert not worker.run([Task(LOOKUP, 3, "low", 3)])[0].episode.failed
