"""The environment contract: specs, tools, observations, and the Env base class every domain extends.

An Env is made once per episode: `reset(seed)` returns the prompt and tools; the agent calls tools with
`step(tool_call)` (OpenAI tool-call dicts, arguments as a JSON string) and ends with `answer(text)` (the
final assistant message's content); `signals()` reports verifiable facts, always including
`success` (1.0 = solved) and `tool_errors`. Every failure of a call — unknown tool, bad JSON, arguments
that break the tool's JSON Schema, a tool that raises or runs past its time limit — comes back as an
error observation the model can read; it is counted, and the episode goes on.

A domain implements `_reset(seed)`, `_signals()`, `_solution()` (the scripted correct play that `demo()`
replays through the real tools), declares tools with the `@tool` decorator on methods, and runs
anything model-written only through `jointrl.envs.sandbox`.
"""
from __future__ import annotations

import functools
import json
import math
import re
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import jsonschema

ENV_ID = re.compile(r"^(?P<domain>[a-z0-9_]+)/(?P<family>[a-z0-9_.-]+)-v(?P<version>\d+):(?P<difficulty>[a-z0-9_]+)$")
TIERS = ("low", "high", "max")
# Seeds from here on are held out: recipes train below it and evaluate above it, and an env whose task space
# is split (by file, by part, by site) draws held-out tasks from its held-out half only for these seeds.
HELD_OUT_START = 1_000_000
SIGNALS_SECONDS = 180.0  # the longest an env's scoring may take before the episode counts as failed
MAX_SIGNALS = 64
# Tool arguments beyond these never reach a tool: a model can write any text, and json.loads recurses.
MAX_ARGUMENT_CHARS = 1 << 20
MAX_ARGUMENT_DEPTH = 32


def parse_env_id(env_id: str) -> dict[str, str]:
    """Split 'domain/family-vN:difficulty' into its parts; a bad id raises naming it."""
    match = ENV_ID.match(env_id)
    if match is None:
        raise ValueError(f"env id {env_id!r} is not of the form 'domain/family-vN:difficulty'")
    return match.groupdict()


@dataclass(frozen=True)
class EnvSpec:
    """How to make one env id: where its class lives and what it is passed."""

    id: str
    entry_point: str  # "module:attr", resolved in the process that makes the env
    kwargs: dict = field(default_factory=dict)
    default_tier: str = "low"
    max_turns: int = 16
    description: str = ""

    def __post_init__(self):
        parse_env_id(self.id)
        if ":" not in self.entry_point:
            raise ValueError(f"{self.id}: entry_point {self.entry_point!r} is not 'module:attr'")
        if self.default_tier not in TIERS:
            raise ValueError(f"{self.id}: default_tier {self.default_tier!r} is not one of {TIERS}")

    @property
    def domain(self) -> str:
        return parse_env_id(self.id)["domain"]

    @property
    def family(self) -> str:
        return parse_env_id(self.id)["family"]

    @property
    def difficulty(self) -> str:
        return parse_env_id(self.id)["difficulty"]


@dataclass
class Observation:
    """What reset gives the agent: the opening messages and the tools it may call."""

    messages: list[dict]
    tools: list[dict]
    metadata: dict = field(default_factory=dict)


@dataclass
class ToolResult:
    """The outcome of one tool call; `error` is set when the call failed (the content then explains it)."""

    content: str
    done: bool = False  # the env considers the episode over (e.g. after a submit tool)
    error: str | None = None


@dataclass
class Action:
    """One step of a scripted solution: a tool call, or the final answer (name None)."""

    name: str | None
    arguments: dict = field(default_factory=dict)
    answer: str = ""  # the final answer's text when name is None
    reasoning: str | None = None  # what the demo's assistant turn thinks before acting


class ToolFailure(Exception):
    """Raised by a tool for a failure the model caused (missing file, bad pattern): shown as an error observation."""


@dataclass
class ToolDef:
    """A tool: its JSON-schema spec and the bound method that runs it."""

    name: str
    description: str
    parameters: dict
    fn: Callable[..., str]
    timeout: float

    def validator(self) -> jsonschema.protocols.Validator:
        """A validator for the arguments; the schema itself is checked once, not on every call."""
        return _validator(json.dumps(self.parameters, sort_keys=True))

    def spec(self) -> dict:
        """The OpenAI function spec shown to the model."""
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


@functools.lru_cache(maxsize=1024)
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def tool(description: str, parameters: dict | None = None, timeout: float = 30.0):
    """Mark an Env method as a tool; `parameters` is the JSON Schema of its keyword arguments."""
    schema = parameters or {"type": "object", "properties": {}}
    schema = {"additionalProperties": False, **schema}

    def mark(fn):
        fn.__tool__ = (description, schema, timeout)
        return fn

    return mark


def argument_problem(value, depth: int = 0) -> str | None:
    """Why tool arguments cannot reach a tool (too deep, a NUL or a lone surrogate in a string), or None."""
    if depth > MAX_ARGUMENT_DEPTH:
        return f"nested deeper than {MAX_ARGUMENT_DEPTH} levels"
    if isinstance(value, str):
        if "\0" in value:
            return "a string holds a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "a string is not valid UTF-8 (a lone surrogate)"
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        problem = (argument_problem(key, depth + 1) if isinstance(key, str) else None) or argument_problem(item, depth + 1)
        if problem is not None:
            return problem
    return None


def bounded(fn: Callable[[], Any], seconds: float, name: str) -> dict:
    """Run fn in a daemon thread for at most `seconds`: {"value": result}, {"error": exception} or {"timeout": True}.

    The thread is left behind on a timeout (Python cannot stop it); what it computes later is dropped.
    """
    outcome: dict = {}

    def target():
        try:
            outcome["value"] = fn()
        except Exception as err:
            outcome["error"] = err

    worker = threading.Thread(target=target, daemon=True, name=name)
    worker.start()
    worker.join(seconds)
    return {"timeout": True} if worker.is_alive() else outcome


class Env(ABC):
    """Base class of every environment: tool dispatch, validation, error accounting, demo replay."""

    spec: EnvSpec | None = None  # set by the registry's make()
    signals_seconds: float = SIGNALS_SECONDS  # a domain whose scoring is slow by design may raise it
    signals_error: str | None = None  # why the last scoring failed, when it did
    # k when the task is an explicit k-way choice (yes/no, one of k named options): the audit then allows
    # a shortcut 1/k + 5% instead of 5%, and the family must balance its answers over the k choices.
    answer_choices: int | None = None

    def __init__(self, difficulty: str = "easy", **kwargs: Any):
        self.difficulty = difficulty
        self.kwargs = kwargs
        self.seed: int | None = None
        self.tool_errors = 0
        self.tool_calls = 0
        self.final_answer: str | None = None
        self.opening: list[dict] | None = None  # the messages reset() gave, for task_key
        self._tools = {d.name: d for d in self._collect_tools()}

    def _collect_tools(self) -> Iterator[ToolDef]:
        for name in dir(type(self)):
            fn = getattr(type(self), name)
            if callable(fn) and hasattr(fn, "__tool__"):
                description, schema, timeout = fn.__tool__
                yield ToolDef(name, description, schema, getattr(self, name), timeout)

    # The contract.

    def reset(self, seed: int) -> Observation:
        """Start the episode for `seed`; the same seed always gives the same task."""
        self.seed = seed
        self.tool_errors = 0
        self.tool_calls = 0
        self.final_answer = None
        messages = self._reset(seed)
        self.opening = messages
        return Observation(messages=messages, tools=self.tool_specs(), metadata={"env_id": self.spec.id if self.spec else None})

    def task_key(self) -> str:
        """What identifies this seed's task for the audit's held-out overlap (default: the opening messages).

        A domain whose prompts differ while the task repeats (the same bug in the same file, the same part)
        overrides it with what repeats."""
        return json.dumps(self.opening, sort_keys=True, ensure_ascii=False)

    def tool_specs(self) -> list[dict]:
        """JSON-schema specs of this env's tools, sorted by name."""
        return [self._tools[name].spec() for name in sorted(self._tools)]

    def step(self, tool_call: dict) -> ToolResult:
        """Run one OpenAI-format tool call; any failure becomes an error observation, never an exception."""
        self.tool_calls += 1
        function = tool_call.get("function") if isinstance(tool_call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or name not in self._tools:
            known = ", ".join(sorted(self._tools)) or "none"
            return self._error(f"unknown tool {name!r}; available tools: {known}")
        raw = function.get("arguments", "{}")
        if isinstance(raw, str) and len(raw) > MAX_ARGUMENT_CHARS:
            return self._error(f"arguments of {name} are {len(raw)} characters long; the limit is {MAX_ARGUMENT_CHARS}")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError as err:
            return self._error(f"arguments of {name} are not valid JSON ({err.msg} at position {err.pos})")
        except RecursionError:
            return self._error(f"arguments of {name} are nested too deeply to read")
        problem = argument_problem(arguments)
        if problem is not None:
            return self._error(f"bad arguments for {name}: {problem}")
        definition = self._tools[name]
        try:
            definition.validator().validate(arguments)
        except jsonschema.ValidationError as err:
            where = "/".join(str(p) for p in err.absolute_path) or "arguments"
            return self._error(f"bad arguments for {name}: {where}: {err.message}")
        return self._run(definition, arguments)

    def reject_call(self, problem: str) -> ToolResult:
        """A tool call too malformed to reach `step` (the chat parser could not read it): counted, explained."""
        self.tool_calls += 1
        return self._error(f"malformed tool call: {problem}")

    def answer(self, text: str) -> None:
        """Record the final answer (the last assistant message's content when it calls no tool)."""
        self.final_answer = text

    def signals(self) -> dict[str, float]:
        """Verifiable facts about the episode; always has `success` and `tool_errors`.

        Bounded whatever the episode left behind: scoring that runs past SIGNALS_SECONDS (or fails) scores
        the episode as failed (`signals_failed` 1) instead of holding the worker, and at most MAX_SIGNALS
        finite float signals are kept.
        """
        # A scoring bug, or a workspace scoring cannot read, fails the episode rather than the worker.
        outcome = bounded(self._signals, self.signals_seconds, "signals")
        raw = outcome.get("value")
        if not isinstance(raw, dict):
            err = outcome.get("error")
            self.signals_error = (f"{type(err).__name__}: {err}" if err is not None
                                  else f"scoring did not finish within {self.signals_seconds:g}s")
            raw = {"success": 0.0, "signals_failed": 1.0}
        out = {}
        for key, value in list(raw.items())[:MAX_SIGNALS]:
            if isinstance(key, str) and isinstance(value, (int, float)) and math.isfinite(value):
                out[key] = float(value)
        out.setdefault("success", 0.0)
        out["tool_errors"] = float(self.tool_errors)
        out["tool_calls"] = float(self.tool_calls)
        return out

    def demo(self) -> list[dict]:
        """Play the scripted solution through the real tools; return its assistant and tool messages."""
        messages: list[dict] = []
        for i, action in enumerate(self._solution()):
            message: dict = {"role": "assistant", "content": None}
            if action.reasoning is not None:
                message["reasoning_content"] = action.reasoning
            if action.name is None:
                message["content"] = action.answer
                messages.append(message)
                self.answer(action.answer)
                break
            call_id = "call_0"
            arguments = json.dumps(action.arguments, ensure_ascii=False)
            message["tool_calls"] = [{"id": call_id, "type": "function", "function": {"name": action.name, "arguments": arguments}}]
            messages.append(message)
            result = self.step(message["tool_calls"][0])
            messages.append({"role": "tool", "tool_call_id": call_id, "content": result.content})
            if result.error is not None:
                raise RuntimeError(f"{self.spec.id if self.spec else type(self).__name__}: demo step {i} failed: {result.error}")
        return messages

    def close(self) -> None:
        """Release whatever the episode holds (workspaces, processes); safe to call twice."""

    # What a domain implements.

    @abstractmethod
    def _reset(self, seed: int) -> list[dict]:
        """Build the task for `seed`; return the opening messages (system and user)."""

    @abstractmethod
    def _signals(self) -> dict[str, float]:
        """The domain's verifiable facts, `success` among them, checked independently of the workspace."""

    @abstractmethod
    def _solution(self) -> Iterator[Action]:
        """The scripted correct play for the current task, ending with a final-answer Action."""

    # Internals.

    def _error(self, message: str) -> ToolResult:
        self.tool_errors += 1
        return ToolResult(content=f"error: {message}", error=message)

    def _run(self, definition: ToolDef, arguments: dict) -> ToolResult:
        # In-process tools are the env's own code; a thread bounds one that blocks or loops in Python without
        # needing the main thread. It cannot interrupt a C call holding the GIL (a catastrophic regex), so
        # tools screen such inputs themselves. Model-written code never runs here: it goes to the sandbox.
        outcome = bounded(lambda: definition.fn(**arguments), definition.timeout, f"tool-{definition.name}")
        if "timeout" in outcome:
            return self._error(f"{definition.name} did not finish within {definition.timeout:g}s")
        if "error" in outcome:
            err = outcome["error"]
            # A ToolFailure is the tool's own message; any other exception is a tool bug, which still must not
            # end the episode.
            if isinstance(err, ToolFailure):
                return self._error(str(err))
            return self._error(f"{definition.name} raised {type(err).__name__}: {err}")
        value = outcome["value"]
        if isinstance(value, ToolResult):
            if value.error is not None:
                self.tool_errors += 1
            return value
        return ToolResult(content=str(value))
