"""Cache operations for continuous batching: rows restart, padding mid-sequence, compaction, growth."""
import torch

from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer


def test_row_restart_mid_pads_and_compaction_match_each_sequence_alone():
    torch.manual_seed(0)
    cfg = PRESETS["debug"].model_copy(update={"index_topk": 4})
    model = Transformer(cfg).eval()
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
