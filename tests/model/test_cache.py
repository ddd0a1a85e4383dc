"""Cache operations for continuous batching: rows restart, padding mid-sequence, compaction, growth."""
import torch

from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer


def sparse_model(seed):
    """The debug preset with 4 selected tokens per query (so DSA selects among real slots), seeded."""
    torch.manual_seed(seed)
    cfg = PRESETS["debug"].model_copy(update={"index_topk": 4})
    return cfg, Transformer(cfg).eval()


def test_row_restart_mid_pads_and_compaction_match_each_sequence_alone():
    cfg, model = sparse_model(0)
    a = torch.randint(1, cfg.vocab_size, (20,))
    b = torch.randint(1, cfg.vocab_size, (6,))
    c = torch.randint(1, cfg.vocab_size, (15,))
    with torch.no_grad():
        alone = {name: model(seq[None]).logits[0] for name, seq in (("a", a), ("b", b), ("c", c))}
        cache = model.allocate_cache(2, 4)  # tiny capacity: appends must grow it
        got = {"a": [], "b": [], "c": []}

        def feed(row0, row1):
            """Feed two right-aligned token lists (None = nothing for that row) as one step."""
            width = max(len(r) for r in (row0, row1) if r is not None)
            tokens = torch.zeros(2, width, dtype=torch.long)
            valid = torch.zeros(2, width, dtype=torch.bool)
            for row, seq in enumerate((row0, row1)):
                if seq is not None:
                    tokens[row, width - len(seq):] = seq
                    valid[row, width - len(seq):] = True
            return model(tokens, valid=valid, cache=cache).logits, valid

        # Row 0 prefills a[:8] while row 1 prefills all of b.
        logits, valid = feed(a[:8], b)
        got["a"].append(logits[0][valid[0]])
        got["b"].append(logits[1][valid[1]])
        # Row 1 is done with b: restart it with c's first 9 tokens while row 0 decodes one token of a.
        cache.reset_rows([1])
        logits, valid = feed(a[8:9], c[:9])
        got["a"].append(logits[0][valid[0]])
        got["c"].append(logits[1][valid[1]])
        freed = cache.compact()
        assert freed > 0
        # Both rows continue token by token after the compaction.
        for t in range(6):
            logits, valid = feed(a[9 + t : 10 + t], c[9 + t : 10 + t])
            got["a"].append(logits[0][valid[0]])
            got["c"].append(logits[1][valid[1]])
            cache.compact()
    torch.testing.assert_close(torch.cat(got["a"]), alone["a"][:15], atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(torch.cat(got["b"]), alone["b"], atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(torch.cat(got["c"]), alone["c"], atol=2e-5, rtol=1e-4)
    # After packing, the cache holds no more columns than the longest row has tokens.
    assert cache.length == 15


def test_row_token_index_counts_real_tokens_per_row():
    cfg = PRESETS["debug"]
    model = Transformer(cfg).eval()
    cache = model.allocate_cache(2, 8)
    tokens = torch.ones(2, 4, dtype=torch.long)
    valid = torch.tensor([[False, True, False, True], [True, True, True, True]])
    with torch.no_grad():
        model(tokens, valid=valid, cache=cache)
    assert cache.row_token_index().tolist() == [[-1, 0, -1, 1], [0, 1, 2, 3]]


def test_rows_taken_out_run_on_their_own_and_put_back_match_each_sequence_alone():
    cfg, model = sparse_model(1)
    seqs = [torch.randint(1, cfg.vocab_size, (n,)) for n in (18, 7, 12)]
    with torch.no_grad():
        alone = [model(seq[None]).logits[0] for seq in seqs]
        cache = model.allocate_cache(3, 4)

        def feed(target, parts):
            """One right-aligned step on `target` (a cache of len(parts) rows); None = nothing for that row."""
            width = max(len(p) for p in parts if p is not None)
            tokens = torch.zeros(len(parts), width, dtype=torch.long)
            valid = torch.zeros(len(parts), width, dtype=torch.bool)
            for row, seq in enumerate(parts):
                if seq is not None:
                    tokens[row, width - len(seq):] = seq
                    valid[row, width - len(seq):] = True
            logits = model(tokens, valid=valid, cache=target).logits
            return [logits[row][valid[row]] for row in range(len(parts))]

        got = [[x] for x in feed(cache, [s[:5] for s in seqs])]
        # Rows 0 and 2 go on alone for 6 and 4 tokens: a cache of just them, written back afterwards.
        part = cache.take_rows([0, 2])
        out = feed(part, [seqs[0][5:11], seqs[2][5:9]])
        got[0].append(out[0])
        got[2].append(out[1])
        cache.put_rows([0, 2], part, [0, 1])
        # Row 1 is copied from a taken-out row 2 too: a row's state can be written into another row.
        twin = cache.take_rows([1])
        cache.put_rows([1], twin, [0])
        # Then all three together, one token at a time, over the rows' new layout.
        for t in range(3):
            out = feed(cache, [seqs[0][11 + t : 12 + t], seqs[1][5 + t : 6 + t], seqs[2][9 + t : 10 + t]])
            for row in range(3):
                got[row].append(out[row])
    for row, n in enumerate((14, 8, 12)):
        torch.testing.assert_close(torch.cat(got[row]), alone[row][:n], atol=2e-5, rtol=1e-4)


def test_put_rows_copies_one_state_into_several_rows_and_grows_the_cache():
    cfg, model = sparse_model(2)
    prompt = torch.randint(1, cfg.vocab_size, (30,))
    nxt = torch.randint(1, cfg.vocab_size, (3,))
    with torch.no_grad():
        alone = model(torch.cat([prompt, nxt])[None]).logits[0, 30:]
        cache = model.allocate_cache(3, 4)
        model(torch.ones(3, 2, dtype=torch.long), cache=cache)  # two columns of history everywhere
        cache.reset_rows([0, 1, 2])
        part = cache.take_rows([0])
        model(prompt[None], cache=part)
        cache.put_rows([0, 1, 2], part, [0, 0, 0])  # 30 slots into a cache that held 2 columns
        assert cache.length == 30 and cache.n_valid.tolist() == [30, 30, 30]
        logits = model(nxt[None].expand(3, -1), cache=cache).logits
    for row in range(3):
        torch.testing.assert_close(logits[row], alone, atol=2e-5, rtol=1e-4)
