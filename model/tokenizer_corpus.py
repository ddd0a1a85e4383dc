"""The tokenizer's default training text: Python standard-library sources plus seeded synthetic agent chats.

The code is a fixed list of standard-library modules, not the project's own sources: with those, every edit to any
file of the project changed the trained tokenizer (ids shift, so the initial embedding of each token does too) and
with it every cold start and learning figure, so measurements made at two commits were not comparable.
"""
from __future__ import annotations

import json
import random
import sysconfig
from pathlib import Path
from typing import Iterator

from jointrl.model import chat

# About 1.8 MB of everyday Python (CLI, files, text, data formats, networking, tests) that every CPython 3.11+ ships.
STDLIB_MODULES = (
    "argparse", "ast", "collections/__init__", "configparser", "csv", "dataclasses", "datetime", "difflib",
    "email/message", "enum", "fnmatch", "fractions", "functools", "glob", "gzip", "heapq", "http/client", "inspect",
    "json/__init__", "json/decoder", "json/encoder", "logging/__init__", "pathlib", "shutil", "sqlite3/__init__",
    "statistics", "string", "subprocess", "tarfile", "tempfile", "textwrap", "tokenize", "typing", "unittest/case",
    "urllib/parse", "zipfile",
)

_WORDS = (
    "the a an of to in on for with from by and or not is are was be can will should must this that these it "
    "file files directory path test tests error errors value values number numbers list item items result "
    "output input command run running build install check find search read write open close update fix bug "
    "function class method module package import return true false none null data table row column sheet "
    "document page link query answer question step steps first next last then because so if when while "
    "model token tokens expert experts layer reward episode agent tool tools call calls shell script log "
    "line lines count total sum mean size length time seconds bytes memory config option setting name "
    "user system assistant please thanks here there now done failed passed works need want try again "
    "café naïve über données größe señal 数据 文件 テスト ошибка файл → ✓ ≤ ≥ ± µs °C €"
).split()
_COMMANDS = (
    "ls -la", "pwd", "cat {f}", "head -n {n} {f}", "tail -n {n} {f}", "grep -rn '{w}' .", "wc -l {f}",
    "python {f}", "python -m pytest -q -x", "pip list", "git status", "git diff --stat", "find . -name '*.py'",
    "echo \"{w} {n}\" > {f}", "sed -n '{n},{m}p' {f}", "mkdir -p {w}/{w}", "du -sh {w}", "sort {f} | uniq -c",
)
_DIRS = ("src", "tests", "data", "docs", "lib", "app", "scripts", "config")
_EXTS = (".py", ".txt", ".json", ".md", ".csv", ".yaml", ".sh", ".toml")
_TOOLS = [
    {"type": "function", "function": {
        "name": "bash", "description": "Run a shell command in the sandbox and return its output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The command."}},
                       "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a text file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"},
                                                        "start": {"type": "integer", "minimum": 1}},
                       "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "write_file", "description": "Write text to a file, replacing it.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
                       "required": ["path", "text"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the document index.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                        "k": {"type": "integer", "default": 5}},
                       "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "python", "description": "Evaluate Python code and return stdout.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}},
    {"type": "function", "function": {
        "name": "submit", "description": "Submit the final answer.",
        "parameters": {"type": "object", "properties": {"answer": {"type": ["string", "number"]}},
                       "required": ["answer"]}}},
]


def code_sources() -> Iterator[str]:
    """The text of each module in STDLIB_MODULES, from this interpreter's standard library, in list order."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for name in STDLIB_MODULES:
        path = stdlib / f"{name}.py"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the tokenizer corpus needs this standard-library module")
        yield path.read_text(encoding="utf-8", errors="replace")


class _Synth:
    """Draws the parts of a synthetic chat from one seeded generator."""

    def __init__(self, seed: int, code_lines: list[str]):
        self.rng = random.Random(seed)
        self.code_lines = code_lines

    def sentence(self, lo: int = 4, hi: int = 16) -> str:
        words = self.rng.choices(_WORDS, k=self.rng.randint(lo, hi))
        if self.rng.random() < 0.3:
            words.insert(self.rng.randrange(len(words)), str(self.number()))
        text = " ".join(words)
        return text[0].upper() + text[1:] + self.rng.choice(".?!:")

    def prose(self, lo: int = 1, hi: int = 4) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(lo, hi)))

    def number(self) -> int | float:
        roll = self.rng.random()
        if roll < 0.5:
            return self.rng.randint(0, 100)
        if roll < 0.8:
            return self.rng.randint(0, 10**self.rng.randint(3, 9))
        return round(self.rng.uniform(-1000, 1000), self.rng.randint(1, 4))

    def path(self) -> str:
        parts = [self.rng.choice(_DIRS)] + self.rng.choices(_WORDS, k=self.rng.randint(0, 2))
        return "/".join(parts) + self.rng.choice(_EXTS)

    def command(self) -> str:
        n = self.rng.randint(1, 200)
        return self.rng.choice(_COMMANDS).format(f=self.path(), n=n, m=n + self.rng.randint(1, 50),
                                                 w=self.rng.choice(_WORDS))

    def code(self) -> str:
        if not self.code_lines:
            return "print(" + repr(self.sentence()) + ")"
        start = self.rng.randrange(len(self.code_lines))
        return "\n".join(self.code_lines[start:start + self.rng.randint(2, 12)])

    def arguments(self, name: str) -> dict:
        return {
            "bash": lambda: {"command": self.command()},
            "read_file": lambda: {"path": self.path(), "start": self.rng.randint(1, 300)},
            "write_file": lambda: {"path": self.path(), "text": self.code()},
            "search": lambda: {"query": " ".join(self.rng.choices(_WORDS, k=3)), "k": self.rng.randint(1, 10)},
            "python": lambda: {"code": self.code()},
            "submit": lambda: {"answer": self.number() if self.rng.random() < 0.5 else self.sentence()},
        }[name]()

    def result(self, name: str, arguments: dict) -> str:
        if name == "bash":
            lines = [f"{self.rng.choice(('-rw-r--r--', 'drwxr-xr-x'))} {self.rng.randint(0, 99999):>6} {self.path()}"
                     for _ in range(self.rng.randint(1, 6))]
            if self.rng.random() < 0.6:
                return "\n".join(lines)
            return f"exit code {self.rng.randint(0, 2)}\n" + self.prose()
        if name == "search":
            hits = [{"title": self.sentence(2, 6), "score": round(self.rng.random(), 3)} for _ in range(arguments["k"])]
            return json.dumps(hits, ensure_ascii=False)
        if name == "write_file":
            return f"wrote {len(arguments['text'])} bytes to {arguments['path']}"
        return self.code() if name in ("read_file", "python") else "accepted"


def synthetic_chat(seed: int, code_lines: list[str] | None = None) -> tuple[list[dict], list[dict] | None, str | None]:
    """One seeded agent conversation (messages, tools, tier) with reasoning, tool calls and results."""
    s = _Synth(seed, code_lines or [])
    tools = s.rng.sample(_TOOLS, s.rng.randint(1, len(_TOOLS))) if s.rng.random() < 0.9 else None
    messages: list[dict] = []
    if s.rng.random() < 0.8:
        messages.append({"role": "system", "content": "You are an agent. " + s.prose()})
    messages.append({"role": "user", "content": s.prose(1, 3)})
    for _ in range(s.rng.randint(0, 4) if tools else 0):
        calls = []
        for _ in range(s.rng.randint(1, 2)):
            name = s.rng.choice(tools)["function"]["name"]
            calls.append((name, s.arguments(name)))
        messages.append({
            "role": "assistant", "content": s.sentence() if s.rng.random() < 0.3 else None,
            "reasoning_content": s.prose(1, 5),
            "tool_calls": [{"id": f"call_{k}", "type": "function",
                            "function": {"name": n, "arguments": json.dumps(a, ensure_ascii=False)}}
                           for k, (n, a) in enumerate(calls)],
        })
        for k, (name, arguments) in enumerate(calls):
            messages.append({"role": "tool", "tool_call_id": f"call_{k}", "content": s.result(name, arguments)})
    messages.append({"role": "assistant", "reasoning_content": s.prose(1, 6), "content": s.prose(1, 3)})
    tier = s.rng.choice([None, *chat.TIER_TOKENS])
    return messages, tools, tier


def default_corpus(seed: int = 0, n_chats: int = 2000) -> Iterator[str]:
    """Standard-library sources, then ``n_chats`` rendered synthetic chats; the same seed gives the same texts."""
    sources = list(code_sources())
    yield from sources
    code_lines = [line for text in sources for line in text.splitlines()]
    for i in range(n_chats):
        messages, tools, tier = synthetic_chat(seed * 1_000_003 + i, code_lines)
        yield chat.render_text(messages, tools, tier)
