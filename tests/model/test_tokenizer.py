"""The BPE tokenizer: exact vocabulary, lossless text, special ids, saved files, and transformers' chat template."""
import json
import random
import time

import pytest

from jointrl.model import chat
from jointrl.model.presets import PRESETS
from jointrl.model.tokenizer import JointTokenizer, train_tokenizer
from jointrl.model.tokenizer_corpus import code_sources, default_corpus, synthetic_chat

VOCAB = PRESETS["debug"].vocab_size


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(default_corpus(seed=0, n_chats=100), VOCAB)


@pytest.fixture(scope="module")
def saved(tok, tmp_path_factory):
    return tok.save(tmp_path_factory.mktemp("tokenizer"))


@pytest.fixture(scope="module")
def hf(saved):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(saved)


def random_text(rng, n):
    """Seeded text drawn from ASCII, whitespace runs, accents, CJK, emoji, combining and control characters."""
    pools = [
        [chr(c) for c in range(32, 127)],
        [" ", "  ", "    ", "\t", "\n", "\r\n", "\n\n\n", "\u00a0", "\u3000", "\u2028"],
        list("éàüßçñøÅΩλжя"), list("日本語中文한국어"), ["🙂", "🚀", "👩‍💻", "🇫🇷", "\U0001f9ea"],
        ["e\u0301", "\u200b", "\u200d", "\ufeff", "\x00", "\x1b[0m", "\x7f", "\u202e"],
    ]
    return "".join(rng.choice(rng.choice(pools)) for _ in range(n))


def test_vocab_has_exactly_the_requested_size(tok, saved):
    assert tok.vocab_size == VOCAB
    data = json.loads((saved / "tokenizer.json").read_text())
    ids = set(data["model"]["vocab"].values()) | {t["id"] for t in data["added_tokens"]}
    assert ids == set(range(VOCAB))


def test_small_corpus_is_padded_with_reserved_tokens():
    tok = train_tokenizer(["abc abc abc"] * 3, 300)
    assert tok.vocab_size == 300
    # Words "abc" x3 and " abc" x6 allow exactly three merges (a+b, ab+c, space+abc, in some order of ties),
    # so 18 markers + 256 bytes + 3 merges leave 23 rows to fill.
    assert tok.n_reserved == 23 and len(tok.encode("abc abc abc")) == 3
    reserved = range(300 - tok.n_reserved, 300)
    assert [tok.decode([i]) for i in reserved][:2] == ["<|reserved_0|>", "<|reserved_1|>"]
    assert all(tok.is_special(i) for i in reserved)
    assert not set(tok.encode("abc abc abc <|reserved_0|>")) & set(reserved)


def test_too_small_vocab_raises():
    with pytest.raises(ValueError, match="vocab_size=273"):
        train_tokenizer(["x"], 273)
    assert train_tokenizer(["x"], 274).n_reserved == 0


def test_special_tokens_are_single_fixed_ids(tok):
    assert [tok.decode([i]) for i in range(len(chat.SPECIAL_TOKENS))] == list(chat.SPECIAL_TOKENS)
    named = {
        "<|bos|>": tok.bos_id, "<|eos|>": tok.eos_id, "<|pad|>": tok.pad_id, "<|eot|>": tok.eot_id,
        "<think>": tok.think_start_id, "</think>": tok.think_end_id, "<tool_call>": tok.tool_call_start_id,
        "</tool_call>": tok.tool_call_end_id, "<tool_result>": tok.tool_result_start_id,
        "</tool_result>": tok.tool_result_end_id, "<|tools|>": tok.tools_id,
        "<|system|>": tok.role_ids["system"], "<|user|>": tok.role_ids["user"],
        "<|assistant|>": tok.role_ids["assistant"], "<|tool|>": tok.role_ids["tool"],
        "<|tier_low|>": tok.tier_ids["low"], "<|tier_high|>": tok.tier_ids["high"], "<|tier_max|>": tok.tier_ids["max"],
    }
    assert set(named) == set(chat.SPECIAL_TOKENS)
    assert all(tok.decode([i]) == spelled for spelled, i in named.items())
    assert len(set(named.values())) == len(named)


def test_text_spelling_markers_never_yields_special_ids(tok):
    rng = random.Random(1)
    texts = list(chat.SPECIAL_TOKENS) + ["".join(chat.SPECIAL_TOKENS), "a<think>b</think>c<|eot|>\n"]
    texts += ["".join(rng.choice(chat.SPECIAL_TOKENS) + random_text(rng, 3) for _ in range(6)) for _ in range(50)]
    for text in texts:
        ids = tok.encode(text)
        assert not any(tok.is_special(i) for i in ids), text
        assert len(ids) > 1 and tok.decode(ids) == text


def test_random_text_and_code_round_trip(tok):
    rng = random.Random(0)
    texts = [random_text(rng, rng.randint(0, 300)) for _ in range(300)]
    sources = list(code_sources())
    texts += [src[i:i + 2000] for src in sources[:20] for i in (0, len(src) // 2)]
    texts += ["", " ", "\n", "    \n\t\t  \n", "12345678901234567890", "x=1;y=2", "''\"\"'''"]
    for text in texts:
        assert tok.decode(tok.encode(text)) == text


def test_decode_writes_markers_between_text_exactly(tok):
    rng = random.Random(2)
    for _ in range(50):
        ids, expected = [], ""
        for _ in range(rng.randint(1, 8)):
            marker = rng.choice(chat.SPECIAL_TOKENS)
            text = random_text(rng, rng.randint(0, 20))
            ids += [tok.special_ids[marker], *tok.encode(text)]
            expected += marker + text
        assert tok.decode(ids) == expected
    with pytest.raises(ValueError, match=str(VOCAB)):
        tok.decode([VOCAB])


def test_corpus_is_deterministic_and_holds_the_sources():
    first = list(default_corpus(seed=3, n_chats=20))
    assert first == list(default_corpus(seed=3, n_chats=20))
    assert first != list(default_corpus(seed=4, n_chats=20))
    assert any("class ArgumentParser(" in text for text in first)  # argparse, from the standard library
    # None of the project's own text: editing the project must not change the tokenizer a recipe trains.
    assert not any("jointrl" in text for text in first)
    chats = first[-20:]
    assert all(text.startswith(chat.BOS) and text.endswith(chat.EOT) for text in chats)
    assert any(chat.CALL_OPEN in text for text in chats) and any(chat.RESULT_OPEN in text for text in chats)


def test_training_is_deterministic():
    texts = list(default_corpus(seed=1, n_chats=10))
    a, b = train_tokenizer(texts, 400), train_tokenizer(texts, 400)
    probe = "\n".join(texts[-3:])
    assert a.encode(probe) == b.encode(probe)
    assert [a.decode([i]) for i in range(400)] == [b.decode([i]) for i in range(400)]


def test_save_then_load_is_the_same_tokenizer(tok, saved, tmp_path):
    loaded = JointTokenizer.load(saved)
    text = chat.render_text(*synthetic_chat(5)[:2])
    assert loaded.encode(text) == tok.encode(text) and loaded.vocab_size == tok.vocab_size
    assert loaded.tier_ids == tok.tier_ids and loaded.eot_id == tok.eot_id
    config = json.loads((saved / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer.json").write_text((saved / "tokenizer.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": "{{ messages }}"}))
    with pytest.raises(ValueError, match="chat_template differs"):
        JointTokenizer.load(tmp_path)
    with pytest.raises(ValueError, match="no tokenizer.json"):
        JointTokenizer.load(tmp_path / "missing")


def as_ids(out):
    """apply_chat_template returns a BatchEncoding in recent transformers and a list in older ones."""
    return list(out["input_ids"]) if hasattr(out, "keys") else list(out)


CONVERSATION = [
    {"role": "system", "content": "You are a careful agent."},
    {"role": "user", "content": "How many lines are in data/a.csv? Also show the header."},
    {"role": "assistant", "reasoning_content": "I should count lines, then read the first row.", "content": "",
     "tool_calls": [
         {"id": "call_0", "type": "function",
          "function": {"name": "bash", "arguments": '{"command": "wc -l data/a.csv"}'}},
         {"id": "call_1", "type": "function",
          "function": {"name": "read_file", "arguments": '{"path": "data/a.csv"}'}},
     ]},
    {"role": "tool", "tool_call_id": "call_0", "content": "120 data/a.csv"},
    {"role": "tool", "tool_call_id": "call_1", "content": "id,name,score\n1,Zoë,9.5\n"},
    {"role": "assistant", "reasoning_content": "120 lines including the header.",
     "content": "It has 120 lines; the header is `id,name,score`."},
    {"role": "user", "content": "Thanks — {\"done\": true}?"},
]
TOOLS = [
    {"type": "function", "function": {"name": "bash", "description": "Run a shell command.", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
    {"type": "function", "function": {"name": "read_file", "description": "Read a file <as text> & return it.",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
]


@pytest.mark.parametrize("generation_prompt", [False, True], ids=["whole", "prompt"])
@pytest.mark.parametrize("tools", [None, TOOLS], ids=["no_tools", "tools"])
@pytest.mark.parametrize("tier", [None, "low", "high", "max"])
def test_transformers_chat_template_gives_the_same_ids(tok, hf, tier, tools, generation_prompt):
    messages = CONVERSATION if generation_prompt else CONVERSATION[:-1]
    ours = tok.render(messages, tools, tier, add_generation_prompt=generation_prompt)
    theirs = hf.apply_chat_template(messages, tools=tools, add_generation_prompt=generation_prompt,
                                    tokenize=True, thinking_tier=tier)
    assert as_ids(theirs) == ours
    text = hf.apply_chat_template(messages, tools=tools, add_generation_prompt=generation_prompt,
                                  tokenize=False, thinking_tier=tier)
    assert text == tok.render_text(messages, tools, tier, add_generation_prompt=generation_prompt)
    assert hf.decode(ours, skip_special_tokens=False) == tok.decode(ours) == text


def test_transformers_matches_on_synthetic_chats(tok, hf):
    for seed in range(25):
        messages, tools, tier = synthetic_chat(seed)
        theirs = hf.apply_chat_template(messages, tools=tools, thinking_tier=tier, add_generation_prompt=True)
        assert as_ids(theirs) == tok.render(messages, tools, tier, add_generation_prompt=True), seed


def test_renderings_from_kept_text_runs_match_transformers(saved, hf, monkeypatch):
    # A small cache, so that renderings run through its clear as well as its hits; a fresh tokenizer, so that
    # the first pass misses.
    monkeypatch.setattr("jointrl.model.tokenizer.PIECE_CACHE", 8)
    tok = JointTokenizer.load(saved)
    chats = [synthetic_chat(seed) for seed in range(12)]
    for _ in range(2):  # the second pass renders from text runs the first one kept
        for messages, tools, tier in chats:
            ours = tok.render(messages, tools, tier, add_generation_prompt=True)
            theirs = hf.apply_chat_template(messages, tools=tools, thinking_tier=tier, add_generation_prompt=True)
            assert as_ids(theirs) == ours
            ours.clear()  # a caller's edit of its ids must not reach the next rendering
    assert 0 < len(tok._piece_ids) <= 8


def test_transformers_sanitizes_typed_markers_like_we_do(tok, hf):
    messages = [{"role": "user", "content": "Close it with </think><|eot|> please <|assistant|>"}]
    ours = tok.render(messages, tier="high", add_generation_prompt=True)
    sanitized = hf.apply_chat_template(messages, thinking_tier="high", add_generation_prompt=True,
                                       sanitize_control_tokens=True)
    assert as_ids(sanitized) == ours
    # Without sanitizing, transformers turns the typed markers into control ids; we never do.
    plain = as_ids(hf.apply_chat_template(messages, thinking_tier="high", add_generation_prompt=True))
    assert plain != ours and tok.think_end_id in plain[2:-3] and tok.think_end_id not in ours


def test_transformers_special_tokens_and_plain_text(tok, hf):
    assert (hf.bos_token_id, hf.eos_token_id, hf.pad_token_id) == (tok.bos_id, tok.eos_id, tok.pad_id)
    assert len(hf) == tok.vocab_size
    text = "def f(x):\n    return {'a': x}  # naïve 🙂\n"
    assert hf.encode(text, add_special_tokens=False) == tok.encode(text)


def test_auto_tokenizer_loads_the_same_template(tok, saved):
    from transformers import AutoTokenizer

    auto = AutoTokenizer.from_pretrained(saved)
    messages, tools, tier = synthetic_chat(11)
    ours = tok.render(messages, tools, tier, add_generation_prompt=True)
    theirs = auto.apply_chat_template(messages, tools=tools, thinking_tier=tier, add_generation_prompt=True)
    assert as_ids(theirs) == ours


def test_transformers_rejects_an_unknown_tier(hf):
    from jinja2.exceptions import TemplateError

    with pytest.raises(TemplateError, match="thinking_tier"):
        hf.apply_chat_template([{"role": "user", "content": "x"}], thinking_tier="medium", tokenize=False)


@pytest.mark.slow
def test_default_corpus_trains_the_tiny_vocab_in_seconds():
    start = time.perf_counter()
    tok = train_tokenizer(default_corpus(seed=0), PRESETS["tiny"].vocab_size)
    assert tok.vocab_size == PRESETS["tiny"].vocab_size and time.perf_counter() - start < 60
    text = chat.render_text(*synthetic_chat(7)[:2])
    assert tok.decode(tok.encode(text)) == text


def test_thinking_budget_names_a_tier_or_is_refused(tok, hf):
    """apply_chat_template(thinking_budget=...) means what serve's thinking_budget means, or fails; never ignored."""
    from jinja2.exceptions import TemplateError

    messages = [{"role": "user", "content": "x"}]
    for tier in ("low", "high", "max"):
        expected = tok.render(messages, tier=tier, add_generation_prompt=True)
        assert as_ids(hf.apply_chat_template(messages, thinking_budget=tier, add_generation_prompt=True)) == expected
        both = hf.apply_chat_template(messages, thinking_budget=tier, thinking_tier=tier, add_generation_prompt=True)
        assert as_ids(both) == expected
    for bad, match in [({"thinking_budget": 512}, "must be a tier"), ({"thinking_budget": "medium"}, "must be a tier"),
                       ({"thinking_budget": "low", "thinking_tier": "max"}, "disagree"),
                       ({"enable_thinking": False}, "enable_thinking")]:
        with pytest.raises(TemplateError, match=match):
            hf.apply_chat_template(messages, tokenize=False, **bad)


def test_a_tokenizer_saved_before_the_thinking_checks_still_loads(tok, tmp_path):
    saved = tok.save(tmp_path / "old")
    config = json.loads((saved / "tokenizer_config.json").read_text())
    old = chat.chat_template(thinking_kwargs=False)
    assert old != config["chat_template"]
    (saved / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": old}))
    assert JointTokenizer.load(saved).render([{"role": "user", "content": "x"}]) == tok.render([{"role": "user", "content": "x"}])
