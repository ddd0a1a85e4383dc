"""The agent loop: multi-turn tool-calling episodes whose tokens are exactly what a learner recomputes."""
import threading
import time
from types import SimpleNamespace

import torch

from jointrl.model.generate import SamplingParams
from jointrl.rl.rollout.agent import AgentLoop, LoopLimits, Task
from jointrl.rl.rollout.engine import Engine
from tests.rl import agent_envs
from tests.rl.agent_envs import BROKEN, JITTER, LOOKUP

def play(lookup_policy, tasks, budgets=None):
    model, tokenizer = lookup_policy
    engine = Engine(model, tokenizer.think_start_id, tokenizer.think_end_id, max_rows=3, record_routing=True)
    limits = LoopLimits(think_budgets=budgets or {"low": 64}, max_turns=4, max_new_tokens_per_turn=48)
    return AgentLoop(engine, tokenizer, limits, SamplingParams(temperature=0)).run(tasks)


def test_episodes_call_tools_and_tokens_reproduce_behaviour_logprobs(lookup_policy):
    model, tokenizer = lookup_policy
    trajectories = play(lookup_policy, [Task(LOOKUP, seed, "low", group_id=seed) for seed in range(4)])
    assert sum(t.episode.turns >= 2 for t in trajectories) >= 2, [t.episode.turns for t in trajectories]
    for t in trajectories:
        # The learner-side forward over the returned tokens, replaying the recorded routing and selections.
        with torch.no_grad():
            out = model(t.tokens[None, :-1], routing=t.routed_experts[None], sparse_topk=t.sparse_topk[None])
        logp = torch.log_softmax(out.logits[0], dim=-1).gather(-1, t.tokens[1:, None]).squeeze(-1)
        mask = t.loss_mask[1:].bool()
        assert mask.sum() > 0
        torch.testing.assert_close(logp[mask], t.behavior_logprobs[1:][mask], atol=1e-4, rtol=1e-4)
        # Rendering the recorded conversation gives back the very tokens (no re-tokenisation drift).
        rendered = tokenizer.render(t.episode.messages, t.episode.tools, "low")
        if not t.episode.truncated:
            assert rendered == t.tokens.tolist()
        assert (t.policy_version[t.loss_mask.bool()] == 0).all()


def test_a_failing_env_is_marked_failed_and_others_finish(lookup_policy):
    trajectories = play(lookup_policy, [Task(BROKEN, 0, "low"), Task(LOOKUP, 1, "low")])
    assert trajectories[0].episode.failed and "generator crashed" in trajectories[0].episode.error
    assert not trajectories[1].episode.failed and trajectories[1].episode.turns >= 1


def test_tiny_thinking_budget_stops_thinking_and_an_answer_follows(lookup_policy):
    _, tokenizer = lookup_policy
    trajectories = play(lookup_policy, [Task(LOOKUP, s, "low") for s in range(3)], budgets={"low": 1})
    for t in trajectories:
        assert t.episode.think_tokens <= t.episode.turns * 1
        # Every think block closes and something follows it in the turn.
        ids = t.tokens.tolist()
        for i, token in enumerate(ids):
            if token == tokenizer.think_start_id:
                close = ids.index(tokenizer.think_end_id, i)
                assert close - i - 1 <= 1 and ids[close + 1] != tokenizer.eot_id or close + 1 < len(ids)


def test_tool_calls_run_beside_the_next_engine_step_and_runs_stay_deterministic(lookup_policy):
    model, tokenizer = lookup_policy
    tasks = [Task(JITTER, seed, "low", group_id=seed) for seed in range(6)]
    limits = LoopLimits(think_budgets={"low": 64}, max_turns=4, max_new_tokens_per_turn=48)
    runs, saw_a_step = [], []
    for _ in range(2):
        engine = Engine(model, tokenizer.think_start_id, tokenizer.think_end_id, max_rows=6,
                        generator=torch.Generator().manual_seed(3))
        stepped = threading.Condition()
        plain_step = engine.step

        def counted_step(plain_step=plain_step, stepped=stepped):
            out = plain_step()
            with stepped:
                stepped.notify_all()
            return out

        def wait_for_a_step(stepped=stepped, engine=engine):
            # A loop that ran tools between steps would never step while this waits: it times out instead.
            with stepped:
                before = engine.steps
                saw_a_step.append(stepped.wait_for(lambda: engine.steps > before, timeout=2))

        engine.step = counted_step
        agent_envs.TOOL_HOOK = wait_for_a_step
        try:
            # At T = 1.5 the memorised policy's turns end at different steps, so some rows generate while
            # others wait on a tool (in lockstep every row would wait at once, leaving nothing to step).
            runs.append(AgentLoop(engine, tokenizer, limits, SamplingParams(temperature=1.5)).run(tasks))
        finally:
            agent_envs.TOOL_HOOK = None
    assert saw_a_step and any(saw_a_step), "no engine step ran while a tool call was in progress"
    # The tool calls' random durations reorder the threads' ends, never the tokens: sampled at T = 1.5 with one
    # seed, both runs are the same to the token.
    for a, b in zip(*runs):
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.behavior_logprobs, b.behavior_logprobs)


def test_more_episodes_than_rows_never_feed_a_history_twice(lookup_policy):
    # A row parked while its tool calls run is pinned: a waiting episode never evicts it, so every token is fed
    # once (all but each episode's last sampled token, which ends it).
    model, tokenizer = lookup_policy
    engine = Engine(model, tokenizer.think_start_id, tokenizer.think_end_id, max_rows=2)
    limits = LoopLimits(think_budgets={"low": 64}, max_turns=4, max_new_tokens_per_turn=48)
    tasks = [Task(LOOKUP, seed, "low", group_id=seed) for seed in range(6)]
    trajectories = AgentLoop(engine, tokenizer, limits, SamplingParams(temperature=0)).run(tasks)
    assert sum(t.episode.turns >= 2 for t in trajectories) >= 2, [t.episode.turns for t in trajectories]
    assert engine.tokens_fed == sum(len(t.tokens) - 1 for t in trajectories)


def test_ended_episodes_are_scored_in_scoring_threads_not_the_tool_threads(lookup_policy, monkeypatch):
    threads = []
    plain = agent_envs.Lookup.signals

    def recording(self):
        threads.append(threading.current_thread().name)
        return plain(self)

    monkeypatch.setattr(agent_envs.Lookup, "signals", recording)
    trajectories = play(lookup_policy, [Task(LOOKUP, seed, "low") for seed in range(3)])
    assert len(threads) == 3 and all(name.startswith("agent-scoring") for name in threads), threads
    assert [t.episode.signals["success"] for t in trajectories] == [
        float(t.episode.final_answer == str(len(agent_envs.WORDS[seed]))) for seed, t in enumerate(trajectories)]


def test_the_episode_time_limit_does_not_count_the_wait_for_an_engine_row(lookup_policy, monkeypatch):
    from jointrl.rl.rollout import agent

    model, tokenizer = lookup_policy
    # A clock that stands still from now on, except for one jump (the loop's other timings read it too).
    now, jumped = [time.monotonic()], []
    monkeypatch.setattr(agent, "time", SimpleNamespace(monotonic=lambda: now[0]))
    engine = Engine(model, tokenizer.think_start_id, tokenizer.think_end_id, max_rows=1)
    plain_step = engine.step

    def step_after_a_long_queue():
        # Every episode has been reset by the first step; the clock jumps past the limit while they wait for rows.
        if not jumped:
            jumped.append(True)
            now[0] += 10_000.0
        return plain_step()

    engine.step = step_after_a_long_queue
    limits = LoopLimits(think_budgets={"low": 64}, max_turns=4, max_new_tokens_per_turn=48, episode_timeout_s=600.0)
    tasks = [Task(LOOKUP, seed, "low", group_id=seed) for seed in range(3)]
    trajectories = AgentLoop(engine, tokenizer, limits, SamplingParams(temperature=0)).run(tasks)
    # The check runs after a turn that calls a tool: every episode here reaches one.
    assert all(t.episode.turns >= 2 for t in trajectories), [t.episode.turns for t in trajectories]
    assert not any(t.episode.failed for t in trajectories), [t.episode.error for t in trajectories]
