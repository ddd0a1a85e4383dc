"""The assembled policy: cached decode equals the full forward for every layer kind, padding, replay, training."""
import pytest
import torch

from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer

# Each pattern isolates one attention kind (plus the mixed debug pattern); index_topk 4 < T forces real
# sparse selection in DSA layers.
PATTERNS = {"kda": "KK", "dsa": "SS", "mla": "LL", "mixed": "KSKL"}


def build(pattern: str, **update) -> Transformer:
    cfg = PRESETS["debug"].model_copy(update={"layer_pattern": pattern, "index_topk": 4, **update})
    torch.manual_seed(0)
    model = Transformer(cfg).eval()
    # Perturb the balancing biases so selection is not the router's plain top-k.
    for i in model.moe_layers:
        model.layers[i].ffn.gate.e_score_correction_bias.normal_(0, 0.05)
    return model


@pytest.mark.parametrize("kind", list(PATTERNS))
def test_token_by_token_decode_equals_full_forward(kind):
    model = build(PATTERNS[kind])
    tokens = torch.randint(0, model.cfg.vocab_size, (2, 21))
    with torch.no_grad():
        full = model(tokens).logits
        cache = model.allocate_cache(2, 32)
        steps = [model(tokens[:, t : t + 1], cache=cache).logits for t in range(tokens.shape[1])]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", list(PATTERNS))
def test_chunked_prefill_then_decode_equals_full_forward(kind):
    model = build(PATTERNS[kind])
    tokens = torch.randint(0, model.cfg.vocab_size, (2, 23))
    with torch.no_grad():
        full = model(tokens).logits
        cache = model.allocate_cache(2, 23)
        parts = [model(tokens[:, :9], cache=cache).logits, model(tokens[:, 9:20], cache=cache).logits]
        parts += [model(tokens[:, t : t + 1], cache=cache).logits for t in range(20, 23)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=2e-5, rtol=1e-4)


def test_left_padded_batch_equals_rows_alone():
    model = build(PATTERNS["mixed"])
    long = torch.randint(1, model.cfg.vocab_size, (1, 17))
    short = torch.randint(1, model.cfg.vocab_size, (1, 11))
    batch = torch.zeros(2, 17, dtype=torch.long)
    batch[0], batch[1, 6:] = long[0], short[0]
    valid = batch != 0
    valid[0] = True
    with torch.no_grad():
        padded = model(batch, valid=valid).logits
        alone_long = model(long).logits
        alone_short = model(short).logits
    torch.testing.assert_close(padded[0], alone_long[0], atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(padded[1, 6:], alone_short[0], atol=2e-5, rtol=1e-4)
    assert torch.isfinite(padded).all()


def test_replaying_routing_and_selection_reproduces_logits_after_bias_moved():
    model = build(PATTERNS["mixed"])
    tokens = torch.randint(0, model.cfg.vocab_size, (2, 19))
    with torch.no_grad():
        first = model(tokens)
        # Moving the balancing bias changes which experts the router picks on its own ...
        for i in model.moe_layers:
            model.layers[i].ffn.gate.e_score_correction_bias.add_(torch.randn(model.cfg.n_experts))
        moved = model(tokens)
        replayed = model(tokens, routing=first.routing, sparse_topk=first.sparse_topk)
    assert not torch.equal(moved.routing, first.routing)
    # ... but replaying the recorded experts and selections gives back the same numbers exactly.
    assert torch.equal(replayed.routing, first.routing)
    assert torch.equal(replayed.logits, first.logits)


def test_output_shapes_name_every_moe_and_dsa_layer():
    model = build("KSKL")
    cfg = model.cfg
    out = model(torch.randint(0, cfg.vocab_size, (3, 7)))
    assert out.logits.shape == (3, 7, cfg.vocab_size)
    assert out.routing.shape == (3, 7, cfg.n_layers - cfg.first_dense_layers, cfg.n_active)
    assert out.sparse_topk.shape == (3, 7, 1, cfg.index_topk)
    # Every valid token is counted once per chosen expert in each MoE layer.
    assert out.expert_load.sum(dim=1).tolist() == [3 * 7 * cfg.n_active] * len(model.moe_layers)


def test_training_step_changes_every_parameter_and_lowers_loss():
    model = build(PATTERNS["mixed"]).train()
    torch.manual_seed(1)
    tokens = torch.randint(0, model.cfg.vocab_size, (4, 33))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    losses = []
    for _ in range(8):
        out = model(tokens[:, :-1])
        lm = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), tokens[:, 1:].flatten())
        loss = lm + out.aux_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        model.update_router_biases(out.expert_load)
        losses.append(lm.item())
    unchanged = [name for name, p in model.named_parameters() if torch.equal(p, before[name])]
    assert unchanged == []
    assert losses[-1] < 0.8 * losses[0], losses


def test_activation_checkpointing_gives_the_same_loss_and_gradients():
    """Recomputing each block in backward (learner.activation_checkpointing) changes memory, not numbers."""
    torch.manual_seed(0)
    model = Transformer(PRESETS["debug"]).train()
    tokens = torch.randint(0, model.cfg.vocab_size, (2, 24))

    calls = []
    block_forward = model.layers[0].forward

    def counted(*args, **kwargs):
        calls.append(1)
        return block_forward(*args, **kwargs)

    model.layers[0].forward = counted

    def loss_and_grads(checkpointing: bool):
        calls.clear()
        model.zero_grad()
        model.activation_checkpointing = checkpointing
        out = model(tokens)
        loss = out.logits.log_softmax(-1).mean() + out.aux_loss
        loss.backward()
        # A checkpointed block runs again during backward.
        assert len(calls) == (2 if checkpointing else 1)
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    loss_plain, grads_plain = loss_and_grads(False)
    loss_ckpt, grads_ckpt = loss_and_grads(True)
    assert torch.equal(loss_plain, loss_ckpt)
    assert grads_plain.keys() == grads_ckpt.keys() and len(grads_plain) > 10
    for name in grads_plain:
        torch.testing.assert_close(grads_ckpt[name], grads_plain[name], rtol=1e-5, atol=1e-7, msg=name)
