"""`jointrl serve` as a user runs it: a saved checkpoint, a subprocess, real HTTP."""
import os
import subprocess
import sys
import time

import httpx
import pytest

from jointrl.model.checkpoint import save_pretrained
from jointrl.model.generate import SamplingParams, generate
from jointrl.model.mxfp4 import dequantize_state_dict, mxfp4_state_dict
from jointrl.model.transformer import Transformer
from jointrl.rl.commands.serve import parse_budgets
from jointrl.rl.serve.background import free_port
from tests.rl.agent_envs import Lookup


@pytest.fixture(scope="module")
def checkpoint(fitted_lookup_policy, tmp_path_factory):
    model, tokenizer = fitted_lookup_policy
    return save_pretrained(model, tmp_path_factory.mktemp("serve") / "model", tokenizer=tokenizer)


def _serve(directory, *flags):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "jointrl.rl.commands.cli", "serve", str(directory), "--port", str(port),
         "--name", "lookup", "--default-tier", "low", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "WANDB_MODE": "offline"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(url + "/health").status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"serve did not start: {process.stdout.read()}")
        time.sleep(0.2)


@pytest.mark.parametrize("mxfp4", [False, True])
def test_serve_answers_like_the_checkpoint_it_loaded(fitted_lookup_policy, checkpoint, mxfp4):
    model, tokenizer = fitted_lookup_policy
    obs = Lookup().reset(2)
    reference = model
    if mxfp4:
        # The reference: the same weights through MXFP4 and back, decoded outside the server.
        reference = Transformer(model.cfg)
        reference.load_state_dict(dequantize_state_dict(mxfp4_state_dict(model.state_dict())))
    prompt = tokenizer.render(obs.messages, obs.tools, "low", add_generation_prompt=True)
    expected = generate(reference.eval(), [prompt], SamplingParams(temperature=0, stop_ids=(tokenizer.eot_id,)),
                        max_new_tokens=[48], pad_id=tokenizer.pad_id)[0]
    process, url = _serve(checkpoint, *(["--mxfp4"] if mxfp4 else []), "--budgets", "low=64")
    try:
        body = {"model": "lookup", "messages": obs.messages, "tools": obs.tools, "temperature": 0, "max_tokens": 48}
        response = httpx.post(url + "/v1/chat/completions", json=body, timeout=120).json()
        assert response["usage"]["completion_tokens"] == len(expected.tokens)
        message = tokenizer.parse_assistant(expected.tokens)
        got = response["choices"][0]["message"]
        assert got.get("reasoning_content") == message.get("reasoning_content")
        assert [c["function"]["arguments"] for c in got.get("tool_calls", [])] == \
            [c["function"]["arguments"] for c in message.get("tool_calls", [])]
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_bad_budgets_and_a_checkpoint_without_tokenizer_are_one_line_errors(fitted_lookup_policy, tmp_path):
    with pytest.raises(ValueError, match="huge=3"):
        parse_budgets("low=3,huge=3", {"low": 1, "high": 2, "max": 4})
    with pytest.raises(ValueError, match="grow from low to max"):
        parse_budgets("low=9", {"low": 1, "high": 2, "max": 4})
    model, _ = fitted_lookup_policy
    bare = save_pretrained(model, tmp_path / "bare")
    done = subprocess.run([sys.executable, "-m", "jointrl.rl.commands.cli", "serve", str(bare)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and "no tokenizer.json" in done.stderr and len(done.stderr.strip().splitlines()) == 1

