"""One injected bug of a swe task: the record the task builder fills and the issue writer reads."""
from __future__ import annotations

from dataclasses import dataclass

from jointrl.envs.swe import probe
from jointrl.envs.swe.mutation import Mutation
from jointrl.envs.swe.project import Test


@dataclass(frozen=True)
class Bug:
    """One injected bug: where, what, the edit that fixes it, and a failing test that shows it."""

    module: str
    mutation: Mutation
    fix_old: str  # text in the buggy file, unique there
    fix_new: str  # its reference text
    example: Test
    actual: probe.Outcome  # what the example gives with the bug(s) in place
