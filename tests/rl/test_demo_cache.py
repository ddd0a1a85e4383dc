"""Played demonstrations kept on disk: read back only for the code that played them, the same as played afresh."""
from __future__ import annotations

import dataclasses

import pytest

from jointrl.rl import demo_cache, demos
from jointrl.rl.rollout.tiers import TierSelector
from jointrl.rl.sft import Conversation

ENV = "terminal/text-count-v0:easy"


def _never_played(*job):
    raise AssertionError(f"demo {job} was played again instead of read from the cache")


def test_cached_demos_equal_those_played_afresh_and_are_not_played_again(tmp_path, monkeypatch):
    both = TierSelector(mode="ratios", ratios={"low": 1.0, "max": 1.0})
    fresh = demos.collect_demos([ENV], list(range(6)), both)
    assert {c.tier for c in fresh} == {"low", "max"}  # the tier is part of what is cached
    first = demos.collect_demos([ENV], list(range(6)), both, tmp_path)
    assert [dataclasses.asdict(c) for c in first] == [dataclasses.asdict(c) for c in fresh]
    monkeypatch.setattr(demos, "play_demo", _never_played)
    again = demos.collect_demos([ENV], list(range(6)), both, tmp_path)
    assert [dataclasses.asdict(c) for c in again] == [dataclasses.asdict(c) for c in fresh]


def test_only_missing_demos_are_played_and_unsolved_ones_stay_dropped(tmp_path, monkeypatch):
    played = []

    def fake_play(env_id, seed, tier=None):
        played.append(seed)
        return Conversation([{"role": "user", "content": str(seed)}], None, tier, source=env_id), {
            "success": 0.0 if seed == 2 else 1.0}

    monkeypatch.setattr(demos, "play_demo", fake_play)
    assert [c.messages[0]["content"] for c in demos.collect_demos([ENV], [0, 1, 2], cache=tmp_path)] == ["0", "1"]
    got = demos.collect_demos([ENV], [1, 2, 3, 4], cache=tmp_path)
    assert [c.messages[0]["content"] for c in got] == ["1", "3", "4"]
    assert played == [0, 1, 2, 3, 4]  # seeds 1 and 2 were read back, 2 still unsolved
    # The same seed in another tier is another demonstration.
    demos.collect_demos([ENV], [1], TierSelector(mode="fixed", fixed={"*": "max"}), tmp_path)
    assert played[-1] == 1


def test_demos_played_by_other_code_are_not_read(tmp_path, monkeypatch):
    demos.collect_demos([ENV], [0, 1], cache=tmp_path)
    monkeypatch.setattr(demo_cache, "fingerprint", lambda env_id: "other-code")
    played = []
    monkeypatch.setattr(demos, "play_demo", lambda env_id, seed, tier=None: (
        played.append(seed) or Conversation([{"role": "user", "content": "x"}], None, tier, source=env_id),
        {"success": 1.0}))
    demos.collect_demos([ENV], [0, 1], cache=tmp_path)
    assert played == [0, 1]


def test_the_fingerprint_follows_every_file_of_the_package_not_where_it_lives(tmp_path):
    def tree(name: str, helper: str):
        root = tmp_path / name
        (root / "family").mkdir(parents=True)
        (root / "env.py").write_text("class Env: ...\n")
        (root / "family" / "helper.py").write_text(helper)
        return root

    same, moved, edited = tree("a", "X = 1\n"), tree("b", "X = 1\n"), tree("c", "X = 2\n")
    assert demo_cache._tree_digest(same) == demo_cache._tree_digest(moved)
    assert demo_cache._tree_digest(same) != demo_cache._tree_digest(edited)
    assert demo_cache.fingerprint(ENV) != demo_cache.fingerprint("terminal/text-count-v0:medium")


def test_a_damaged_cache_file_is_named_with_its_line(tmp_path):
    demos.collect_demos([ENV], [0], cache=tmp_path)
    path = demo_cache.cache_file(tmp_path, ENV)
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(ValueError, match=rf"{path.name}:2: not a played demonstration .*delete the file"):
        demos.collect_demos([ENV], [0], cache=tmp_path)
