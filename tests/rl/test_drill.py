"""The copy drill: which (message -> reply) pairs it takes, how it packs them, and that training on them runs."""
from __future__ import annotations

import copy
import random

import pytest
import torch

from jointrl.model.presets import PRESETS
from jointrl.model.transformer import Transformer
from jointrl.rl.drill import (PAIR_CHARS, SPAN_TOKENS, chat_pairs, drill_batch, drill_pairs, encode_pairs,
                              read_messages, span_batch, train_drill, train_packed, train_spans)
from jointrl.rl.sft import Conversation


def _call(arguments: str) -> dict:
    return {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": arguments}}


def test_pairs_are_each_assistant_turn_with_the_message_it_answers():
    long_output = "x" * (PAIR_CHARS + 50) + "tail"
    conv = Conversation([
        {"role": "system", "content": "You are in a shell."},
        {"role": "user", "content": "Count `pillow` in `a.md`."},
        {"role": "assistant", "content": None, "reasoning_content": "grep", "tool_calls": [_call('{"command": "grep -c pillow a.md"}')]},
        {"role": "tool", "tool_call_id": "call_0", "content": long_output},
        {"role": "assistant", "content": "141", "reasoning_content": "printed"},
        {"role": "assistant", "content": "again"},  # answers no message: not a pair
        {"role": "user", "content": "Thanks."},
        {"role": "assistant", "content": ""},  # says nothing: not a pair
    ])
    call = 'Count `pillow` in `a.md`.\n> {"command": "grep -c pillow a.md"}\n'
    # The turn after the tool output also shows the question: a later call copies from it too.
    answer = "Count `pillow` in `a.md`.\n" + long_output[-PAIR_CHARS:] + "\n> 141\n"
    assert drill_pairs([conv], "tool") == [call, answer]
    assert drill_pairs([conv]) == [call], "by default tool calls only"
    chat = Conversation([
        {"role": "user", "content": "Is a bat a bird?"},
        {"role": "assistant", "content": "No", "reasoning_content": "mammal"},
    ])
    assert drill_pairs([conv, chat], "all") == [call, answer, "Is a bat a bird?\n> No\n"]
    assert drill_pairs([conv, chat], "tool") == [call, answer], "an answer to the user is not a tool turn"
    with pytest.raises(ValueError, match="drill turns must be one of calls, tool, all, got 'some'"):
        drill_pairs([conv], "some")


def test_a_batch_row_packs_whole_distinct_pairs_and_is_cut_at_max_len():
    # Pair i is [10i, 10i + 1, ..., 10i + 2]: a row splits back into whole pairs only if it packed whole pairs.
    encoded = [[10 * i, 10 * i + 1, 10 * i + 2] for i in range(1, 30)]
    tokens, valid, _ = drill_batch(encoded, pack=4, batch_size=5, max_len=100, pad_id=0, rng=random.Random(0))
    assert tokens.shape == (5, 12) and bool(valid.all())
    for row in tokens.tolist():
        heads = row[0::3]
        assert all(row[j:j + 3] == [h, h + 1, h + 2] for j, h in zip(range(0, 12, 3), heads))
        assert len(set(heads)) == 4, "a row repeats a pair"
    cut, cut_valid, _ = drill_batch(encoded, pack=4, batch_size=2, max_len=6, pad_id=0, rng=random.Random(0))
    assert cut.shape == (2, 7) and bool(cut_valid.all())


def test_with_reply_starts_a_row_counts_each_pairs_reply_and_nothing_before_it():
    # Pair i is [10i, ..., 10i + 4] with its reply from index starts[i] on: a token's id says what it is.
    encoded = [[10 * i + j for j in range(5)] for i in range(1, 9)]
    starts = [1 + i % 3 for i in range(8)]
    tokens, valid, counted = drill_batch(encoded, pack=3, batch_size=6, max_len=100, pad_id=0, rng=random.Random(0),
                                         starts=starts)
    for row, marks in zip(tokens.tolist(), counted.tolist()):
        assert marks == [token % 10 >= starts[token // 10 - 1] for token in row]
    _, plain_valid, plain_counted = drill_batch(encoded, pack=3, batch_size=6, max_len=100, pad_id=0,
                                                rng=random.Random(0))
    assert torch.equal(plain_counted, plain_valid), "without starts every real token counts"
    assert torch.equal(plain_valid, valid)


def test_reply_start_splits_a_pair_where_its_message_and_arrow_end():
    from jointrl.model.tokenizer import train_tokenizer
    from jointrl.rl.drill import reply_start

    pairs = ['Count `pillow` in `a.md`.\n> {"command": "grep -c pillow a.md"}\n',
             "Is (12, 145), (45, 60) the profile?\n> points = [(12, 145), (45, 60)]\n",
             "a message with its own\n> arrow inside\n> the reply\n"]
    tokenizer = train_tokenizer(pairs * 20, 300)
    for pair in pairs:
        ids = tokenizer.encode(pair)
        start = reply_start(pair, ids, tokenizer.decode)
        message, reply = pair.split("\n> ", 1)
        assert tokenizer.decode(ids[:start]) == message + "\n>"
        assert tokenizer.decode(ids[start:]).lstrip(" ") == reply


def test_env_balance_draws_each_env_id_alike_however_many_pairs_it_has():
    # Env A has 1 pair, env B 9: drawn by env id, A's pair fills half the slots (1 in 10 drawn by pair).
    encoded = [[10 * i, 10 * i + 1] for i in range(10)]
    envs = [[0], list(range(1, 10))]
    rng = random.Random(0)
    slots = 0
    from_a = 0
    for _ in range(200):
        tokens, _, _ = drill_batch(encoded, pack=4, batch_size=5, max_len=100, pad_id=0, rng=rng, envs=envs)
        heads = tokens[:, 0::2]
        slots += heads.numel()
        from_a += int((heads == 0).sum())
    # 4,000 slots: the binomial standard error of a 0.5 share is 0.008.
    assert abs(from_a / slots - 0.5) < 0.04, from_a / slots
    tokens, _, _ = drill_batch(encoded, pack=4, batch_size=400, max_len=100, pad_id=0, rng=random.Random(0))
    assert abs(int((tokens[:, 0::2] == 0).sum()) / 1600 - 0.1) < 0.03, "by pair, A's one pair is 1 of 10"


def test_training_on_copy_pairs_lowers_the_loss():
    torch.manual_seed(0)
    cfg = PRESETS["debug"].model_copy(update={"vocab_size": 64})
    model = Transformer(cfg)
    rng = random.Random(1)
    # "word ; word": the second half is a copy, so the loss can only fall far by learning to copy.
    encoded = []
    for _ in range(200):
        word = [rng.randrange(8, 64) for _ in range(3)]
        encoded.append([1, *word, 2, *word, 3])
    losses = train_drill(model, encoded, steps=60, lr=3e-3, batch_size=8, pack=6, max_len=64, pad_id=0, seed=0)
    assert len(losses) == 60
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5, losses
    assert not model.training


def test_a_step_matches_the_masked_mean_over_every_position_logits():
    torch.manual_seed(0)
    cfg = PRESETS["debug"].model_copy(update={"vocab_size": 64})
    model = Transformer(cfg)
    reference = copy.deepcopy(model)
    tokens = torch.randint(3, 64, (3, 17))
    valid = torch.ones_like(tokens, dtype=torch.bool)
    valid[2, 12:] = False  # a padded row
    counted = valid & (torch.arange(17) % 3 == 0)
    # The naive step: logits at every position, their cross-entropy masked to the counted targets.
    out = reference(tokens[:, :-1], valid=valid[:, :-1])
    nll = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")
    mask = counted[:, 1:].flatten().float()
    expected = (nll * mask).sum() / mask.sum()
    optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-2, weight_decay=0.0)
    (expected + out.aux_loss).backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
    optimizer.step()
    losses = train_packed(model, lambda: (tokens, valid, counted), steps=1, lr=1e-2)
    assert losses[0] == pytest.approx(expected.item(), rel=1e-6)
    for (name, got), want in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=name)


def test_too_few_pairs_is_an_error():
    model = Transformer(PRESETS["debug"])
    with pytest.raises(ValueError, match="at least 2"):
        train_drill(model, [[1, 2]], steps=1, lr=1e-3, batch_size=1, pack=1, max_len=8, pad_id=0)


def test_span_rows_count_only_a_span_copied_out_of_the_message_before_it():
    # Every token id is used once across the messages, so a span's message is the one holding its first token.
    messages = [list(range(100 * i, 100 * i + n)) for i, n in enumerate((5, 20, 40, 2), start=1)]
    arrow, end = [7], [8]
    tokens, valid, counted = span_batch(messages, arrow, end, batch_size=6, max_len=300, rng=random.Random(0))
    assert tokens.shape == (6, 301) and bool(valid.all())
    spans = 0
    for row, marks in zip(tokens.tolist(), counted.tolist()):
        t = 0
        while t < len(row):
            if not marks[t]:
                t += 1
                continue
            first = t - 1  # the span's first token is not counted: where it starts is a free pick
            last = t
            while last + 1 < len(row) and marks[last + 1]:
                last += 1
            span = row[first: last + 1]
            assert row[first - 1] == arrow[0]
            message = messages[span[0] // 100 - 1]
            start = message.index(span[0])
            # Reference: the span is a run of its message, and that message stands right before the arrow.
            assert span == message[start: start + len(span)]
            assert row[first - 1 - len(message): first - 1] == message
            if last + 1 < len(row):
                assert min(SPAN_TOKENS[0], len(message)) <= len(span) <= SPAN_TOKENS[1] and row[last + 1] == end[0]
            spans += 1
            t = last + 1
    assert spans > 20
    # A message longer than a row keeps its tail, so each row still ends its first segment with counted copies.
    _, _, counted = span_batch([list(range(500))], arrow, end, batch_size=4, max_len=40, rng=random.Random(0))
    assert bool(counted.any(dim=1).all())


def test_read_messages_takes_what_the_policy_reads():
    conv = Conversation([
        {"role": "system", "content": "You are in a shell."},
        {"role": "user", "content": "Count `pillow`."},
        {"role": "assistant", "content": None, "tool_calls": [_call('{"command": "ls"}')]},
        {"role": "tool", "tool_call_id": "call_0", "content": "y" * (PAIR_CHARS + 5)},
        {"role": "assistant", "content": "3"},
    ])
    assert read_messages([conv]) == ["Count `pillow`.", "y" * PAIR_CHARS]


def test_span_training_lowers_the_loss_on_the_copies():
    torch.manual_seed(0)
    cfg = PRESETS["debug"].model_copy(update={"vocab_size": 64})
    model = Transformer(cfg)
    rng = random.Random(1)
    messages = [[rng.randrange(8, 64) for _ in range(rng.randrange(6, 16))] for _ in range(200)]
    losses = train_spans(model, messages, [1], [2], steps=80, lr=3e-3, batch_size=8, max_len=96, seed=0)
    assert len(losses) == 80 and not model.training
    # Chance on the copied tokens is ln(56) = 4.0 or more; the loss falls only as the model copies.
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5, losses
    with pytest.raises(ValueError, match="at least 3 tokens"):
        train_spans(model, [[1, 2]], [1], [2], steps=1, lr=1e-3, batch_size=1, max_len=8)


def _shell_conversation() -> Conversation:
    return Conversation([
        {"role": "system", "content": "You are in a shell."},
        {"role": "user", "content": "Count `pillow` in `a.md`."},
        {"role": "assistant", "content": None, "reasoning_content": "grep",
         "tool_calls": [_call('{"command": "grep -c pillow a.md"}')]},
        {"role": "tool", "tool_call_id": "call_0", "content": "x" * (PAIR_CHARS + 50) + "tail"},
        {"role": "assistant", "content": "141", "reasoning_content": "printed"},
        {"role": "user", "content": "Thanks."},
        {"role": "assistant", "content": ""},  # says nothing: not a pair
    ], tier="low")


def test_chat_pairs_are_the_text_pairs_turns_from_their_question_without_system_prompt():
    conv = _shell_conversation()
    for turns in ("calls", "tool", "all"):
        assert len(chat_pairs([conv], turns)) == len(drill_pairs([conv], turns))
    call, answer = chat_pairs([conv], "tool")
    user, first, tool, second = conv.messages[1:5]
    assert call.messages == [user, first] and call.tools is None and call.tier == "low"
    assert answer.messages == [user, first, {**tool, "content": tool["content"][-PAIR_CHARS:]}, second]


def test_a_chat_pair_counts_the_last_turn_as_the_chat_template_renders_it():
    from jointrl.model.chat import render_text
    from jointrl.model.tokenizer import train_tokenizer

    conv = _shell_conversation()
    tokenizer = train_tokenizer([render_text(conv.messages, None, "low")] * 20, 512)
    pairs = chat_pairs([conv], "tool")
    encoded = encode_pairs(tokenizer, [conv], "tool", "chat")
    assert len(encoded) == 2
    for pair, (ids, start) in zip(pairs, encoded):
        # Reference: the full rendering less the rendering of what comes before the turn, with the assistant's opener.
        whole = render_text(pair.messages, None, pair.tier)
        prompt = render_text(pair.messages[:-1], None, pair.tier, add_generation_prompt=True)
        assert whole.startswith(prompt) and tokenizer.decode(ids[start:]) == whole[len(prompt):]
    assert '"grep -c pillow a.md"' in tokenizer.decode(encoded[0][0][encoded[0][1]:])
    # The text form keeps its own reply starts; without starts none are computed.
    assert [s for _, s in encode_pairs(tokenizer, [conv], "tool", "text", with_starts=False)] == [None, None]
    with pytest.raises(ValueError, match="drill format must be one of text, chat, got 'xml'"):
        encode_pairs(tokenizer, [conv], "tool", "xml")
