"""Reward functions over an episode's signals, their registry, and the multi-domain mixer."""
