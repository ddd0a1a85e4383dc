"""The debug model runs on the Triton kernels (interpreted here) and agrees with the naive path."""
import copy

import pytest
import torch

from jointrl.kernels.dispatch import select_ops
from jointrl.kernels import kda
from jointrl.kernels.kda import naive as kda_naive
from jointrl.model.mxfp4 import quantize_experts_
from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer

# fp32 everywhere; differences come only from summation order inside the kernels.
ATOL, RTOL = 5e-5, 1e-4


@pytest.fixture
def model():
    torch.manual_seed(0)
    return Transformer(PRESETS["debug"].model_copy(update={"index_topk": 4}))


def run(model, tokens, path, monkeypatch):
    monkeypatch.setenv("JOINTRL_KERNELS", path)
    monkeypatch.setenv("JOINTRL_POISON_OUTPUTS", "1" if path == "triton" else "0")
    model.zero_grad()
    out = model(tokens)
    (out.logits.logsumexp(-1).mean() + out.aux_loss).backward()
    return out, {n: p.grad.clone() for n, p in model.named_parameters()}


def test_forward_and_gradients_match_the_naive_path(model, monkeypatch):
    tokens = torch.randint(0, model.cfg.vocab_size, (2, 21))
    naive_out, naive_grads = run(model, tokens, "naive", monkeypatch)
    triton_out, triton_grads = run(model, tokens, "triton", monkeypatch)
    assert select_ops(kda.__name__, kda_naive, tokens).__name__.endswith("triton")
    assert torch.equal(naive_out.routing, triton_out.routing)
    assert torch.equal(naive_out.sparse_topk, triton_out.sparse_topk)
    torch.testing.assert_close(triton_out.logits, naive_out.logits, atol=ATOL, rtol=RTOL)
    for name, grad in naive_grads.items():
        torch.testing.assert_close(triton_grads[name], grad, atol=ATOL, rtol=RTOL, msg=lambda m: f"{name}: {m}")


def test_cached_decode_on_triton_equals_the_full_forward(model, monkeypatch):
    monkeypatch.setenv("JOINTRL_KERNELS", "triton")
    tokens = torch.randint(0, model.cfg.vocab_size, (2, 13))
    with torch.no_grad():
        full = model(tokens).logits
        cache = model.allocate_cache(2, 16)
        steps = [model(tokens[:, :6], cache=cache).logits]
        steps += [model(tokens[:, t : t + 1], cache=cache).logits for t in range(6, 13)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=ATOL, rtol=RTOL)


def test_mxfp4_experts_on_triton_match_naive(model, monkeypatch):
    quantized = copy.deepcopy(model).eval()
    quantize_experts_(quantized)
    tokens = torch.randint(0, model.cfg.vocab_size, (2, 9))
    with torch.no_grad():
        monkeypatch.setenv("JOINTRL_KERNELS", "naive")
        naive = quantized(tokens).logits
        monkeypatch.setenv("JOINTRL_KERNELS", "triton")
        triton = quantized(tokens).logits
    torch.testing.assert_close(triton, naive, atol=ATOL, rtol=RTOL)
