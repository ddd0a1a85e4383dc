"""What a family is: a reference package under projects/ plus a seeded test-case generator per module."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from jointrl.envs.swe.case import Case


@dataclass(frozen=True)
class Module:
    """One module of a family's package and the generator of its tests."""

    name: str  # file stem inside the package
    cases: Callable[[random.Random], list[Case]]
    requires: tuple[str, ...] = ()  # sibling modules it imports


@dataclass(frozen=True)
class Family:
    """A package theme: its reference sources, the names the package may take, and its modules in order."""

    name: str  # the env family id and the folder under projects/
    topic: str  # a short noun phrase for issue texts ("the interval helpers")
    package_names: tuple[str, ...]
    modules: tuple[Module, ...]

    def module(self, name: str) -> Module:
        """The module called `name`; an unknown name raises naming the family."""
        for module in self.modules:
            if module.name == name:
                return module
        raise KeyError(f"family {self.name!r} has no module {name!r}")
