"""The native export as transformers' ecosystem uses it: conventions, cache, checkpointing, TRL, and a venv without jointrl.

References are independent of the remote code: jointrl's own Transformer on the same weights, transformers'
generate() without a cache, and jointrl's loader reading what transformers saved.
"""
import json
import os
import subprocess
import venv
from pathlib import Path

import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

from jointrl.model.checkpoint import HF_BASE_PREFIX, from_pretrained, load_state
from jointrl.model.export import export_pretrained
from tests.model.test_export import PAD, T, build, greedy, tokens_for

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: one thread each

# Packages the exported code may need: what transformers' remote code needs, nothing of jointrl.
STANDALONE_PACKAGES = ["torch==2.13.0", "transformers", "safetensors", "tokenizers"]
# Reuse an interpreter of such an environment instead of building one (it must not have jointrl).
STANDALONE_PYTHON_ENV = "JOINTRL_STANDALONE_PYTHON"




@pytest.fixture(scope="module")
def exported(tmp_path_factory, tokenizer):
    """(jointrl model, export directory) of the seeded debug model."""
    torch.manual_seed(0)
    model = build()
    return model, export_pretrained(model, tmp_path_factory.mktemp("hf") / "native", tokenizer=tokenizer)


def load(directory: Path):
    return AutoModelForCausalLM.from_pretrained(directory, trust_remote_code=True)


def left_padded(tokens: torch.Tensor) -> torch.Tensor:
    """attention_mask [B, T] with row 0 left-padded by PAD columns."""
    mask = torch.ones_like(tokens)
    mask[0, :PAD] = 0
    return mask


def test_base_model_follows_transformers_conventions(exported):
    model, out = exported
    hf = load(out)
    assert hf.base_model is hf.model and type(hf.model).__name__ == "JointRLModel"
    assert hf.get_input_embeddings() is hf.model.embed and hf.get_output_embeddings() is hf.lm_head
    assert hf.config.hidden_size == model.cfg.dim and set(hf._no_split_modules) == {"Block"}

    tokens = tokens_for(model)
    mask = left_padded(tokens)
    with torch.no_grad():
        expected = model(tokens, valid=mask.bool())
        base = hf.model(input_ids=tokens, attention_mask=mask, use_cache=False)
        torch.testing.assert_close(base.last_hidden_state, expected.hidden, atol=0, rtol=0)
        embeds = hf.model(inputs_embeds=hf.get_input_embeddings()(tokens), attention_mask=mask, use_cache=False)
        torch.testing.assert_close(embeds.last_hidden_state, expected.hidden, atol=0, rtol=0)
        # transformers' own position convention (count of real tokens, padding at 0) is jointrl's.
        positions = (mask.cumsum(-1) - 1).clamp_min(0)
        explicit = hf(tokens, attention_mask=mask, position_ids=positions, use_cache=False).logits
        torch.testing.assert_close(explicit, expected.logits, atol=0, rtol=0)
        last = hf(tokens, attention_mask=mask, use_cache=False, logits_to_keep=1).logits
        # The head on one column instead of all: the same numbers up to matmul rounding.
        torch.testing.assert_close(last, expected.logits[:, -1:], atol=1e-5, rtol=0)

        # A cache from one forward continues in the next, under either of transformers' names for it.
        prefix = hf(tokens[:, :-3], attention_mask=mask[:, :-3], use_cache=True)
        step = hf(tokens[:, -3:], attention_mask=mask, past_key_values=prefix.cache)
        assert prefix.cache.get_seq_length() == T
        torch.testing.assert_close(step.logits, expected.logits[:, -3:], atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="output_attentions"):
        hf(tokens, output_attentions=True)
    # AutoModel is the base model alone, read from the same files.
    base = AutoModel.from_pretrained(out, trust_remote_code=True)
    assert type(base).__name__ == "JointRLModel"
    with torch.no_grad():
        hidden = base(tokens, attention_mask=mask, use_cache=False).last_hidden_state
    torch.testing.assert_close(hidden, expected.hidden, atol=0, rtol=0)


def test_cached_generate_with_left_padding_equals_uncached(exported):
    model, out = exported
    hf = load(out)
    tokens = tokens_for(model)[:, :10]
    mask = left_padded(tokens)
    kwargs = {"attention_mask": mask, "max_new_tokens": 12, "do_sample": False, "eos_token_id": None, "pad_token_id": 0}
    with torch.no_grad():
        cached = hf.generate(tokens, **kwargs)
        uncached = hf.generate(tokens, use_cache=False, **kwargs)
    assert torch.equal(cached, uncached)
    # Row 1 has no padding: jointrl's own greedy decoding of it agrees.
    assert torch.equal(cached[1:], greedy(model, tokens[1:], steps=12))


@pytest.mark.parametrize("reentrant", [False, True], ids=["non_reentrant", "reentrant"])
def test_gradient_checkpointing_changes_memory_not_numbers(exported, reentrant):
    """Asked for reentrant checkpointing (which would run blocks under no_grad and drop the indexer loss), the model
    still recomputes non-reentrantly: the loss and every gradient stay those of the plain forward."""
    model, out = exported
    tokens = tokens_for(model)
    mask = left_padded(tokens)
    runs = []
    for checkpointing in (False, True):
        hf = load(out).train()
        if checkpointing:
            hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
        calls = []
        for block in hf.model.layers:
            block.register_forward_pre_hook(lambda *args: calls.append(1))
        loss = hf(tokens, attention_mask=mask, labels=tokens).loss
        loss.backward()
        grads = {name: p.grad.clone() for name, p in hf.named_parameters() if p.grad is not None}
        runs.append((loss.detach(), grads, len(calls)))
    (loss, grads, calls), (loss_ckpt, grads_ckpt, calls_ckpt) = runs
    n_layers = model.cfg.n_layers
    # Checkpointed blocks start again in backward (a pre-hook: recomputation may stop before a block returns).
    assert (calls, calls_ckpt) == (n_layers, 2 * n_layers)
    torch.testing.assert_close(loss_ckpt, loss, atol=0, rtol=0)
    assert grads_ckpt.keys() == grads.keys() and len(grads) > 50
    for name, grad in grads.items():
        torch.testing.assert_close(grads_ckpt[name], grad, atol=1e-6, rtol=1e-5, msg=name)


@pytest.mark.parametrize("update", [{}, {"tie_embeddings": True}], ids=["untied", "tied"])
def test_what_transformers_saves_reads_back_in_jointrl(update, tmp_path, tokenizer):
    model = build(update)
    hf = load(export_pretrained(model, tmp_path / "native", tokenizer=tokenizer))
    with torch.no_grad():
        for p in hf.parameters():
            p.mul_(1.01)  # a stand-in for training: the saved weights are not the exported ones
    hf.save_pretrained(tmp_path / "saved")
    saved = load_state(tmp_path / "saved")
    assert "model.embed.weight" in saved and all(k.startswith(HF_BASE_PREFIX) or k == "lm_head.weight" for k in saved)
    tokens = tokens_for(model)
    again = from_pretrained(tmp_path / "saved")
    with torch.no_grad():
        # Two loads of the same weights: on some CPUs the BLAS picks kernels by memory alignment, so the last bits
        # may differ; a wrong or missing weight moves the logits by far more.
        torch.testing.assert_close(again(tokens).logits, hf(tokens, use_cache=False).logits, atol=1e-5, rtol=1e-5)
        assert not torch.equal(again(tokens).logits, model(tokens).logits)
    assert (again.lm_head.weight is again.embed.weight) == bool(update)


def test_auto_tokenizer_loads_the_export_without_remote_code(exported, tokenizer):
    """config.json names remote code, so transformers asks whether to trust it unless told: False needs none."""
    _, out = exported
    auto = AutoTokenizer.from_pretrained(out, trust_remote_code=False)
    messages = [{"role": "user", "content": "How many lines?"}]
    ids = auto.apply_chat_template(messages, thinking_tier="low", add_generation_prompt=True)["input_ids"]
    assert list(ids) == tokenizer.render(messages, tier="low", add_generation_prompt=True)


def test_grpo_trainer_trains_the_export_and_jointrl_reads_the_result(exported, tmp_path):
    """TRL's GRPOTrainer as its docs show it, on the export's path: default arguments except tiny sizes and CPU."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, out = exported

    def reward(completions, **kwargs):
        # Depends on the sampled text, so the two completions of a prompt differ and advantages are non-zero.
        return [float(sum(map(ord, str(c))) % 7) for c in completions]

    prompts = [[{"role": "user", "content": "count to three"}], [{"role": "user", "content": "say hi"}]]
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"), trust_remote_code=True, use_cpu=True, report_to="none", max_steps=2,
        per_device_train_batch_size=2, num_generations=2, max_completion_length=8, seed=0,
    )
    torch.manual_seed(0)
    trainer = GRPOTrainer(model=str(out), reward_funcs=reward, args=args, train_dataset=Dataset.from_dict({"prompt": prompts}))
    trainer.train()
    # Without accelerate's wrapper, which runs forward under the bf16 autocast of GRPOConfig's default bf16=True.
    trained = trainer.accelerator.unwrap_model(trainer.model, keep_fp32_wrapper=False)
    assert trained.is_gradient_checkpointing  # GRPOConfig's default
    assert trainer.state.global_step == 2
    trainer.save_model(str(tmp_path / "saved"))

    start = {HF_BASE_PREFIX + k if k != "lm_head.weight" else k: v for k, v in model.state_dict().items()}
    changed = [n for n, p in trained.named_parameters() if not torch.equal(p.detach(), start[n])]
    assert len(changed) > 10, changed
    again = from_pretrained(tmp_path / "saved")
    tokens = tokens_for(model)
    trained.eval()
    with torch.no_grad():
        torch.testing.assert_close(again(tokens).logits, trained(tokens, use_cache=False).logits, atol=1e-5, rtol=1e-5)


def _standalone_python(cache_dir: Path) -> Path:
    """A Python whose environment has STANDALONE_PACKAGES and no jointrl, built once per pytest cache."""
    given = os.environ.get(STANDALONE_PYTHON_ENV)
    if given:
        return Path(given)
    env = cache_dir / "venv"
    python = env / "bin" / "python"
    if not (env / ".ready").is_file():
        venv.create(env, with_pip=True, clear=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", *STANDALONE_PACKAGES],
                              capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            pytest.skip(f"LOUD SKIP: could not build a venv without jointrl ({' '.join(STANDALONE_PACKAGES)}): "
                        f"{done.stderr.strip()[-500:]}")
        (env / ".ready").touch()
    return python


STANDALONE_SCRIPT = """
import importlib.util, json, sys
import torch
from transformers import AutoModelForCausalLM
assert importlib.util.find_spec("jointrl") is None, "this environment must not have jointrl"
torch.set_num_threads(1)
out, tokens = sys.argv[1], torch.tensor(json.loads(sys.argv[2]))
hf = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True)
with torch.no_grad():
    logits = hf(tokens, use_cache=False).logits
    continued = hf.generate(tokens[:1, :6], max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)
print(json.dumps({"logits": logits.tolist(), "generated": continued.tolist()}))
"""


@pytest.mark.slow
def test_export_runs_where_jointrl_is_not_installed(exported, tmp_path, request):
    model, out = exported
    python = _standalone_python(request.config.cache.mkdir("jointrl-standalone"))
    tokens = tokens_for(model)
    # Outside the repository and with a clean environment, so nothing of jointrl can be found.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([str(python), "-c", STANDALONE_SCRIPT, str(out), json.dumps(tokens.tolist())],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    with torch.no_grad():
        expected = model(tokens).logits
    torch.testing.assert_close(torch.tensor(result["logits"]), expected, atol=1e-5, rtol=0)
    assert result["generated"] == greedy(model, tokens[:1, :6], steps=8).tolist()
