"""The continuous-batching engine against naive full-forward loops, one sequence at a time."""
import pytest
import torch

from jointrl.model.generate import SamplingParams
from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer
from jointrl.model.openings import MIN_SHARED
from jointrl.rl.rollout.engine import Engine, TurnRequest

THINK, END_THINK, EOT = 5, 6, 7
GREEDY = SamplingParams(temperature=0)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Transformer(PRESETS["debug"].model_copy(update={"index_topk": 4})).eval()


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0]


def naive_greedy(model, ids, n, stop=()):
    ids, out = list(ids), []
    for _ in range(n):
        token = int(logits_of(model, ids)[-1].argmax())
        ids.append(token)
        out.append(token)
        if token in stop:
            break
    return out


def run_with_shapes(model, engine, requests):
    """engine.run(requests), and the [batch, width] of every forward the model ran for it."""
    shapes = []
    plain_forward = model.forward

    def spy(tokens, **kwargs):
        shapes.append(tuple(tokens.shape))
        return plain_forward(tokens, **kwargs)

    model.forward = spy
    try:
        return engine.run(requests), shapes
    finally:
        del model.forward


def prompts(n, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(8, 512, (int(torch.randint(2, 14, (1,), generator=g)),), generator=g).tolist() for _ in range(n)]


def test_more_sequences_than_rows_each_equal_its_naive_loop(model):
    engine = Engine(model, THINK, END_THINK, max_rows=3)
    ps = prompts(7, seed=1)
    budgets = [3, 9, 5, 1, 8, 6, 4]
    results = engine.run([TurnRequest(i, p, b, GREEDY) for i, (p, b) in enumerate(zip(ps, budgets))])
    for i, (p, b, r) in enumerate(zip(ps, budgets, results)):
        engine.release(i)
        assert r.tokens == naive_greedy(model, p, b), i
        reference = torch.log_softmax(logits_of(model, p + r.tokens), dim=-1)[len(p) - 1 : -1]
        expected = reference.gather(-1, torch.tensor(r.tokens)[:, None]).squeeze(-1)
        torch.testing.assert_close(torch.tensor(r.logprobs), expected, atol=1e-5, rtol=1e-5)
        assert r.finish_reason == "length" and not any(r.forced)


def test_multi_turn_appends_only_new_tokens_and_matches_the_whole_sequence(model):
    engine = Engine(model, THINK, END_THINK, max_rows=2, record_routing=True)
    p1, p2 = prompts(2, seed=2)
    tool1, tool2 = [11, 12, 13], [21, 22]
    history = {0: list(p1), 1: list(p2)}
    first = engine.run([TurnRequest(0, p1, 4, GREEDY), TurnRequest(1, p2, 6, GREEDY)])
    for r in first:
        history[r.seq_id] += r.tokens
    second = engine.run([TurnRequest(0, tool1, 5, GREEDY), TurnRequest(1, tool2, 3, GREEDY)])
    for r, tool in zip(second, (tool1, tool2)):
        before = history[r.seq_id] + tool
        assert r.tokens == naive_greedy(model, before, len(r.tokens))
        history[r.seq_id] = before + r.tokens
    # Routing recorded over both turns covers every token fed: the whole sequence but its last token.
    for seq_id in (0, 1):
        fed = history[seq_id][:-1]
        with torch.no_grad():
            reference = model(torch.tensor([fed]))
        turns = [r for r in first + second if r.seq_id == seq_id]
        assert torch.equal(torch.cat([t.routing for t in turns]), reference.routing[0])
        assert torch.equal(torch.cat([t.sparse_topk for t in turns]), reference.sparse_topk[0])


def test_thinking_stops_at_the_budget_and_the_answer_follows(model):
    # The policy never ends thinking by itself, so only the budget can close the block.
    never_end = model.lm_head.register_forward_hook(lambda m, i, out: out.index_fill(-1, torch.tensor([END_THINK]), -1e9))
    try:
        engine = Engine(model, THINK, END_THINK, max_rows=4)
        ps = [p + [THINK] for p in prompts(4, seed=3)]
        budgets = [0, 2, 5, 7]
        results = engine.run([TurnRequest(i, p, 12, GREEDY, think_budget=b) for i, (p, b) in enumerate(zip(ps, budgets))])
    finally:
        never_end.remove()
    for budget, r in zip(budgets, results):
        # Prompts end inside <think>: exactly `budget` thinking tokens, then the forced </think>, then more.
        assert r.tokens[budget] == END_THINK and r.forced == [k == budget for k in range(len(r.tokens))]
        assert r.think_tokens == budget and len(r.tokens) == 12
        assert END_THINK not in r.tokens[:budget]


def test_a_later_turn_gets_the_thinking_budget_its_request_names(model):
    # The agent loop passes each turn what the episode has left; thinking done in an earlier turn of the
    # same sequence must not count a second time (it did once, halving multi-turn budgets).
    never_end = model.lm_head.register_forward_hook(lambda m, i, out: out.index_fill(-1, torch.tensor([END_THINK]), -1e9))
    try:
        engine = Engine(model, THINK, END_THINK, max_rows=2)
        first = engine.run([TurnRequest(0, prompts(1, seed=5)[0] + [THINK], 6, GREEDY, think_budget=4)])[0]
        second = engine.run([TurnRequest(0, [7, 8, THINK], 8, GREEDY, think_budget=3)])[0]
    finally:
        never_end.remove()
    assert first.think_tokens == 4 and first.tokens[4] == END_THINK
    assert second.think_tokens == 3 and second.tokens[3] == END_THINK
    assert second.forced == [k == 3 for k in range(len(second.tokens))]


def test_stop_tokens_per_request_and_bad_requests(model):
    engine = Engine(model, THINK, END_THINK, max_rows=2)
    p = prompts(1, seed=4)[0]
    free = naive_greedy(model, p, 6)
    stop = free[2]
    r = engine.run([TurnRequest("a", p, 6, SamplingParams(temperature=0, stop_ids=(stop,)))])[0]
    assert r.tokens == free[: free.index(stop) + 1] and r.finish_reason == "stop"
    with pytest.raises(ValueError, match="max_new_tokens"):
        engine.submit(TurnRequest("b", p, 0, GREEDY))


def test_a_resident_turn_is_admitted_before_a_newcomer_that_would_evict_its_row(model):
    engine = Engine(model, THINK, END_THINK, max_rows=2)
    pa, pb, pc = prompts(3, seed=7)
    first = engine.run([TurnRequest("a", pa, 3, GREEDY), TurnRequest("b", pb, 5, GREEDY)])
    # "a" parked first, so it is the row an eviction would take; the newcomer is queued ahead of a's next turn.
    engine.submit(TurnRequest("c", pc, 2, GREEDY))
    engine.submit(TurnRequest("a", [11, 12], 2, GREEDY))
    fed = engine.tokens_fed
    results = {r.seq_id: r for r in engine.step()}
    # a fed only its last sampled token and the two new ones, not its whole history again.
    assert engine.tokens_fed - fed == len(pc) + 1 + 2
    assert engine.resident("a") and "b" in engine.evicted
    while engine.busy:
        results.update({r.seq_id: r for r in engine.step()})
    assert results["c"].tokens == naive_greedy(model, pc, 2)
    assert results["a"].tokens == naive_greedy(model, pa + first[0].tokens + [11, 12], 2)


def test_an_evicted_sequence_records_routing_once_for_every_token_it_was_fed(model):
    # One row: b evicts a, so a's second turn rebuilds its cache from the kept history. Routing and top-k recorded
    # over a's two turns must still be the full forward's over its fed tokens, the rebuilt history not twice.
    engine = Engine(model, THINK, END_THINK, max_rows=1, record_routing=True)
    pa, pb = prompts(2, seed=15)
    first = engine.run([TurnRequest("a", pa, 3, GREEDY)])[0]
    engine.run([TurnRequest("b", pb, 2, GREEDY)])
    assert "a" in engine.evicted
    second = engine.run([TurnRequest("a", [11, 12], 4, GREEDY)])[0]
    fed = pa + first.tokens + [11, 12] + second.tokens[:-1]
    with torch.no_grad():
        reference = model(torch.tensor([fed]))
    assert torch.equal(torch.cat([first.routing, second.routing]), reference.routing[0])
    assert torch.equal(torch.cat([first.sparse_topk, second.sparse_topk]), reference.sparse_topk[0])


def test_a_pinned_row_is_never_evicted_and_newcomers_wait_for_another(model):
    engine = Engine(model, THINK, END_THINK, max_rows=2)
    pa, pb, pc = prompts(3, seed=9)
    first = engine.run([TurnRequest("a", pa, 3, GREEDY), TurnRequest("b", pb, 5, GREEDY)])
    # "a" parked first, so an unpinned eviction would take its row; pinned, the newcomer takes b's instead.
    engine.pin("a")
    engine.submit(TurnRequest("c", pc, 2, GREEDY))
    engine.step()
    assert engine.resident("a") and "b" in engine.evicted and engine.resident("c")
    engine.pin("c")  # still generating: a pin only holds a parked row
    assert not engine.rows[next(i for i, r in enumerate(engine.rows) if r.seq_id == "c")].pinned
    while engine.busy:
        engine.step()
    # Both rows pinned: a newcomer waits without evicting either, and gets the row its holder releases.
    engine.pin("a")
    engine.pin("c")
    engine.submit(TurnRequest("d", pb, 2, GREEDY))
    fed = engine.tokens_fed
    assert engine.step() == [] and engine.tokens_fed == fed and engine.resident("a") and engine.resident("c")
    engine.release("c")
    engine.submit(TurnRequest("a", [11, 12], 2, GREEDY))
    results = {}
    while engine.busy:
        results.update({r.seq_id: r for r in engine.step()})
    # d: its prompt, then its first sampled token; a: its last sampled token and the two new ones, then its first
    # sampled token. Its history of len(pa) + 2 tokens is not fed again: its cache was kept all along.
    assert engine.tokens_fed - fed == (len(pb) + 1) + (1 + 2 + 1)
    assert results["a"].tokens == naive_greedy(model, pa + first[0].tokens + [11, 12], 2)
    assert results["d"].tokens == naive_greedy(model, pb, 2)


def test_a_run_on_a_used_engine_attends_over_its_own_slots_only(model):
    engine = Engine(model, THINK, END_THINK, max_rows=2)
    pa, pb, pc = prompts(3, seed=10)
    # Longer than the cache's slack (32 columns), so that leftovers would show.
    engine.run([TurnRequest("a", pa, 40, GREEDY), TurnRequest("b", pb, 40, GREEDY)])
    engine.release("a")
    engine.release("b")
    engine.submit(TurnRequest("c", pc, 3, GREEDY))
    engine.step()
    # The first run's slots are gone before the prefill: the cache holds exactly the new prompt's columns.
    assert engine.cache.length == len(pc)
    while engine.busy:
        engine.step()
    assert engine.cache.length == len(pc) + 2
    # and the packed cache still continues c exactly.
    second = engine.run([TurnRequest("c", [5], 3, GREEDY)])[0]
    assert second.tokens == naive_greedy(model, pc + naive_greedy(model, pc, 3) + [5], 3)


def test_leftover_columns_shorter_than_the_new_prompt_are_packed_away_too(model):
    engine = Engine(model, THINK, END_THINK, max_rows=2)
    pa, pb = prompts(2, seed=12)
    pa = pa + [7] * 30  # the leftover (pa and 20 sampled tokens) is shorter than the next prompt
    for i in range(3):  # a worker's engine, run after run
        engine.run([TurnRequest(("a", i), pa, 20, GREEDY)])
        engine.release(("a", i))
    pc = pa + [8] * 20
    engine.submit(TurnRequest("c", pc, 3, GREEDY))
    engine.step()
    assert engine.cache.length == len(pc)
    while engine.busy:
        engine.step()
    second = engine.run([TurnRequest("c", [5], 3, GREEDY)])[0]
    assert second.tokens == naive_greedy(model, pc + naive_greedy(model, pc, 3) + [5], 3)


def test_identical_prompts_are_prefilled_once_and_every_step_is_one_column_wide(model):
    engine = Engine(model, THINK, END_THINK, max_rows=4, record_routing=True,
                    generator=torch.Generator().manual_seed(0))
    pa, pb = prompts(2, seed=11)
    pa, pb = pa + [9] * 4, pb + [10] * 3  # long enough for a prefill batch to show its width
    sampled = SamplingParams(temperature=1.0)
    requests = [TurnRequest(i, p, 6, sampled) for i, p in enumerate([pa, pb, pa, pb])]
    results, shapes = run_with_shapes(model, engine, requests)
    # One prefill of the two distinct prompts (all but their last token), then one column a step for all rows.
    assert shapes[0] == (2, max(len(pa), len(pb)) - 1)
    assert all(shape == (4, 1) for shape in shapes[1:]) and len(shapes) == 1 + 6
    # Rows copied from the same prefill sample on their own, and record routing for every token they were fed,
    # the prompt included: a full forward over each sequence gives it back, and their log-probs.
    for r, p in zip(results, [pa, pb, pa, pb]):
        fed = p + r.tokens[:-1]
        with torch.no_grad():
            reference = model(torch.tensor([fed]))
        assert torch.equal(r.routing, reference.routing[0])
        assert torch.equal(r.sparse_topk, reference.sparse_topk[0])
        logp = torch.log_softmax(reference.logits[0, len(p) - 1 :], dim=-1)
        expected = logp.gather(-1, torch.tensor(r.tokens)[:, None]).squeeze(-1)
        torch.testing.assert_close(torch.tensor(r.logprobs), expected, atol=1e-5, rtol=1e-5)
    assert results[0].tokens != results[2].tokens or results[1].tokens != results[3].tokens


def test_prompts_that_open_alike_share_one_forward_over_the_opening(model):
    engine = Engine(model, THINK, END_THINK, max_rows=4, record_routing=True)
    stem = prompts(1, seed=13)[0]
    opening = (stem * (MIN_SHARED // len(stem) + 1))[: MIN_SHARED + 3]
    tails = [[20, 21], [20, 22, 23], [30]]
    ps = [opening + tail for tail in tails] + [prompts(1, seed=14)[0]]
    results, shapes = run_with_shapes(model, engine, [TurnRequest(i, p, 4, GREEDY) for i, p in enumerate(ps)])
    # The unrelated prompt alone, the opening once, then each tail but its last token (two at most), then steps.
    assert shapes[:3] == [(1, len(ps[3]) - 1), (1, len(opening)), (3, 2)]
    assert all(shape == (4, 1) for shape in shapes[3:])
    for r, p in zip(results, ps):
        assert r.tokens == naive_greedy(model, p, 4)
        with torch.no_grad():
            reference = model(torch.tensor([p + r.tokens[:-1]]))
        assert torch.equal(r.routing, reference.routing[0])
        assert torch.equal(r.sparse_topk, reference.sparse_topk[0])
