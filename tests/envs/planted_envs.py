"""Envs planted for the audit's tests: one a constant answer solves, one whose held-out tasks are its train
tasks, one whose prompt changes with the string-hash seed, and an honest one. `register` adds them (the
audit's determinism check runs it in its fresh processes as "tests.envs.planted_envs:register")."""
import random

from jointrl.envs import registry
from jointrl.envs.base import Action, Env, EnvSpec, tool

IDS = ("test/constant-v0:easy", "test/memorised-v0:easy", "test/unstable-v0:easy", "test/honest-v0:easy")


class _Answered(Env):
    """Success is the exact answer; the demo answers it without tools unless a subclass says otherwise."""

    def _gold(self, seed: int) -> str:
        raise NotImplementedError

    def _reset(self, seed):
        self.gold = self._gold(seed)
        return [{"role": "user", "content": self.question}]

    def _signals(self):
        return {"success": float((self.final_answer or "").strip() == self.gold)}

    def _solution(self):
        yield Action(None, answer=self.gold)


class Constant(_Answered):
    def _gold(self, seed):
        self.question = f"Task {seed}: answer 2 if {seed} is a multiple of 10, else 1."
        return "2" if seed % 10 == 0 else "1"


class Memorised(_Answered):
    def _gold(self, seed):
        k = seed % 3 + 1
        self.question = f"What is {k} times 7?"
        return str(7 * k)


class Unstable(_Answered):
    def _gold(self, seed):
        self.question = f"Task {seed} (salt {hash('salt') % 1000}): say ok."
        return "ok"


class Honest(_Answered):
    @tool("add two integers", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                               "required": ["a", "b"]})
    def add(self, a, b):
        return str(a + b)

    def _gold(self, seed):
        rng = random.Random(seed)
        self.a, self.b = rng.randrange(10**9), rng.randrange(10**9)
        self.question = f"Use the add tool: what is {self.a} + {self.b}?"
        return str(self.a + self.b)

    def _solution(self):
        yield Action("add", {"a": self.a, "b": self.b})
        yield Action(None, answer=self.gold)


def register() -> None:
    for env_id, cls in zip(IDS, ("Constant", "Memorised", "Unstable", "Honest")):
        if env_id not in registry.env_ids("test/*"):
            registry.register(EnvSpec(id=env_id, entry_point=f"tests.envs.planted_envs:{cls}"))


def unregister() -> None:
    """Drop the planted specs again."""
    for env_id in IDS:
        registry._SPECS.pop(env_id, None)
