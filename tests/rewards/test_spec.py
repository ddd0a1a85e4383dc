"""The recipe surface: which terms score an episode, compiled terms, and errors naming the bad reward."""
import pytest

from jointrl.rewards.spec import RewardFunction, RewardSpec, RewardTable


def test_env_glob_then_domain_then_default(episode):
    table = RewardTable(
        default=[{"name": "correctness"}],
        domains={"cad": [{"name": "iou", "weight": 2.0}]},
        envs={"cad/*:hard": [{"name": "iou", "params": {"threshold": 0.9}}]},
    )
    signals = {"success": 0.0, "iou": 0.8}
    assert table.score(episode("cad/bracket-v1:hard", signals=signals)) == {"iou": 0.0}  # thresholded by the glob
    assert table.score(episode("cad/bracket-v1:easy", signals=signals)) == {"iou": 0.8}
    assert table.weights(episode("cad/bracket-v1:easy")) == {"iou": 2.0}
    assert table.score(episode("terminal/grep-v1:easy", signals=signals)) == {"correctness": 0.0}


def test_score_keeps_abstentions(episode):
    table = RewardTable(default=[RewardSpec("correctness"), RewardSpec("resolved", 0.5)])
    assert table.score(episode(signals={"success": 1.0})) == {"correctness": 1.0, "resolved": None}


def test_from_config_reads_any_object_with_the_fields(episode):
    class Term:
        def __init__(self, name, weight=1.0, params=None):
            self.name, self.weight, self.params = name, weight, params or {}

    class Config:
        default = [Term("correctness")]
        domains = {"terminal": [Term("state_check", 3.0)]}

    table = RewardTable.from_config(Config())
    assert table.weights(episode("terminal/grep-v1:easy")) == {"state_check": 3.0}
    assert table.envs == {}


def test_compiled_function_binds_defaults():
    f = RewardFunction.compile(RewardSpec("correct_within_budget", 0.25, {"fraction": 0.5}))
    assert (f.name, f.weight, dict(f.params)) == ("correct_within_budget", 0.25, {"fraction": 0.5, "tiers": None})


@pytest.mark.parametrize(
    "kwargs,fragment",
    [
        (
            {"default": [{"name": "corectness"}]},
            "rewards for default: unknown reward 'corectness' (did you mean 'correctness'",
        ),
        ({"default": [], "domains": {}}, "rewards for default: a list needs at least one term"),
        (
            {"default": [{"name": "correctness"}], "domains": {"cad": [{"name": "iou", "params": {"tresh": 1}}]}},
            "rewards for cad: reward 'iou' has no parameter 'tresh'",
        ),
        (
            {"default": [{"name": "correctness"}], "envs": {"swe/*": [{"name": "resolved"}, {"name": "resolved"}]}},
            "rewards for swe/*: 'resolved' listed more than once",
        ),
    ],
    ids=["unknown", "empty", "bad-param", "duplicate"],
)
def test_bad_tables_raise_naming_the_list_and_reward(kwargs, fragment):
    with pytest.raises(ValueError) as info:
        RewardTable(**kwargs)
    assert fragment in str(info.value)
