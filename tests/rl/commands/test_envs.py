"""The `jointrl envs` commands on real registered environments."""
import json

from jointrl.rl.commands.cli import main


def test_envs_list_filters_by_glob(capsys):
    assert main(["envs", "list", "browse/*:easy"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    ids = [row[0] for row in rows]
    assert "browse/lookup-v0:easy" in ids and all(i.startswith("browse/") and i.endswith(":easy") for i in ids)
    lookup = rows[ids.index("browse/lookup-v0:easy")]
    assert lookup[1:4] == ["browse", "find, open, search", "low"]


def test_envs_try_plays_the_demo_to_full_marks(capsys):
    assert main(["envs", "try", "browse/lookup-v0:easy", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    signals = json.loads(out[out.rindex("{"):])
    assert signals["success"] == 1.0 and signals["tool_errors"] == 0


def test_envs_show_prints_the_prompt(capsys):
    assert main(["envs", "show", "office/margin-v0:easy", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "read_xlsx" in out and "user" in out


def test_unknown_env_id_is_one_clear_error(capsys):
    assert main(["envs", "try", "browse/lookup-v0:eazy"]) == 1
    err = capsys.readouterr().err
    assert "unknown env id 'browse/lookup-v0:eazy'" in err and "Traceback" not in err
