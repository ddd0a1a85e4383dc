"""SFT data: JSONL with file:line errors, Parquet of OpenAI messages through datasets, per-step metrics; the SFT loss."""
import copy
import json
import math
import random

import datasets
import pytest
import torch

from jointrl.model.config import ModelConfig
from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer
from jointrl.rl.sft import SFTBatch, batch_order, batches, read_conversations, sft_loss, train_sft

TOOLS = [{"type": "function", "function": {"name": "shell", "description": "run a command",
                                           "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}]
CALLING = [
    {"role": "user", "content": "count the lines"},
    {"role": "assistant", "content": None, "reasoning_content": "use wc",
     "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\": \"wc -l f\"}"}}]},
    {"role": "tool", "content": "3 f", "tool_call_id": "call_0"},
    {"role": "assistant", "content": "3"},
]
PLAIN = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]


def test_parquet_of_messages_reads_back_as_the_conversations_written(tmp_path):
    path = tmp_path / "chats.parquet"
    datasets.Dataset.from_list([
        {"messages": CALLING, "tools": json.dumps(TOOLS), "tier": "low"},
        {"messages": PLAIN, "tools": None, "tier": None},
    ]).to_parquet(str(path))
    calling, plain = read_conversations(path)
    # Parquet stores every message with every key; keys the conversation never had come back absent.
    assert calling.messages == CALLING and calling.tools == TOOLS and calling.tier == "low"
    assert plain.messages == PLAIN and plain.tools is None and plain.tier is None


def test_parquet_without_a_messages_column_names_the_file_and_columns(tmp_path):
    path = tmp_path / "bad.parquet"
    datasets.Dataset.from_list([{"text": "hello"}]).to_parquet(str(path))
    with pytest.raises(ValueError, match=r"bad\.parquet: no 'messages' column \(columns: text\)"):
        read_conversations(path)


def test_jsonl_keeps_file_and_line_in_errors(tmp_path):
    path = tmp_path / "chats.jsonl"
    path.write_text(json.dumps({"messages": PLAIN}) + "\n\n" + '{"messages": [}\n')
    with pytest.raises(ValueError, match=r"chats\.jsonl:3: not a conversation record"):
        read_conversations(path)
    path.write_text(json.dumps({"messages": PLAIN, "tools": TOOLS}) + "\n")
    [conversation] = read_conversations(path)
    assert conversation.messages == PLAIN and conversation.tools == TOOLS


def test_other_suffixes_and_missing_files_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"must be a \.jsonl or a \.parquet file, got '\.csv'"):
        read_conversations(tmp_path / "chats.csv")
    with pytest.raises(ValueError, match="no such SFT data file"):
        read_conversations(tmp_path / "absent.parquet")


def test_train_sft_reports_loss_lr_and_tokens_per_second_each_step():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(**PRESETS["debug"].model_dump()))
    examples = [([1, 2, 3, 4, 5], [0, 0, 1, 1, 1]), ([6, 7, 8], [0, 1, 1]), ([9, 10, 11, 12], [0, 0, 1, 1])]
    logged = []
    losses = train_sft(model, examples, epochs=2, lr=1e-3, batch_size=2, pad_id=0, log=lambda s, m: logged.append((s, m)))
    assert [s for s, _ in logged] == [1, 2, 3, 4]
    assert [m["loss"] for _, m in logged] == losses
    # Cosine decay over 4 steps: step k (from 1) trains at lr * (1 + cos(pi * (k - 1) / 4)) / 2.
    for step, metrics in logged:
        assert metrics["lr"] == pytest.approx(1e-3 * (1 + math.cos(math.pi * (step - 1) / 4)) / 2)
        assert metrics["tokens_per_s"] > 0


def _padded_tokens(groups, lengths):
    return sum(len(group) * max(lengths[i] for i in group) for group in groups)


def test_length_grouped_batches_cover_every_example_once_and_pad_less():
    # A mix like a cold start's: three short families and one four times as long.
    lengths = [random.Random(i).choice([300, 350, 700, 1500]) for i in range(2000)]
    for group_by_length in (False, True):
        groups = batch_order(lengths, 16, seed=3, group_by_length=group_by_length)
        assert sorted(i for group in groups for i in group) == list(range(2000))
        assert [len(group) for group in groups] == [16] * 125
    shuffled = _padded_tokens(batch_order(lengths, 16, seed=3), lengths)
    grouped = _padded_tokens(batch_order(lengths, 16, seed=3, group_by_length=True), lengths)
    # Random batches of 16 almost always hold a 1,500-token example; grouped ones pad only at window edges.
    assert shuffled > 0.95 * 16 * 1500 * 125
    assert grouped < 1.05 * sum(lengths)


def test_length_grouped_order_is_seeded_and_not_sorted():
    lengths = [random.Random(i).randint(10, 1000) for i in range(640)]
    first = batch_order(lengths, 8, seed=1, group_by_length=True)
    assert first == batch_order(lengths, 8, seed=1, group_by_length=True)
    assert first != batch_order(lengths, 8, seed=2, group_by_length=True)
    longest = [max(lengths[i] for i in group) for group in first]
    assert longest != sorted(longest) and longest != sorted(longest, reverse=True)


def test_the_sft_loss_and_its_gradient_equal_the_masked_mean_over_full_logits():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(**PRESETS["debug"].model_dump()))
    tokens = torch.randint(0, model.cfg.vocab_size, (3, 12))
    targets = torch.randint(0, model.cfg.vocab_size, (3, 12))
    loss_mask = (torch.rand(3, 12) < 0.3).float()
    valid = torch.ones(3, 12, dtype=torch.bool)
    valid[2, 9:] = False  # a padded row: padding never carries loss
    loss_mask[2, 9:] = 0.0
    loss, _ = sft_loss(model, SFTBatch(tokens, targets, loss_mask, valid))
    loss.backward()
    fast = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    # The reference: every position's logits, log-softmax by hand, the mean over the masked positions.
    logits = model(tokens, valid=valid).logits  # [B, T, V]
    nll = -torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None]).squeeze(-1)  # [B, T]
    reference = (nll * loss_mask).sum() / loss_mask.sum()
    reference.backward()
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)
    for name, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(fast[name], p.grad, rtol=1e-5, atol=1e-7, msg=name)


def test_sft_loss_sharing_openings_is_the_plain_loss_and_its_gradients():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(**PRESETS["debug"].model_dump())).train()
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(8, 500, (40,), generator=g).tolist()  # a system prompt every demonstration repeats
    examples = []
    for n in (6, 11, 3, 9):
        reply = torch.randint(8, 500, (n,), generator=g).tolist()
        examples.append((prompt + reply, [0] * 40 + [1] * n))
    examples.append((torch.randint(8, 500, (20,), generator=g).tolist(), [0] * 15 + [1] * 5))  # shares nothing
    (batch,) = batches(examples, len(examples), pad_id=0, seed=0)
    results = []
    for share in (False, True):
        model.zero_grad(set_to_none=True)
        loss, _ = sft_loss(model, batch, share_openings=share)
        loss.backward()
        results.append((loss.item(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (plain, plain_grads), (shared, shared_grads) = results
    assert shared == pytest.approx(plain, rel=1e-5)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, atol=1e-6, rtol=1e-4, msg=name)


def test_an_extra_batch_adds_its_loss_and_expert_load_to_the_step():
    torch.manual_seed(0)
    model = Transformer(PRESETS["debug"].model_copy(update={"vocab_size": 64}))
    reference = copy.deepcopy(model)
    examples = [([1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 0, 1]), ([7, 8, 9, 10], [0, 1, 1, 1])]
    tokens = torch.randint(3, 64, (2, 9))
    extra = SFTBatch(tokens[:, :-1], tokens[:, 1:], (torch.arange(8) % 2 == 0).float().expand(2, 8),
                     torch.ones(2, 8, dtype=torch.bool))
    # The naive step: full logits of each batch, each masked mean over its counted targets, the two summed.
    padded = torch.zeros(2, 6, dtype=torch.long)
    padded[0], padded[1, :4] = torch.tensor(examples[0][0]), torch.tensor(examples[1][0])
    valid = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    mask = torch.tensor([examples[0][1][1:], examples[1][1][1:] + [0, 0]], dtype=torch.float32)
    total, load = 0.0, 0.0
    for inputs, targets, counted, real in ((padded[:, :-1], padded[:, 1:], mask, valid),
                                           (extra.tokens, extra.targets, extra.loss_mask, extra.valid)):
        out = reference(inputs, valid=real)
        nll = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), targets.flatten(), reduction="none")
        total = total + (nll * counted.flatten()).sum() / counted.sum() + out.aux_loss
        load = load + out.expert_load
    optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-2, weight_decay=0.0)
    total.backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
    optimizer.step()
    reference.update_router_biases(load)
    logged = []
    train_sft(model, examples, epochs=1, lr=1e-2, batch_size=2, pad_id=0, extra=lambda: extra,
              log=lambda step, metrics: logged.append(metrics))
    assert logged[0]["extra_loss"] > 0
    # Adam's first step is lr * g / (|g| + eps): an element whose gradient is near eps moves by summation order, up
    # to a few 1e-5 here. An extra loss left out would move nearly every element by up to lr (1e-2).
    for (name, got), want in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4, msg=name)
    for (name, got), want in zip(model.named_buffers(), reference.buffers()):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=name)
