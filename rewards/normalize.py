"""Reward normalisation: standardising scalar rewards per key (a prompt group, the batch) or against running
statistics per domain and tier that persist across steps.

All standardisation is `(r - mean) / (std + eps)` with the population std (ddof = 0), so a standardised set
has mean 0 and std just under 1; a set of one value, or of equal values, maps to zeros.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Hashable, Sequence


def moments(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population variance of a non-empty sequence."""
    assert values, "moments of an empty set"
    mean = sum(values) / len(values)
    return mean, sum((v - mean) ** 2 for v in values) / len(values)


def standardize(values: Sequence[float], keys: Sequence[Hashable], eps: float) -> list[float]:
    """(v - mean_k) / (std_k + eps), with mean and std taken over the values that share v's key k."""
    assert len(values) == len(keys)
    members: dict[Hashable, list[float]] = defaultdict(list)
    for value, key in zip(values, keys):
        members[key].append(value)
    stats = {key: moments(vals) for key, vals in members.items()}
    return [(v - stats[k][0]) / (math.sqrt(stats[k][1]) + eps) for v, k in zip(values, keys)]


@dataclass
class RunningMoments:
    """Mean and variance of a stream under exponentially decayed sample counts."""

    count: float = 0.0
    mean: float = 0.0
    var: float = 0.0

    def update(self, values: Sequence[float], decay: float) -> None:
        """Merge a batch: the history keeps weight decay * count, the batch weight len(values)."""
        batch_mean, batch_var = moments(values)
        old = decay * self.count
        w = len(values) / (old + len(values))
        delta = batch_mean - self.mean
        # Variance of the mixture of the two weighted distributions (history and batch).
        self.var = (1 - w) * self.var + w * batch_var + w * (1 - w) * delta**2
        self.mean += w * delta
        self.count = old + len(values)

    @property
    def std(self) -> float:
        return math.sqrt(self.var)


class DomainNormalizer:
    """Standardises rewards against running moments per domain (and per tier), saved with the checkpoint.

    Each step first merges the step's rewards into their cell's moments, then standardises with the merged
    moments, so the very first step equals per-cell batch normalisation. `decay` sets the memory: 1 weighs
    all history equally, 0 forgets it (pure per-step normalisation); in between, the moments follow a
    policy whose rewards drift, with an effective memory of about 1 / (1 - decay) steps.
    """

    def __init__(self, decay: float = 0.9, by_tier: bool = True, eps: float = 1e-6):
        if not 0.0 <= decay <= 1.0:
            raise ValueError(f"decay must be in [0, 1], got {decay}")
        self.decay, self.by_tier, self.eps = decay, by_tier, eps
        self.cells: dict[str, RunningMoments] = {}

    def cell(self, domain: str, tier: str) -> str:
        """The key of the moments a (domain, tier) episode is standardised against."""
        return f"{domain}/{tier}" if self.by_tier else domain

    def __call__(self, values: Sequence[float], cells: Sequence[str]) -> list[float]:
        """Update each cell with its values, then standardise every value by its cell's moments."""
        members: dict[str, list[float]] = defaultdict(list)
        for value, cell in zip(values, cells):
            members[cell].append(value)
        for cell, vals in members.items():
            self.cells.setdefault(cell, RunningMoments()).update(vals, self.decay)
        return [(v - self.cells[c].mean) / (self.cells[c].std + self.eps) for v, c in zip(values, cells)]

    def state_dict(self) -> dict:
        """Plain, JSON-ready state: every cell's moments (count, mean, var) and how cells are keyed."""
        cells = {key: [m.count, m.mean, m.var] for key, m in self.cells.items()}
        return {"by_tier": self.by_tier, "cells": cells}

    def load_state_dict(self, state: dict) -> None:
        """Restore the moments saved by state_dict; `decay` stays this run's, so it may be retuned on resume."""
        # Cells keyed one way would silently go unused under the other keying, and every cell would restart.
        if state["by_tier"] != self.by_tier:
            raise ValueError(f"saved normaliser has by_tier={state['by_tier']}, this run by_tier={self.by_tier}")
        self.cells = {key: RunningMoments(*values) for key, values in state["cells"].items()}
