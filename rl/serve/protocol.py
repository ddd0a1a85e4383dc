"""The OpenAI chat-completions request as the server accepts it, checked before anything reaches the engine.

Every problem is an `ApiError` carrying the HTTP status and an OpenAI-style body
(`{"error": {"message", "type", "param", "code"}}`), so a client's own error handling reads it. Parameters the
server cannot honour (top_logprobs, penalties) are refused by name rather than ignored.
"""
from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

TIERS = ("low", "high", "max")
# OpenAI's reasoning_effort, for clients that only know that knob.
EFFORT_TIERS = {"minimal": "low", "low": "low", "medium": "high", "high": "max"}
MAX_CHOICES = 16
MAX_STOPS = 4


class ApiError(Exception):
    """A request the server refuses: HTTP status and an OpenAI-style error body."""

    def __init__(self, message: str, param: str | None = None, status: int = 400,
                 kind: str = "invalid_request_error", code: str | None = None):
        super().__init__(message)
        self.status, self.param, self.kind, self.code = status, param, kind, code

    def body(self) -> dict:
        """The JSON body of the error response."""
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.code}}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    include_usage: bool = False


class ChatRequest(BaseModel):
    """The body of POST /v1/chat/completions."""

    model_config = ConfigDict(extra="forbid")

    model: str
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    thinking_budget: str | int | None = None
    reasoning_effort: str | None = None
    temperature: float = Field(1.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    n: int = Field(1, ge=1, le=MAX_CHOICES)
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=0)
    frequency_penalty: float = Field(0.0, ge=0, le=0)
    presence_penalty: float = Field(0.0, ge=0, le=0)
    parallel_tool_calls: bool | None = None  # several calls per turn are always allowed
    user: str | None = None
    metadata: dict[str, Any] | None = None
    store: bool | None = None


def parse_request(body: Any) -> ChatRequest:
    """The request validated field by field; the first problem becomes an ApiError naming the parameter."""
    if not isinstance(body, dict):
        raise ApiError("the request body must be a JSON object")
    try:
        request = ChatRequest.model_validate(body)
    except ValidationError as err:
        first = err.errors()[0]
        param = ".".join(str(p) for p in first["loc"])
        if first["type"] == "extra_forbidden":
            raise ApiError(f"unrecognised request argument: {param}", param) from None
        if param in ("top_logprobs", "frequency_penalty", "presence_penalty"):
            raise ApiError(f"{param}={first.get('input')!r} is not supported (only 0)", param) from None
        raise ApiError(f"{param}: {first['msg']} (got {first.get('input')!r})", param) from None
    request.messages = [_message(m, i) for i, m in enumerate(request.messages)]
    _check_tool_results(request.messages)
    if request.tools is not None:
        for i, tool in enumerate(request.tools):
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise ApiError(f"tools[{i}] must be {{'type': 'function', 'function': {{'name': ..., ...}}}}",
                               f"tools[{i}]")
    if isinstance(request.stop, list) and len(request.stop) > MAX_STOPS:
        raise ApiError(f"stop: at most {MAX_STOPS} sequences, got {len(request.stop)}", "stop")
    return request


def _text(content: Any, where: str) -> str | None:
    """A message's content as text: a string, None, or a list of text parts joined."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for k, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ApiError(f"{where}.content[{k}]: only text parts are supported", f"{where}.content")
            parts.append(part["text"])
        return "".join(parts)
    raise ApiError(f"{where}.content must be a string or a list of text parts", f"{where}.content")


def _message(message: Any, index: int) -> dict:
    """One message normalised to the chat format's fields, or an ApiError naming what is wrong."""
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise ApiError(f"{where} must be an object", where)
    role = message.get("role")
    if role == "developer":  # OpenAI's newer name for the system role
        role = "system"
    if role not in ("system", "user", "assistant", "tool"):
        raise ApiError(f"{where}.role {role!r} is not one of system, developer, user, assistant, tool", f"{where}.role")
    out: dict[str, Any] = {"role": role, "content": _text(message.get("content"), where)}
    if role in ("system", "user") and out["content"] is None:
        raise ApiError(f"{where}: a {role} message needs content", f"{where}.content")
    if role == "tool":
        if not isinstance(message.get("tool_call_id"), str):
            raise ApiError(f"{where}: a tool message needs a tool_call_id", f"{where}.tool_call_id")
        out["tool_call_id"] = message["tool_call_id"]
    if role == "assistant":
        reasoning = message.get("reasoning_content")
        if reasoning is not None and not isinstance(reasoning, str):
            raise ApiError(f"{where}.reasoning_content must be a string", f"{where}.reasoning_content")
        if reasoning is not None:
            out["reasoning_content"] = reasoning
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise ApiError(f"{where}.tool_calls must be a list", f"{where}.tool_calls")
        out["tool_calls"] = [_call(c, f"{where}.tool_calls[{k}]") for k, c in enumerate(calls)]
        if not out["tool_calls"]:
            del out["tool_calls"]
    return out


def _call(call: Any, where: str) -> dict:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not isinstance(call.get("id"), str):
        raise ApiError(f"{where} must be {{'id': ..., 'type': 'function', 'function': {{'name', 'arguments'}}}}", where)
    arguments = function.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    try:
        json.loads(arguments)
    except json.JSONDecodeError:
        raise ApiError(f"{where}.function.arguments is not valid JSON: {arguments[:80]!r}", where) from None
    return {"id": call["id"], "type": "function", "function": {"name": function["name"], "arguments": arguments}}


def _check_tool_results(messages: list[dict]) -> None:
    """Every tool call is answered by a tool message before the conversation moves on, and no result is orphaned."""
    open_ids: dict[str, int] = {}
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            if message["tool_call_id"] not in open_ids:
                raise ApiError(f"messages[{index}]: tool_call_id {message['tool_call_id']!r} answers no open tool call",
                               f"messages[{index}].tool_call_id")
            del open_ids[message["tool_call_id"]]
            continue
        if open_ids:
            call_id, at = next(iter(open_ids.items()))
            raise ApiError(f"messages[{at}]: tool call {call_id!r} has no tool result before messages[{index}]",
                           f"messages[{at}].tool_calls")
        for call in message.get("tool_calls", []):
            open_ids[call["id"]] = index
    if open_ids:
        call_id, at = next(iter(open_ids.items()))
        raise ApiError(f"messages[{at}]: tool call {call_id!r} has no tool result", f"messages[{at}].tool_calls")


def tier_and_budget(request: ChatRequest, budgets: dict[str, int], default_tier: str) -> tuple[str, int]:
    """The tier token the prompt carries and the thinking tokens the turn may spend."""
    if request.thinking_budget is not None and request.reasoning_effort is not None:
        raise ApiError("give thinking_budget or reasoning_effort, not both", "thinking_budget")
    value = request.thinking_budget
    if request.reasoning_effort is not None:
        if request.reasoning_effort not in EFFORT_TIERS:
            raise ApiError(f"reasoning_effort {request.reasoning_effort!r} is not one of {', '.join(EFFORT_TIERS)}",
                           "reasoning_effort")
        value = EFFORT_TIERS[request.reasoning_effort]
    if value is None:
        return default_tier, budgets[default_tier]
    if isinstance(value, str):
        if value not in TIERS:
            raise ApiError(f"thinking_budget {value!r} is not low, high, max or a token count", "thinking_budget")
        return value, budgets[value]
    if value < 0:
        raise ApiError(f"thinking_budget must be >= 0, got {value}", "thinking_budget")
    # A count is spoken to the model as the smallest tier that allows it, and enforced exactly.
    tier = next((t for t in TIERS if budgets[t] >= value), "max")
    return tier, value


ToolChoice = str  # "auto" | "none" | "required" | "function:<name>"


def tool_choice(request: ChatRequest) -> ToolChoice:
    """The tool_choice as one of the modes the engine enforces ("function:<name>" for a named function)."""
    choice = request.tool_choice
    if choice is None:
        return "auto"
    if choice in ("auto", "none", "required"):
        if choice == "required" and not request.tools:
            raise ApiError("tool_choice 'required' needs tools", "tool_choice")
        return choice
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or choice.get("type") != "function" or not isinstance(name, str):
        raise ApiError(f"tool_choice {choice!r} is not auto, none, required or "
                       "{'type': 'function', 'function': {'name': ...}}", "tool_choice")
    if name not in [t["function"]["name"] for t in request.tools or []]:
        raise ApiError(f"tool_choice names {name!r}, which is not among the request's tools", "tool_choice")
    return f"function:{name}"


def stops(request: ChatRequest) -> list[str]:
    """The stop sequences as a list (empty strings dropped)."""
    values = [request.stop] if isinstance(request.stop, str) else (request.stop or [])
    return [s for s in values if s]
