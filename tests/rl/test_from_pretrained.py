"""Bring your own checkpoint, end to end: a transformers kimi_linear checkpoint (random weights, saved by transformers)
-> `jointrl import` -> the cold start of a recipe with `model: {from_pretrained: DIR}` -> `jointrl export` ->
transformers loads kimi_linear and computes jointrl's logits. Also the recipe form's errors.

Measured max |transformers - jointrl| logit difference of the SFT'd export, fp32, 2 x 40 tokens: printed with -s
(about 2e-7 on logits of magnitude ~1).
"""
import json

import pytest
import torch
from rich.console import Console
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

from jointrl.model.checkpoint import from_pretrained, load_state
from jointrl.model.hf_import import import_pretrained
from jointrl.model.hf_sample import write_sample
from jointrl.model.hf_tokenizer import HFTokenizer
from jointrl.rl.cold_start import cold_start
from jointrl.rl.commands.cli import main
from jointrl.rl.recipe import RecipeError, load_recipe

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The random kimi_linear checkpoint transformers saved, with its Kimi-style tokenizer."""
    return write_sample(tmp_path_factory.mktemp("sample") / "hf")


def run_overrides(tmp_path, source) -> list[str]:
    return [f"model.from_pretrained={source}", f"tracking.run_dir={tmp_path / 'run'}", "tracking.wandb_mode=disabled"]


@pytest.mark.parametrize("start", ["imported", "transformers"])
def test_import_sft_export_round_trip_keeps_transformers_logits(start, sample, tmp_path, capsys):
    source = sample
    if start == "imported":
        assert main(["import", str(sample), str(tmp_path / "imported")]) == 0
        assert "kimi-k2 tool calls" in capsys.readouterr().out
        source = tmp_path / "imported"
        assert (source / "tokenizer.json").read_bytes() == (sample / "tokenizer.json").read_bytes()
    cfg = load_recipe("kimi_linear_import", run_overrides(tmp_path, source))
    assert cfg.pretrained == str(source) and cfg.model.layer_pattern == "KLK"
    done = cold_start(cfg, Console(quiet=True))
    assert len(done.losses) == 2 and isinstance(done.tokenizer, HFTokenizer)

    # SFT moved the imported weights.
    imported, _ = import_pretrained(sample)
    tuned = load_state(done.checkpoint)
    before = imported.state_dict()
    assert all(name in tuned for name in before)
    assert any(not torch.equal(tuned[n], before[n]) for n in before)

    assert main(["export", str(done.checkpoint), str(tmp_path / "back")]) == 0
    assert json.loads((tmp_path / "back" / "config.json").read_text())["model_type"] == "kimi_linear"
    back = AutoModelForCausalLM.from_pretrained(tmp_path / "back").eval()
    ours = from_pretrained(done.checkpoint).eval()
    tokens = torch.randint(0, cfg.model.vocab_size, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected, got = back(tokens).logits.float(), ours(tokens).logits.float()
    diff = (expected - got).abs().max().item()
    print(f"{start}: max |transformers - jointrl| logit difference after SFT and export {diff:.2e} "
          f"(max |logit| {expected.abs().max().item():.2f})")
    assert diff <= 1e-4 * expected.abs().max().item()

    # The export keeps the checkpoint's own tokenizer and chat template, which transformers renders.
    hf_tok = PreTrainedTokenizerFast.from_pretrained(tmp_path / "back")
    messages = [{"role": "user", "content": "hi"}]
    assert hf_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == \
        done.tokenizer.render_text(messages, add_generation_prompt=True)


def test_from_pretrained_and_preset_together_name_the_key(sample, tmp_path):
    with pytest.raises(RecipeError) as info:
        load_recipe("kimi_linear_import", run_overrides(tmp_path, sample) + ["model.preset=debug"])
    assert "model.from_pretrained: from_pretrained and preset both name the model" in str(info.value)


@pytest.mark.parametrize("setup, message", [
    ("missing", "no config.json; not a checkpoint directory"),
    ("llama", "model_type 'llama' is neither jointrl's (jointrl_moe) nor one that imports"),
    ("yarn", "rope_scaling.rope_type='yarn'"),
])
def test_bad_from_pretrained_directories_are_recipe_errors(setup, message, tmp_path):
    directory = tmp_path / "ckpt"
    if setup != "missing":
        directory.mkdir()
        config = {"model_type": "llama"} if setup == "llama" else {
            "model_type": "deepseek_v3", "rope_scaling": {"type": "yarn", "factor": 4.0}, "vocab_size": 64,
            "hidden_size": 32, "intermediate_size": 64, "moe_intermediate_size": 16, "num_hidden_layers": 2,
            "num_attention_heads": 2, "q_lora_rank": 8, "kv_lora_rank": 8, "qk_nope_head_dim": 8,
            "qk_rope_head_dim": 4, "v_head_dim": 8, "n_routed_experts": 4, "num_experts_per_tok": 2,
        }
        (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(RecipeError) as info:
        load_recipe("kimi_linear_import", run_overrides(tmp_path, directory))
    text = str(info.value)
    assert "model.from_pretrained:" in text and message in text and text.count("\n") == 0, text
