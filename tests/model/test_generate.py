"""Batched generation against a naive loop that re-runs the full forward for every new token."""
import math

import pytest
import torch

from jointrl.model.generate import SamplingParams, generate, sample_next
from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = PRESETS["debug"].model_copy(update={"index_topk": 4})
    return Transformer(cfg).eval()


def full_logits(model, ids: list[int]) -> torch.Tensor:
    """Logits [T, V] of one unpadded sequence, no cache."""
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0]


def naive_greedy(model, prompt: list[int], n: int) -> list[int]:
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(full_logits(model, ids)[-1].argmax()))
    return ids[len(prompt):]


def test_greedy_batch_with_ragged_prompts_and_budgets_equals_naive_loop(model):
    torch.manual_seed(1)
    prompts = [torch.randint(1, 512, (n,)).tolist() for n in (5, 12, 1)]
    budgets = [7, 3, 10]
    out = generate(model, prompts, SamplingParams(temperature=0), max_new_tokens=budgets)
    for prompt, budget, gen in zip(prompts, budgets, out):
        assert gen.tokens == naive_greedy(model, prompt, budget)
        assert gen.finish_reason == "length"
        reference = torch.log_softmax(full_logits(model, prompt + gen.tokens), dim=-1)
        expected = reference[len(prompt) - 1 : -1].gather(-1, torch.tensor(gen.tokens)[:, None]).squeeze(-1)
        torch.testing.assert_close(gen.logprobs, expected, atol=1e-5, rtol=1e-5)


def truncated_logprobs(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Row by row in Python: log-probs of softmax(logits / T) restricted to top-k, then top-p, renormalised."""
    out = torch.full_like(logits, float("-inf"))
    for r, row in enumerate(logits.tolist()):
        probs = torch.softmax(torch.tensor(row) / temperature, dim=-1).tolist()
        order = sorted(range(len(row)), key=lambda i: -probs[i])[: top_k or len(row)]
        kept, mass = [], 0.0
        for i in order:
            if mass >= top_p * sum(probs[j] for j in order):
                break
            kept.append(i)
            mass += probs[i]
        total = sum(probs[i] for i in kept)
        for i in kept:
            out[r, i] = math.log(probs[i] / total)
    return out


def test_sampled_logprobs_are_those_of_the_truncated_distribution(model):
    torch.manual_seed(2)
    prompts = [torch.randint(1, 512, (n,)).tolist() for n in (4, 9)]
    params = SamplingParams(temperature=0.7, top_p=0.9, top_k=50, max_new_tokens=12)
    out = generate(model, prompts, params, generator=torch.Generator().manual_seed(3))
    for prompt, gen in zip(prompts, out):
        logits = full_logits(model, prompt + gen.tokens)[len(prompt) - 1 : -1]  # [n, V] what each draw saw
        expected = truncated_logprobs(logits, 0.7, 50, 0.9).gather(-1, torch.tensor(gen.tokens)[:, None]).squeeze(-1)
        torch.testing.assert_close(gen.logprobs, expected, atol=1e-5, rtol=1e-5)
        untruncated = torch.log_softmax(logits / 0.7, dim=-1).gather(-1, torch.tensor(gen.tokens)[:, None]).squeeze(-1)
        assert (gen.logprobs > untruncated + 1e-4).all(), "renormalising over fewer tokens raises every kept log-prob"


def test_top_k_log_prob_by_hand():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    # top-2 at temperature 1: softmax([2, 1]) = [e / (e + 1), 1 / (e + 1)] over the two kept tokens.
    draws = {}
    for seed in range(40):
        ids, logp = sample_next(logits, SamplingParams(temperature=1.0, top_k=2), torch.Generator().manual_seed(seed))
        draws[int(ids)] = float(logp)
    assert draws == {0: pytest.approx(math.log(math.e / (math.e + 1))), 1: pytest.approx(math.log(1 / (math.e + 1)))}


def test_stop_token_ends_a_row_and_is_kept(model):
    prompt = torch.randint(1, 512, (6,), generator=torch.Generator().manual_seed(4)).tolist()
    free = naive_greedy(model, prompt, 8)
    stop = free[3]
    first_hit = free.index(stop)
    out = generate(model, [prompt, prompt], SamplingParams(temperature=0, stop_ids=(stop,), max_new_tokens=8))
    for gen in out:
        assert gen.tokens == free[: first_hit + 1]
        assert gen.finish_reason == "stop"


def test_recorded_routing_and_selection_equal_the_full_forward(model):
    torch.manual_seed(5)
    prompts = [torch.randint(1, 512, (n,)).tolist() for n in (3, 10)]
    out = generate(model, prompts, SamplingParams(temperature=0, max_new_tokens=6), record_routing=True)
    for prompt, gen in zip(prompts, out):
        fed = prompt + gen.tokens[:-1]
        with torch.no_grad():
            reference = model(torch.tensor([fed]))
        assert torch.equal(gen.routing, reference.routing[0])
        assert torch.equal(gen.sparse_topk, reference.sparse_topk[0])


def test_top_k_one_and_tiny_top_p_are_greedy():
    torch.manual_seed(6)
    logits = torch.randn(64, 100)
    greedy = logits.argmax(dim=-1)
    ids, _ = sample_next(logits, SamplingParams(temperature=1.3, top_k=1))
    assert torch.equal(ids, greedy)
    ids, _ = sample_next(logits, SamplingParams(temperature=1.3, top_p=1e-6))
    assert torch.equal(ids, greedy)


def test_top_k_never_draws_outside_the_k_best():
    torch.manual_seed(7)
    logits = torch.randn(256, 50)
    ids, _ = sample_next(logits, SamplingParams(temperature=2.0, top_k=5))
    allowed = logits.topk(5, dim=-1).indices
    assert (allowed == ids[:, None]).any(dim=-1).all()


@pytest.mark.parametrize("params", [dict(temperature=-1), dict(top_p=0), dict(top_p=1.5), dict(top_k=-2)])
def test_bad_sampling_params_raise(params):
    with pytest.raises(ValueError):
        SamplingParams(**params)


def test_empty_prompt_raises(model):
    with pytest.raises(ValueError, match="empty prompt"):
        generate(model, [[1, 2], []], SamplingParams())


def test_draws_follow_the_distribution_and_never_take_a_truncated_token():
    # Hand-set probabilities (log-space logits), one truncated away by top-k: 40,000 draws in one batch land on each
    # kept token in its renormalised proportion, within five standard errors, and never on the cut one.
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = probs.log().expand(40_000, 4)
    ids, logp = sample_next(logits, SamplingParams(temperature=1.0, top_k=3), torch.Generator().manual_seed(8))
    kept = probs[:3] / probs[:3].sum()
    counts = torch.bincount(ids, minlength=4).double()
    assert counts[3] == 0
    frequency = counts[:3] / len(ids)
    stderr = (kept * (1 - kept) / len(ids)).sqrt()
    assert ((frequency - kept).abs() < 5 * stderr).all(), (frequency, kept)
    torch.testing.assert_close(logp, kept.log()[ids])


@pytest.mark.parametrize("draw, expected", [(0.0, 1), (1.0, 2)])
def test_a_draw_at_either_end_of_the_range_takes_a_token_with_mass(monkeypatch, draw, expected):
    # A uniform draw of 0, or one whose product with the total rounds up to the total, must still land on a token of
    # positive probability: not on the zero-probability head or tail, and not past the end.
    logits = torch.tensor([[float("-inf"), 0.0, 0.0, float("-inf")]])
    monkeypatch.setattr(torch, "rand", lambda *shape, **kw: torch.full(shape, draw, dtype=kw.get("dtype")))
    ids, logp = sample_next(logits, SamplingParams(temperature=1.0))
    assert ids.tolist() == [expected] and logp.tolist() == [pytest.approx(math.log(0.5))]
