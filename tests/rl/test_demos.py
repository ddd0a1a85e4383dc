"""Demonstrations against the rollout limits: a demo the limits would cut is reported with its figures."""
from __future__ import annotations

from jointrl.model.tokenizer import train_tokenizer
from jointrl.rl.cold_start import demo_counts
from jointrl.rl.config.rollout import RolloutConfig
from jointrl.rl.config.run import RunConfig
from jointrl.rl.demos import demo_misfits, demo_needs
from jointrl.rl.sft import Conversation

CALL = {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run", "parameters": {"type": "object"}}}]


def demo(source: str, answer: str, reasoning: str | None = None) -> Conversation:
    """Two assistant turns: a tool call (with reasoning when given), then an answer."""
    call = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    if reasoning is not None:
        call["reasoning_content"] = reasoning
    messages = [{"role": "user", "content": "count the files"}, call,
                {"role": "tool", "tool_call_id": "call_0", "content": "a b c"},
                {"role": "assistant", "content": answer}]
    return Conversation(messages, TOOLS, "low", source=source)


SHORT, LONG = "terminal/text-count-v0:easy", "terminal/archive-v0:easy"  # registered, so the tier selector knows them


def test_a_demo_the_rollout_limits_would_cut_is_reported_with_the_key_and_both_numbers():
    short, long = demo(SHORT, "3"), demo(LONG, "three files: " + "a b c " * 20)
    tokenizer = train_tokenizer([str(d.messages) for d in (short, long)] * 10, 512)
    turns, longest, total, thinking, context = demo_needs(tokenizer, long)
    # Property: the answer turn is the longest, and the two turns' generated tokens add up.
    assert turns == 2 and longest > demo_needs(tokenizer, short)[1] and total > longest and thinking == 0
    assert context == len(tokenizer.render(long.messages, long.tools, long.tier))
    fits = RolloutConfig(max_turns=2, max_new_tokens_per_turn=longest, max_new_tokens_per_episode=total)
    assert demo_misfits(tokenizer, [short, long], fits, context) == []
    tight = RolloutConfig(max_turns=1, max_new_tokens_per_turn=longest - 1, max_new_tokens_per_episode=total)
    lines = demo_misfits(tokenizer, [short, long, long], tight, context)
    assert lines[0].startswith(f"{SHORT}: 1 of 1 demonstrations do not fit")
    assert "max_turns is 1, a demo needs 2" in lines[0]
    assert lines[1] == (f"{LONG}: 2 of 2 demonstrations do not fit the rollout limits (rollout.max_turns is 1, "
                        f"a demo needs 2; rollout.max_new_tokens_per_turn is {longest - 1}, a demo needs {longest})")


def test_thinking_past_the_tiers_budget_and_sequences_past_the_models_context_are_reported():
    reasoning = "list the folder first, then count what it shows"
    thoughtful = demo(SHORT, "3", reasoning)
    tokenizer = train_tokenizer([str(thoughtful.messages)] * 10, 512)
    needs = demo_needs(tokenizer, thoughtful)
    # Reference: the reasoning's own tokens; the <think> and </think> markers are not thinking.
    assert needs.thinking == len(tokenizer.encode(reasoning)) > 0
    roomy = {"max_turns": 2, "max_new_tokens_per_turn": needs.longest_turn,
             "max_new_tokens_per_episode": needs.generated}
    budget = needs.thinking - 1
    fixed = RolloutConfig(**roomy, tiers={"low": budget, "high": 1000, "max": 1000},
                          tier_selection={"mode": "fixed", "fixed": {"terminal/*": "low"}})
    assert demo_misfits(tokenizer, [thoughtful], fixed, needs.context) == [
        f"{SHORT}: 1 of 1 demonstrations do not fit the rollout limits (rollout.tiers.low (its thinking budget) is "
        f"{budget}, a demo needs {needs.thinking})"]
    # The same budget in a tier the rollout never plays the env in cuts nothing.
    played_high = RolloutConfig(**roomy, tiers={"low": budget, "high": 1000, "max": 1000},
                                tier_selection={"mode": "fixed", "fixed": {"terminal/*": "high"}})
    assert demo_misfits(tokenizer, [thoughtful], played_high, needs.context) == []
    # In ratios mode a task may draw any tier with a positive ratio: the lowest budget decides.
    drawn = RolloutConfig(**roomy, tiers={"low": budget, "high": 1000, "max": 1000},
                          tier_selection={"mode": "ratios", "ratios": {"low": 0.1, "high": 0.9}})
    assert "rollout.tiers.low (its thinking budget)" in demo_misfits(tokenizer, [thoughtful], drawn, needs.context)[0]
    assert demo_misfits(tokenizer, [thoughtful], played_high, needs.context - 1) == [
        f"{SHORT}: 1 of 1 demonstrations do not fit the rollout limits (model.max_seq_len is {needs.context - 1}, "
        f"a demo needs {needs.context})"]


def test_each_mix_entry_can_set_its_own_number_of_cold_start_demos():
    cfg = RunConfig(
        model={"preset": "debug"},
        envs={"mix": [{"glob": "reasoning/syllogism-v0:default", "demos": 3},
                      {"glob": "terminal/text-count-v0:*"},
                      {"glob": "terminal/text-count-v0:easy", "demos": 9}]},  # already in the glob above: first wins
        trainer={"sft": {"demos_per_env": 5}},
    )
    assert demo_counts(cfg) == {"reasoning/syllogism-v0:default": 3, "terminal/text-count-v0:easy": 5,
                                "terminal/text-count-v0:medium": 5, "terminal/text-count-v0:hard": 5}


def test_demos_are_collected_in_env_then_seed_order_and_unsolved_ones_are_dropped(monkeypatch):
    import threading
    import time

    from jointrl.rl import demos

    threads = set()

    def fake_play(env_id, seed, tier=None):
        threads.add(threading.get_ident())
        time.sleep(0.02 * (seed % 3))  # later jobs finish first
        conv = Conversation([{"role": "user", "content": f"{env_id} {seed}"}], None, "low", source=env_id)
        return conv, {"success": 0.0 if seed == 2 else 1.0}

    monkeypatch.setattr(demos, "play_demo", fake_play)
    got = [c.messages[0]["content"] for c in demos.collect_demos(["a/x-v0:easy", "b/y-v0:easy"], [0, 1, 2, 3, 4])]
    # Reference: the nested loop over env ids, then seeds, skipping the unsolved seed.
    assert got == [f"{env} {seed}" for env in ("a/x-v0:easy", "b/y-v0:easy") for seed in (0, 1, 3, 4)]
    assert len(threads) > 1


def test_demos_are_rendered_in_the_tier_the_rollout_plays_their_task_in():
    import io

    from rich.console import Console

    from jointrl.rl.cold_start import sft_data

    # cad easy and text-count easy both default to tier low; the recipe plays cad at max, text-count by default.
    cfg = RunConfig(
        model={"preset": "mini"},
        tokenizer={"n_samples": 50},
        envs={"mix": [{"glob": "cad/channel-v0:easy", "demos": 2},
                      {"glob": "terminal/text-count-v0:easy", "demos": 2}]},
        rollout={"tier_selection": {"mode": "fixed", "fixed": {"cad/*": "max"}}},
    )
    demos, _ = sft_data(cfg, Console(file=io.StringIO()), demo_counts(cfg))
    assert [(d.source, d.tier) for d in demos] == [("cad/channel-v0:easy", "max")] * 2 + [
        ("terminal/text-count-v0:easy", "low")] * 2


def test_demos_draw_their_tier_from_the_ratios_by_seed(monkeypatch):
    from jointrl.rl import demos
    from jointrl.rl.rollout.tiers import TierSelector

    monkeypatch.setattr(demos, "play_demo", lambda env_id, seed, tier=None: (
        Conversation([{"role": "user", "content": str(seed)}], None, tier, source=env_id), {"success": 1.0}))
    only_high = TierSelector(mode="ratios", ratios={"low": 0.0, "high": 1.0})
    assert {c.tier for c in demos.collect_demos(["a/x-v0:easy"], list(range(20)), only_high)} == {"high"}
    both = TierSelector(mode="ratios", ratios={"low": 1.0, "max": 1.0})
    first = [c.tier for c in demos.collect_demos(["a/x-v0:easy"], list(range(40)), both)]
    assert set(first) == {"low", "max"}
    assert first == [c.tier for c in demos.collect_demos(["a/x-v0:easy"], list(range(40)), both)]
    # Without a selector each demo keeps the env's default tier (play_demo's None).
    assert {c.tier for c in demos.collect_demos(["a/x-v0:easy"], [0, 1])} == {None}
