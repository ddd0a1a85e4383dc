"""Test envs for the agent loop and the rollout workers, and a debug policy that has learned to use them.

This is a plain module (not a conftest) so that Ray worker processes can import it: a worker calls
`register` through its `env_setup` entry point "tests.rl.agent_envs:register", exactly as a plugin
registers its specs, and then resolves the entry points below by importing this module. The workers
find the `tests` namespace package because the repository root is on their PYTHONPATH (WORKER_RUNTIME_ENV).
"""
from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Callable

import torch

from jointrl.envs import registry
from jointrl.envs.base import Action, Env, EnvSpec, tool
from jointrl.model.chat import render_text
from jointrl.model.presets import PRESETS
from jointrl.model.tokenizer import JointTokenizer, train_tokenizer
from jointrl.model.transformer import Transformer
from jointrl.rl.sft import Conversation, encode, train_sft

WORDS = ["apple", "banana", "cherry", "grape"]
REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_SETUP = f"{__name__}:register"
# What worker actors need to import this module wherever the test run was started from.
WORKER_RUNTIME_ENV = {
    "env_vars": {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)}
}

LOOKUP = "test/lookup-v0:easy"
BROKEN = "test/broken-v0:easy"
SLOW = "test/slow-lookup-v0:easy"  # reset takes a while: keeps a worker busy long enough to kill it mid-chunk
HANG = "test/hang-v0:easy"  # reset blocks far beyond any deadline a test sets
JITTER = "test/jitter-lookup-v0:easy"  # the tool takes a random while: threads finish in no fixed order
# Called at the start of every tool call of this process when set: tests that check what runs beside a tool.
TOOL_HOOK: Callable[[], None] | None = None


class Lookup(Env):
    """Look a word's length up with a tool, then answer it; kwargs reset_delay_s makes reset slow, tool_delay_s
    makes each tool call sleep 0.5-1.5 times that long (a fresh random duration each time)."""

    def _reset(self, seed):
        time.sleep(self.kwargs.get("reset_delay_s", 0.0))
        self.word = WORDS[seed % len(WORDS)]
        return [{"role": "system", "content": "Use the tool."}, {"role": "user", "content": f"Length of {self.word}?"}]

    @tool("length of a word", {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]})
    def length(self, word):
        if TOOL_HOOK is not None:
            TOOL_HOOK()
        time.sleep(self.kwargs.get("tool_delay_s", 0.0) * (0.5 + random.random()))
        return str(len(word))

    def _signals(self):
        return {"success": float(self.final_answer == str(len(self.word)))}

    def _solution(self):
        yield Action("length", {"word": self.word}, reasoning="Ask the tool.")
        yield Action(None, answer=str(len(self.word)), reasoning="Done.")


class Broken(Lookup):
    """An env whose task generator crashes on reset."""

    def _reset(self, seed):
        raise RuntimeError("generator crashed")


SPECS = [
    EnvSpec(id=LOOKUP, entry_point=f"{__name__}:Lookup"),
    EnvSpec(id=BROKEN, entry_point=f"{__name__}:Broken"),
    EnvSpec(id=SLOW, entry_point=f"{__name__}:Lookup", kwargs={"reset_delay_s": 0.6}),
    EnvSpec(id=HANG, entry_point=f"{__name__}:Lookup", kwargs={"reset_delay_s": 3600.0}),
    EnvSpec(id=JITTER, entry_point=f"{__name__}:Lookup", kwargs={"tool_delay_s": 0.05}),
]


def register() -> None:
    """Add the test specs to this process's registry (the driver's, or a worker's through env_setup)."""
    for spec in SPECS:
        registry.register(spec)


def unregister() -> None:
    """Drop the test specs again."""
    for spec in SPECS:
        registry._SPECS.pop(spec.id, None)


def train_lookup_policy() -> tuple[Transformer, JointTokenizer]:
    """A debug model and tokenizer fitted to the lookup demos, so greedy decoding really calls the tool and answers."""
    conversations = []
    for seed in range(len(WORDS)):
        env = Lookup()
        obs = env.reset(seed)
        conversations.append(Conversation(obs.messages + env.demo(), obs.tools, "low"))
    texts = [render_text(c.messages, c.tools, c.tier) for c in conversations]
    tokenizer = train_tokenizer(texts * 20, 512)
    torch.manual_seed(0)
    model = Transformer(PRESETS["debug"].model_copy(update={"index_topk": 8}))
    # Memorise the demonstrations: 8 epochs over 32 copies make greedy decoding copy the word on every seed
    # (at 4 one seed's call came out garbled on some machines, which the black-box tests catch as a new segment).
    examples = encode(tokenizer, conversations, 512) * 8
    train_sft(model, examples, epochs=8, lr=1e-2, batch_size=4, pad_id=tokenizer.pad_id)
    return model.eval(), tokenizer


# What recording_agent's requests got back, in order: the token strings of every answer (logprobs).
SERVED_TOKENS: list[list[str]] = []


def recording_agent(client, model, env, observation, tier):
    """A black-box agent (jointrl.rl.serve.blackbox) that keeps the tokens each answer was made of."""
    messages = list(observation.messages)
    for _ in range(3):
        response = client.chat.completions.create(model=model, messages=messages, tools=observation.tools,
                                                  logprobs=True, extra_body={"thinking_budget": tier})
        SERVED_TOKENS.append([t.token for t in response.choices[0].logprobs.content])
        message = response.choices[0].message
        calls = [{"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                 for c in message.tool_calls or []]
        messages.append({"role": "assistant", "content": message.content or "",
                         "reasoning_content": message.reasoning_content, **({"tool_calls": calls} if calls else {})})
        if not calls:
            return message.content or ""
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": env.step(c).content} for c in calls]
    return ""
