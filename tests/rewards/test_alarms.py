"""Reward guard-rails: each alarm fires on a constructed trajectory of metrics and stays silent on a healthy one."""
import json
import warnings

import pytest

from jointrl.rewards.alarms import AlarmConfig, RewardAlarm, RewardAlarmError, RewardAlarms

ENV_STD = "env/terminal/grep-v1:easy/reward_std"


def _run(alarms: RewardAlarms, trajectory: list[dict]) -> list[list[str]]:
    """Feed the steps in order; per step, the subjects of the alarms firing."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RewardAlarm)
        return [[a.kind + ":" + a.subject for a in alarms.update(step).alarms] for step in trajectory]


def _shares(format_share: float) -> dict:
    return {"reward/swe/component/format/share": format_share,
            "reward/swe/component/resolved/share": 1 - format_share}


def test_dominance_fires_after_patience_steps():
    alarms = RewardAlarms(AlarmConfig(dominance_share=0.9, dominance_patience=3))
    fired = _run(alarms, [_shares(0.95)] * 4)
    assert fired == [[], [], ["dominance:swe/format"], ["dominance:swe/format"]]


def test_dominance_silent_when_broken_off_or_exempt():
    cfg = AlarmConfig(dominance_share=0.9, dominance_patience=3)
    assert _run(RewardAlarms(cfg), [_shares(s) for s in (0.95, 0.95, 0.5, 0.95, 0.95)]) == [[]] * 5
    # The task's own correctness term may dominate.
    assert _run(RewardAlarms(cfg), [_shares(0.02)] * 5) == [[]] * 5


def _tier(think: float, reward: float) -> dict:
    return {"tier/high/think_tokens": think, "tier/high/reward_mean": reward}


def test_think_drift_fires_when_thinking_grows_and_reward_does_not():
    alarms = RewardAlarms(AlarmConfig(drift_window=2, think_rise=0.25, reward_gain=0.01))
    # Windows: think 100 -> 135 (+35%), reward 0.5 -> 0.5.
    fired = _run(alarms, [_tier(100, 0.5), _tier(100, 0.5), _tier(130, 0.5), _tier(140, 0.5)])
    assert fired == [[], [], [], ["think_drift:high"]]


def test_think_drift_silent_when_reward_follows_or_thinking_is_flat():
    cfg = AlarmConfig(drift_window=2, think_rise=0.25, reward_gain=0.01)
    paid_off = [_tier(100, 0.5), _tier(100, 0.5), _tier(130, 0.6), _tier(140, 0.6)]
    flat = [_tier(100, 0.5), _tier(110, 0.5), _tier(105, 0.4), _tier(115, 0.5)]  # +10% only
    assert _run(RewardAlarms(cfg), paid_off) == [[]] * 4
    assert _run(RewardAlarms(cfg), flat) == [[]] * 4


def _signals(success: float, verified: float) -> dict:
    return {"signal/swe/success": success, "signal/swe/verified": verified}


def test_verifier_gap_fires_when_success_rises_alone():
    alarms = RewardAlarms(AlarmConfig(gap_window=2, gap_margin=0.05))
    fired = _run(alarms, [_signals(0.2, 0.2), _signals(0.2, 0.2), _signals(0.4, 0.2), _signals(0.4, 0.2)])
    assert fired == [[], [], [], ["verifier_gap:swe/success/verified"]]


def test_verifier_gap_silent_when_the_check_rises_too():
    alarms = RewardAlarms(AlarmConfig(gap_window=2, gap_margin=0.05))
    # success +0.2, verified +0.19: the gap widens by 0.01 only.
    trajectory = [_signals(0.2, 0.2), _signals(0.2, 0.2), _signals(0.4, 0.38), _signals(0.4, 0.4)]
    assert _run(alarms, trajectory) == [[]] * 4


def test_zero_variance_counts_only_steps_where_the_env_was_scored():
    alarms = RewardAlarms(AlarmConfig(zero_variance_patience=3))
    fired = _run(alarms, [{ENV_STD: 0.0}, {}, {ENV_STD: 0.0}, {ENV_STD: 0.0}])
    assert fired == [[], [], [], ["zero_variance:terminal/grep-v1:easy"]]


def test_zero_variance_silent_when_variance_returns():
    alarms = RewardAlarms(AlarmConfig(zero_variance_patience=3))
    assert _run(alarms, [{ENV_STD: s} for s in (0.0, 0.0, 0.3, 0.0, 0.0)]) == [[]] * 5


def test_a_healthy_run_raises_no_alarm():
    alarms = RewardAlarms(AlarmConfig(dominance_patience=3, drift_window=3, gap_window=3, zero_variance_patience=3))
    trajectory = [
        {**_shares(0.3), **_tier(200 + 2 * t, 0.3 + 0.02 * t), **_signals(0.3 + 0.02 * t, 0.29 + 0.02 * t),
         ENV_STD: 0.4, "hack/swe/any": 0.01}
        for t in range(20)
    ]
    reports = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", RewardAlarm)
        for step in trajectory:
            reports.append(alarms.update(step))
    assert all(r.alarms == [] for r in reports)
    assert reports[-1].metrics == {"alarm/dominance": 0.0, "alarm/think_drift": 0.0, "alarm/verifier_gap": 0.0,
                                   "alarm/zero_variance": 0.0, "alarm/tampering": 0.0}


def test_warns_once_when_an_alarm_starts_and_counts_it_every_step():
    alarms = RewardAlarms(AlarmConfig(zero_variance_patience=2))
    alarms.update({ENV_STD: 0.0})
    with pytest.warns(RewardAlarm, match="zero_variance: terminal/grep-v1:easy"):
        report = alarms.update({ENV_STD: 0.0})
    assert report.metrics["alarm/zero_variance"] == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", RewardAlarm)
        assert alarms.update({ENV_STD: 0.0}).metrics["alarm/zero_variance"] == 1.0


def test_stop_on_raises_to_stop_the_run():
    alarms = RewardAlarms(AlarmConfig(zero_variance_patience=1, stop_on=("zero_variance",)))
    with pytest.warns(RewardAlarm), pytest.raises(RewardAlarmError, match="terminal/grep-v1:easy"):
        alarms.update({ENV_STD: 0.0})


def test_state_dict_resumes_streaks_and_windows():
    cfg = AlarmConfig(drift_window=2, zero_variance_patience=3)
    steps = [{**_tier(100, 0.5), ENV_STD: 0.0}, {**_tier(100, 0.5), ENV_STD: 0.0}, {**_tier(130, 0.5), ENV_STD: 0.0},
             {**_tier(140, 0.5), ENV_STD: 0.0}]
    first = RewardAlarms(cfg)
    _run(first, steps[:2])
    resumed = RewardAlarms(cfg)
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    assert _run(resumed, steps[2:]) == [["zero_variance:terminal/grep-v1:easy"],
                                        ["think_drift:high", "zero_variance:terminal/grep-v1:easy"]]
    # Without the saved state neither streak nor window is long enough yet.
    assert _run(RewardAlarms(cfg), steps[2:]) == [[], []]


@pytest.mark.parametrize(
    "kwargs,fragment",
    [
        ({"drift_window": 0}, "drift_window must be >= 1"),
        ({"dominance_share": 1.5}, "dominance_share must be in (0, 1]"),
        ({"stop_on": ("dominance", "hacking")}, "unknown kinds ['hacking']"),
    ],
)
def test_bad_settings_are_named(kwargs, fragment):
    with pytest.raises(ValueError) as info:
        AlarmConfig(**kwargs)
    assert fragment in str(info.value)


def test_tampering_fires_after_patience_steps_and_resets_when_it_stops():
    alarms = RewardAlarms(AlarmConfig(tamper_share=0.1, tamper_patience=2))
    steps = [{"hack/swe/any": x} for x in (0.2, 0.3, 0.4, 0.05, 0.2)] + [{"hack/swe/tests_modified": 1.0}]
    assert _run(alarms, steps) == [[], ["tampering:swe"], ["tampering:swe"], [], [], []]
