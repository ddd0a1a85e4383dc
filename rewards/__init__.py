"""Reward functions over an episode's signals, their registry, and the multi-domain mixer."""
# Importing the built-in reward modules is what registers them.
from jointrl.rewards import correctness, shaping
from jointrl.rewards.alarms import Alarm, AlarmConfig, AlarmReport, RewardAlarm, RewardAlarmError, RewardAlarms
from jointrl.rewards.mixer import MixedBatch, RewardMixer
from jointrl.rewards.registry import Reward, get, names, param_problems, register, validate
from jointrl.rewards.spec import RewardFunction, RewardSpec, RewardTable

__all__ = [
    "Alarm", "AlarmConfig", "AlarmReport", "MixedBatch", "Reward", "RewardAlarm", "RewardAlarmError", "RewardAlarms",
    "RewardFunction", "RewardMixer", "RewardSpec", "RewardTable", "correctness", "get", "names", "param_problems",
    "register", "shaping", "validate",
]
