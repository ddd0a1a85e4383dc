"""The registry and the env base class: ids, lookup, lazy entry points, plugins, tool-call failures."""
import json
import subprocess
import sys
import textwrap
import time

import pytest

from jointrl.envs import registry
from jointrl.envs.base import Action, Env, EnvSpec, ToolFailure, parse_env_id, tool


class Counter(Env):
    """Count the letter the prompt names; tools exercise every failure path of `step`."""

    def _reset(self, seed):
        self.text = "abracadabra"[: 5 + seed % 7]
        return [{"role": "user", "content": f"How many 'a' in {self.text!r}?"}]

    @tool("count a letter", {"type": "object", "properties": {"letter": {"type": "string", "maxLength": 1}}, "required": ["letter"]})
    def count(self, letter):
        return str(self.text.count(letter))

    @tool("fails on purpose", timeout=0.5)
    def broken(self):
        raise ToolFailure("the disk is on fire")

    @tool("raises a bug", timeout=0.5)
    def buggy(self):
        return 1 / 0

    @tool("never returns in time", timeout=0.2)
    def slow(self):
        time.sleep(2)
        return "late"

    def _signals(self):
        return {"success": float(self.final_answer == str(self.text.count("a")))}

    def _solution(self):
        yield Action("count", {"letter": "a"}, reasoning="Count it.")
        yield Action(None, answer=str(self.text.count("a")))


@pytest.fixture
def counter_id():
    spec = registry.register(EnvSpec(id="test/counter-v0:easy", entry_point=f"{__name__}:Counter"))
    yield spec.id
    registry._SPECS.pop(spec.id)


def call(name, arguments):
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": "c0", "type": "function", "function": {"name": name, "arguments": raw}}


def test_env_id_parts_and_bad_ids():
    assert parse_env_id("swe/fix-bug-v2:hard") == {"domain": "swe", "family": "fix-bug", "version": "2", "difficulty": "hard"}
    for bad in ("swe/fix", "swe/fix-v1", "Swe/fix-v1:hard", "swe/fix-v1:"):
        with pytest.raises(ValueError, match="domain/family-vN:difficulty"):
            parse_env_id(bad)


def test_make_resolves_the_entry_point_and_demo_solves(counter_id):
    env = registry.make(counter_id)
    assert env.spec.id == counter_id and env.difficulty == "easy"
    obs = env.reset(3)
    assert [t["function"]["name"] for t in obs.tools] == ["broken", "buggy", "count", "slow"]
    transcript = env.demo()
    # abracadab has four a's: the demo's tool result and final answer both say so.
    assert transcript[1] == {"role": "tool", "tool_call_id": "call_0", "content": "4"}
    assert transcript[-1]["content"] == "4"
    assert env.signals() == {"success": 1.0, "tool_errors": 0.0, "tool_calls": 1.0}


def test_every_failed_call_is_an_error_observation_and_counted(counter_id):
    env = registry.make(counter_id)
    env.reset(0)
    failures = [
        (call("nope", {}), "unknown tool 'nope'"),
        (call("count", "{letter"), "not valid JSON"),
        (call("count", {}), "'letter' is a required property"),
        (call("count", {"letter": "ab"}), "too long"),
        (call("count", {"letter": "a", "extra": 1}), "Additional properties"),
        (call("broken", {}), "the disk is on fire"),
        (call("buggy", {}), "ZeroDivisionError"),
        (call("slow", {}), "did not finish within 0.2s"),
        ({"function": "garbage"}, "unknown tool None"),
    ]
    for tool_call, fragment in failures:
        result = env.step(tool_call)
        assert result.error is not None and fragment in result.content, (tool_call, result.content)
    # The episode goes on: a good call still works after all that.
    assert env.step(call("count", {"letter": "a"})).content == "2"
    assert env.signals()["tool_errors"] == len(failures)
    assert env.signals()["tool_calls"] == len(failures) + 1


def test_unknown_id_names_close_matches(counter_id):
    with pytest.raises(KeyError, match="did you mean test/counter-v0:easy"):
        registry.spec("test/countr-v0:easy")


def test_glob_selection_and_duplicate_registration(counter_id):
    assert counter_id in registry.env_ids("test/*:easy")
    assert counter_id not in registry.env_ids("test/*:hard")
    registry.register(EnvSpec(id=counter_id, entry_point=f"{__name__}:Counter"))  # identical: fine
    with pytest.raises(ValueError, match="already registered"):
        registry.register(EnvSpec(id=counter_id, entry_point="elsewhere:Counter"))


def test_bad_entry_point_is_reported_when_made():
    spec = registry.register(EnvSpec(id="test/missing-v0:easy", entry_point="jointrl.envs.no_such_module:Env"))
    try:
        with pytest.raises(ValueError, match="cannot be loaded"):
            registry.make(spec.id)
    finally:
        registry._SPECS.pop(spec.id)


def test_a_plugin_package_is_listed_and_made_in_a_fresh_process(tmp_path):
    """A throwaway package declaring a `jointrl.envs` entry point, found by a process that never saw it."""
    (tmp_path / "echo_plugin.py").write_text(textwrap.dedent('''
        from jointrl.envs.base import Action, Env, EnvSpec
        from jointrl.envs.registry import register

        class Echo(Env):
            def _reset(self, seed):
                self.word = f"w{seed}"
                return [{"role": "user", "content": f"Say {self.word}."}]
            def _signals(self):
                return {"success": float(self.final_answer == self.word)}
            def _solution(self):
                yield Action(None, answer=self.word)

        def register_envs():
            for level in ("easy", "hard"):
                register(EnvSpec(id=f"plugin/echo-v0:{level}", entry_point="echo_plugin:Echo"))
    '''))
    dist = tmp_path / "echo_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[jointrl.envs]\necho = echo_plugin:register_envs\n")
    script = textwrap.dedent('''
        from jointrl.envs import registry
        print(registry.env_ids("plugin/*"))
        env = registry.make("plugin/echo-v0:hard")
        env.reset(7)
        env.demo()
        print(env.signals()["success"])
    ''')
    out = subprocess.run([sys.executable, "-c", script], env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["['plugin/echo-v0:easy', 'plugin/echo-v0:hard']", "1.0"]


def test_threads_making_envs_in_a_fresh_process_all_see_the_whole_registry():
    """The first lookups race the built-ins' registration: each thread must wait for it, not see a partial registry."""
    script = textwrap.dedent('''
        from concurrent.futures import ThreadPoolExecutor
        from jointrl.envs import registry
        ids = ["terminal/text-count-v0:easy", "reasoning/syllogism-v0:default", "office/argmax-v0:easy"] * 4
        with ThreadPoolExecutor(len(ids)) as pool:
            made = list(pool.map(lambda env_id: registry.make(env_id).spec.id, ids))
        print(made == ids)
    ''')
    for _ in range(3):  # the old registry failed this on the first try
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "True"
