"""RL algorithms as pure functions: the named table, advantage estimators, losses, and the advantage/filter stage of a step."""
