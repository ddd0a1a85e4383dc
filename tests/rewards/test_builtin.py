"""The built-in rewards: hand-computed values, abstention when a signal is missing or the episode failed."""
import doctest

import pytest

import jointrl.rewards.correctness as correctness
import jointrl.rewards.shaping as shaping
from jointrl.rewards import registry


def test_every_docstring_example_holds():
    for module in (correctness, shaping):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0
    # Every registered built-in carries at least one example.
    for name in registry.names():
        assert ">>>" in registry.get(name).fn.__doc__


@pytest.mark.parametrize(
    "name,signal",
    [
        ("correctness", "success"),
        ("resolved", "resolved"),
        ("answer_match", "answer_correct"),
        ("state_check", "state_ok"),
    ],
)
def test_binary_correctness_reads_its_signal(episode, name, signal):
    reward = registry.get(name)
    assert reward(episode(signals={signal: 1.0})) == 1.0
    assert reward(episode(signals={signal: 0.0})) == 0.0
    assert reward(episode(signals={"other": 1.0})) is None


def test_correctness_outside_unit_interval_names_env_and_signal(episode):
    with pytest.raises(ValueError, match=r"swe/fix-v1:easy: signal 'success' = 1.5"):
        registry.get("correctness")(episode("swe/fix-v1:easy", signals={"success": 1.5}))


def test_iou_raw_and_thresholded(episode):
    ep = episode("cad/bracket-v1:easy", signals={"iou": 0.62})
    assert correctness.iou(ep) == 0.62
    assert correctness.iou(ep, threshold=0.6) == 1.0
    assert correctness.iou(ep, threshold=0.62) == 1.0  # at the threshold counts
    assert correctness.iou(ep, threshold=0.7) == 0.0
    assert correctness.iou(episode(signals={}), threshold=0.5) is None


def test_partial_credit_reads_the_named_signal(episode):
    ep = episode("swe/fix-v1:easy", signals={"pass_fraction": 3 / 8, "evidence_visited": 0.5})
    assert correctness.partial_credit(ep) == 0.375
    assert correctness.partial_credit(ep, signal="evidence_visited") == 0.5
    assert correctness.partial_credit(ep, signal="iou") is None


FORMAT_CASES = [
    # (final answer, signals, expected): half answer, half (1 - error rate)
    ("42", {"tool_calls": 4.0, "tool_errors": 1.0}, 0.5 * 1 + 0.5 * 0.75),
    (None, {"tool_calls": 0.0, "tool_errors": 0.0}, 0.5 * 0 + 0.5 * 1),
    ("   ", {"tool_calls": 2.0, "tool_errors": 2.0}, 0.0),
    # The env's own parse check overrides mere presence.
    ("x", {"tool_calls": 5.0, "tool_errors": 0.0, "format_ok": 0.0}, 0.5),
    ("x", {"tool_calls": 5.0, "tool_errors": 0.0, "answer_parsed": 0.0}, 0.5),
    # More errors than calls: the rate is capped at 1.
    ("a", {"tool_calls": 2.0, "tool_errors": 3.0}, 0.5),
]


@pytest.mark.parametrize("final,signals,expected", FORMAT_CASES, ids=range(len(FORMAT_CASES)))
def test_format(episode, final, signals, expected):
    assert shaping.format_validity(episode(final_answer=final, signals=signals)) == pytest.approx(expected)


def test_format_abstains_without_tool_counts(episode):
    assert shaping.format_validity(episode(final_answer="42", signals={"success": 1.0})) is None


def test_tool_error_penalty(episode):
    assert shaping.tool_error_penalty(episode(signals={"tool_calls": 10.0, "tool_errors": 3.0})) == pytest.approx(-0.3)
    assert shaping.tool_error_penalty(episode(signals={"tool_calls": 10.0, "tool_errors": 0.0})) == 0.0
    assert shaping.tool_error_penalty(episode(signals={"tool_calls": 0.0, "tool_errors": 0.0})) == 0.0
    assert shaping.tool_error_penalty(episode(signals={})) is None


@pytest.mark.parametrize(
    "think,answer,truncated,expected",
    [(500, 200, False, 0.0), (600, 200, False, 0.0), (650, 200, False, -0.25), (800, 200, False, -1.0),
     (900, 300, False, -1.0), (50, 50, True, -1.0)],
)
def test_overlong_penalty_max_1000_window_200(episode, think, answer, truncated, expected):
    # Free up to 800 tokens, then (800 - L) / 200 down to -1 at 1000; a truncated episode gets -1 outright.
    ep = episode(think_tokens=think, answer_tokens=answer, truncated=truncated)
    assert shaping.overlong_penalty(ep, max_tokens=1000, window=200) == pytest.approx(expected)


@pytest.mark.parametrize("think,expected", [(150, 0.0), (200, 0.0), (250, -0.25), (600, -1.0)])
def test_think_budget_penalty_budget_200(episode, think, expected):
    assert shaping.think_budget_penalty(episode(think_tokens=think, think_budget=200)) == pytest.approx(expected)


def test_think_budget_penalty_abstains(episode):
    assert shaping.think_budget_penalty(episode(think_tokens=900, think_budget=None)) is None
    low = episode(tier="low", think_tokens=900, think_budget=200)
    high = episode(tier="high", think_tokens=300, think_budget=200)
    assert shaping.think_budget_penalty(low, tiers=["high"]) is None
    assert shaping.think_budget_penalty(high, tiers=["high"]) == -0.5


def test_correct_within_budget(episode):
    def ep(success, think, **fields):
        return episode(signals={"success": success}, think_tokens=think, think_budget=400, **fields)

    reward = shaping.correct_within_budget
    assert reward(ep(1.0, 300)) == 1.0
    assert reward(ep(0.0, 300)) == 0.0
    assert reward(ep(1.0, 500)) == 0.0
    assert reward(ep(1.0, 300), fraction=0.75) == 1.0  # 300 <= 0.75 * 400
    assert reward(ep(1.0, 300), fraction=0.5) == 0.0  # 300 > 200
    assert reward(ep(1.0, 300, tier="max"), tiers=["low", "high"]) is None
    assert reward(episode(think_tokens=10, think_budget=400)) is None  # no success signal


PARAMS = {"overlong_penalty": {"max_tokens": 100, "window": 10}}


@pytest.mark.parametrize("name", registry.names())
def test_every_builtin_abstains_on_a_failed_episode(episode, name):
    full = {"success": 1.0, "resolved": 1.0, "iou": 1.0, "answer_correct": 1.0, "state_ok": 1.0, "pass_fraction": 1.0,
            "tool_calls": 1.0, "tool_errors": 0.0}
    ep = episode(signals=full, final_answer="x", think_tokens=10, think_budget=100)
    reward = registry.get(name)
    assert reward(ep, **PARAMS.get(name, {})) is not None
    ep.failed, ep.error = True, "sandbox died"
    assert reward(ep, **PARAMS.get(name, {})) is None
