"""`jointrl export`: the exported checkpoint reloads and evaluates to exactly the numbers of its source."""
import json
import shutil

import pytest

from jointrl.envs import registry
from jointrl.envs.base import EnvSpec
from jointrl.model.checkpoint import from_pretrained, is_mxfp4, load_state
from jointrl.model.export import REMOTE_CODE_FILE
from jointrl.model.tokenizer import JointTokenizer
from jointrl.rl.commands.cli import main
from jointrl.rl.evaluate import evaluate
from jointrl.rl.recipe import load_recipe
from tests.rl.commands.test_eval import PARITY, RECIPE, fit_parity_policy


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A run checkpoint folder (model/ + recipe.yaml) of the fitted parity policy, with the env registered."""
    registry.register(EnvSpec(id=PARITY, entry_point="tests.rl.commands.test_eval:Parity"))
    run_ckpt = tmp_path_factory.mktemp("export") / "step-00000004"
    fit_parity_policy(run_ckpt / "model")
    (run_ckpt / "recipe.yaml").write_text(RECIPE)
    yield run_ckpt
    registry._SPECS.pop(PARITY, None)


def _evaluate(directory, cfg):
    model = from_pretrained(directory)
    tokenizer = JointTokenizer.load(directory)
    summary = evaluate(model, tokenizer, cfg, [PARITY], [1_000_000, 1_000_001, 1_000_002, 1_000_003], tiers=["low", "high"])
    return summary, [t.tokens.tolist() for t in summary.trajectories]


def test_native_export_reloads_and_evaluates_to_the_same_numbers(source, tmp_path, capsys):
    out = tmp_path / "exported"
    assert main(["export", str(source), str(out), "--target", "native"]) == 0, capsys.readouterr().err
    assert "as native" in capsys.readouterr().out
    assert (out / REMOTE_CODE_FILE).is_file() and (out / "tokenizer.json").is_file()
    assert json.loads((out / "config.json").read_text())["auto_map"]

    cfg = load_recipe(source / "recipe.yaml")
    before, before_tokens = _evaluate(source / "model", cfg)
    after, after_tokens = _evaluate(out, cfg)
    assert after_tokens == before_tokens
    assert after.to_json() == before.to_json()
    assert len(before.trajectories) == 8


def test_mxfp4_export_reloads_with_quantized_experts(source, tmp_path, capsys):
    out = tmp_path / "mxfp4"
    assert main(["export", str(source / "model"), str(out), "--mxfp4"]) == 0, capsys.readouterr().err
    assert is_mxfp4(out)
    model = from_pretrained(out)
    assert type(model.layers[model.moe_layers[0]].ffn.experts).__name__ == "MXFP4Experts"


def test_impossible_requests_are_one_line_errors(source, tmp_path, capsys):
    # The debug model has a sparse-attention layer, which transformers' kimi_linear cannot express.
    assert main(["export", str(source), str(tmp_path / "k"), "--target", "kimi_linear"]) == 1
    err = capsys.readouterr().err
    assert "not exportable as kimi_linear" in err and err.count("\n") == 1
    assert not (tmp_path / "k").exists()
    assert main(["export", str(source), str(source / "model" / "inside")]) == 1
    assert "must not be the checkpoint" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["export", str(empty), str(tmp_path / "x")]) == 1
    assert "is not a checkpoint" in capsys.readouterr().err


def test_a_checkpoint_without_tokenizer_exports_weights_only(source, tmp_path, capsys):
    bare = tmp_path / "bare"
    shutil.copytree(source / "model", bare)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (bare / name).unlink(missing_ok=True)
    out = tmp_path / "out"
    assert main(["export", str(bare), str(out), "--target", "native"]) == 0
    assert "no tokenizer" in capsys.readouterr().out
    assert not (out / "tokenizer.json").exists()
    from_pretrained(out)


def test_what_transformers_saves_from_the_export_evaluates_to_the_same_numbers(source, tmp_path, capsys):
    """Load the native export in transformers, save it back as transformers does (tensors under `model.`), evaluate."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out, saved = tmp_path / "exported", tmp_path / "saved"
    assert main(["export", str(source), str(out), "--target", "native"]) == 0, capsys.readouterr().err
    AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True).save_pretrained(saved)
    AutoTokenizer.from_pretrained(out, trust_remote_code=False).save_pretrained(saved)
    assert any(name.startswith("model.") for name in load_state(saved))

    cfg = load_recipe(source / "recipe.yaml")
    before, before_tokens = _evaluate(source / "model", cfg)
    after, after_tokens = _evaluate(saved, cfg)
    assert after_tokens == before_tokens
    assert after.to_json() == before.to_json()
    capsys.readouterr()
    assert main(["eval", str(saved), str(source / "recipe.yaml"), "--envs", PARITY, "--seeds", "1000000:1000002"]) == 0
    assert "pass rate" in capsys.readouterr().out
