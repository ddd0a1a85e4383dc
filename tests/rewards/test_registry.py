"""The reward registry: registering, looking up, checking parameters, and the contract its wrapper enforces."""
import math

import pytest

from jointrl.rewards import registry


@pytest.fixture
def scratch(monkeypatch):
    """A copy of the registry that test registrations leave behind when the test ends."""
    monkeypatch.setattr(registry, "_REWARDS", dict(registry._REWARDS))


def test_builtins_are_registered():
    expected = {
        "correctness", "resolved", "iou", "answer_match", "state_check", "partial_credit", "format",
        "tool_error_penalty", "overlong_penalty", "think_budget_penalty", "correct_within_budget",
    }
    assert expected <= set(registry.names())
    assert registry.names() == sorted(registry.names())


def test_unknown_name_suggests_close_ones():
    with pytest.raises(ValueError, match=r"unknown reward 'corectness' \(did you mean 'correctness'"):
        registry.get("corectness")
    # Nothing close: the message lists what exists instead.
    assert "known: answer_match" in registry.unknown_message("zzzz")


def test_registered_function_is_looked_up_and_called(scratch, episode):
    @registry.register("double_success")
    def double(ep, factor: float = 2.0):
        """Twice the success.

        >>> 1
        1
        """
        return factor * ep.signals["success"] if "success" in ep.signals else None

    reward = registry.get("double_success")
    assert "double_success" in registry.names()
    assert reward.summary == "Twice the success."
    assert reward(episode(signals={"success": 1.0})) == 2.0
    assert reward(episode(signals={"success": 1.0}), factor=0.5) == 0.5
    assert reward(episode(signals={})) is None
    assert reward(episode(signals={"success": 1.0}, failed=True)) is None
    assert double(episode(signals={"success": 1.0}, failed=True)) is None  # the module-level name is guarded too


def test_nan_from_a_reward_is_an_error_naming_it(scratch, episode):
    @registry.register("broken")
    def broken(ep):
        """Always NaN.

        >>> 1
        1
        """
        return math.nan

    with pytest.raises(ValueError, match=r"reward 'broken' gave nan on terminal/grep-v1:easy seed 0"):
        broken(episode())


def _doc(fn):
    fn.__doc__ = "A reward.\n\n>>> 1\n1\n"
    return fn


@pytest.mark.parametrize(
    "name,fn,error,fragment",
    [
        ("Bad-Name", _doc(lambda ep: 1.0), ValueError, "lower_snake_case"),
        ("no_example", lambda ep: 1.0, ValueError, "docstring with an example"),
        ("star_kwargs", _doc(lambda ep, **kw: 1.0), TypeError, "ordinary keyword"),
        ("untyped", _doc(lambda ep, table={}: 1.0), TypeError, "type a recipe cannot give"),
        ("correctness", _doc(lambda ep: 1.0), ValueError, "already registered"),
    ],
    ids=["bad-name", "no-example", "kwargs", "untyped", "duplicate"],
)
def test_bad_registrations_are_refused(scratch, name, fn, error, fragment):
    with pytest.raises(error, match=fragment):
        registry.register(name)(fn)


PROBLEMS = [
    ("iou", {"treshold": 0.5}, "treshold", "has no parameter 'treshold' (accepted: threshold)"),
    ("iou", {"threshold": "high"}, "threshold", "must be a finite number or null, got 'high'"),
    ("iou", {"threshold": True}, "threshold", "must be a finite number or null, got True"),
    ("iou", {"threshold": 1.5}, None, "threshold must be in [0, 1], got 1.5"),
    ("overlong_penalty", {"window": 10}, None, "needs parameter 'max_tokens'"),
    ("overlong_penalty", {"max_tokens": 100, "window": 200}, None, "needs 0 < window <= max_tokens"),
    ("overlong_penalty", {"max_tokens": 100.0, "window": 20}, "max_tokens", "must be an integer"),
    ("think_budget_penalty", {"tiers": ["low", "medium"]}, None, "tiers must be a non-empty list"),
    ("think_budget_penalty", {"tiers": "low"}, "tiers", "must be a list of strings or null"),
    ("correct_within_budget", {"fraction": 0.0}, None, "fraction must be in (0, 1]"),
    ("correctness", {"signal": "x"}, "signal", "(accepted: none)"),
]


@pytest.mark.parametrize("name,params,key,fragment", PROBLEMS, ids=[f"{p[0]}-{i}" for i, p in enumerate(PROBLEMS)])
def test_param_problems_name_the_reward_and_parameter(name, params, key, fragment):
    problems = registry.param_problems(name, params)
    assert len(problems) == 1
    assert problems[0][0] == key
    assert fragment in problems[0][1] and f"reward {name!r}" in problems[0][1]
    with pytest.raises(ValueError, match=name):
        registry.validate(name, params)


def test_validate_fills_defaults():
    assert registry.validate("iou", {}) == {"threshold": None}
    assert registry.validate("correct_within_budget", {"tiers": ["low"]}) == {"fraction": 1.0, "tiers": ["low"]}
    given = {"max_tokens": 1000, "window": 200}
    assert registry.validate("overlong_penalty", given) == given
    # An integer is a fine value for a float parameter.
    assert registry.validate("iou", {"threshold": 1}) == {"threshold": 1}
