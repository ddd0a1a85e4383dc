"""An imported checkpoint's own tokenizer and chat template (jointrl.model.hf_tokenizer): rendering, masks, parsing,
the refusal of templates without tool calls, and agent-loop episodes with it.

The tokenizers are byte-level BPEs trained here with the markers each template needs; the templates are short
Jinja written for these tests in the Kimi-K2 style and the DeepSeek-V3.1 style (their marker tokens, nothing else
of the published templates). Expected renderings and masks are written out by hand.
"""
import json

import pytest
import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from jointrl.model.checkpoint import save_pretrained
from jointrl.model.hf_tokenizer import HFTokenizer
from jointrl.model.presets import PRESETS
from jointrl.model.pretrained import load_tokenizer
from jointrl.model.tokenizer import JointTokenizer
from jointrl.model.transformer import Transformer

pytestmark = pytest.mark.usefixtures("one_thread")

ARGS = "{{ c.function.arguments if c.function.arguments is string else c.function.arguments | tojson }}"
KIMI_TEMPLATE = (
    "{%- if tools -%}<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}<|im_end|>{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' or m.role == 'user' -%}"
    "{{ '<|im_system|>' if m.role == 'system' else '<|im_user|>' }}{{ m.role }}<|im_middle|>{{ m.content }}<|im_end|>"
    "{%- elif m.role == 'tool' -%}<|im_system|>tool<|im_middle|>{{ m.content }}<|im_end|>"
    "{%- else -%}<|im_assistant|>assistant<|im_middle|>"
    "{%- if m.reasoning_content is string -%}<think>{{ m.reasoning_content }}</think>{%- endif -%}"
    "{{ m.content or '' }}"
    "{%- if m.tool_calls -%}<|tool_calls_section_begin|>{%- for c in m.tool_calls -%}"
    "<|tool_call_begin|>functions.{{ c.function.name }}:{{ loop.index0 }}<|tool_call_argument_begin|>" + ARGS +
    "<|tool_call_end|>{%- endfor -%}<|tool_calls_section_end|>{%- endif -%}<|im_end|>"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}"
)
KIMI_SPECIALS = [
    "[BOS]", "[EOS]", "[PAD]", "<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "<|im_end|>",
    "<think>", "</think>", "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
    "<|tool_call_end|>", "<|tool_calls_section_end|>",
]
BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
DEEPSEEK_TEMPLATE = (
    "{{ bos_token }}{%- for m in messages if m.role == 'system' -%}{{ m.content }}{%- endfor -%}"
    "{%- if tools -%}\n\n## Tools\n{%- for t in tools -%}\n{{ t | tojson }}{%- endfor -%}{%- endif -%}"
    "{%- set think = thinking is defined and thinking -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}<｜User｜>{{ m.content }}"
    "{%- elif m.role == 'tool' -%}<｜tool▁output▁begin｜>{{ m.content }}<｜tool▁output▁end｜>"
    "{%- elif m.role == 'assistant' -%}<｜Assistant｜>"
    "{%- if think -%}<think>{{ m.reasoning_content or '' }}</think>{%- else -%}</think>{%- endif -%}"
    "{{ m.content or '' }}"
    "{%- if m.tool_calls -%}<｜tool▁calls▁begin｜>{%- for c in m.tool_calls -%}"
    "<｜tool▁call▁begin｜>{{ c.function.name }}<｜tool▁sep｜>" + ARGS + "<｜tool▁call▁end｜>"
    "{%- endfor -%}<｜tool▁calls▁end｜>{%- endif -%}" + EOS +
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<｜Assistant｜>{{ '<think>' if think else '</think>' }}{%- endif -%}"
)
DEEPSEEK_SPECIALS = [
    BOS, EOS, "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>",
]
# A template that knows roles only: it drops the tools and every tool call.
PLAIN_TEMPLATE = (
    "{%- for m in messages -%}<|im_user|>{{ m.role }}<|im_middle|>{{ m.content or '' }}<|im_end|>{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_user|>assistant<|im_middle|>{%- endif -%}"
)
STYLES = {
    "kimi": (KIMI_SPECIALS, KIMI_TEMPLATE, {"bos_token": "[BOS]", "eos_token": "[EOS]", "pad_token": "[PAD]"}),
    "deepseek": (DEEPSEEK_SPECIALS, DEEPSEEK_TEMPLATE, {"bos_token": BOS, "eos_token": EOS}),
    "plain": (KIMI_SPECIALS, PLAIN_TEMPLATE, {"eos_token": "[EOS]"}),
}
CORPUS = ["the answer is 42; read the file a.txt and count words.", '{"path": "a.txt"}', "def f(x): return x"] * 20


def write_tokenizer(directory, style: str, vocab_size: int = 320):
    """A byte-level BPE with the style's markers as special tokens, and its chat template, saved as a checkpoint does."""
    specials, template, named = STYLES[style]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in specials],
    )
    backend.train_from_iterator(CORPUS, trainer)
    directory.mkdir(parents=True, exist_ok=True)
    backend.save(str(directory / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": template, **named}
    (directory / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False))
    return directory


CALLS = [
    {"id": "call_0", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}},
    {"id": "call_1", "type": "function", "function": {"name": "count", "arguments": '{"text": "x y", "unit": "w"}'}},
]
TOOLS = [{"type": "function", "function": {"name": name, "description": f"{name} tool", "parameters": {
    "type": "object", "properties": {}}}} for name in ("read_file", "count")]
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "How many words in a.txt?"},
    {"role": "assistant", "reasoning_content": "read it first", "content": "Reading.", "tool_calls": CALLS},
    {"role": "tool", "tool_call_id": "call_0", "content": "x y"},
    {"role": "tool", "tool_call_id": "call_1", "content": "2"},
    {"role": "assistant", "reasoning_content": "two words", "content": "The answer is 2."},
]
# The assistant turns' generated text, as each style's template writes them (DeepSeek's prompt opens <think>).
GENERATED = {
    "kimi": [
        '<think>read it first</think>Reading.<|tool_calls_section_begin|><|tool_call_begin|>functions.read_file:0'
        '<|tool_call_argument_begin|>{"path": "a.txt"}<|tool_call_end|><|tool_call_begin|>functions.count:1'
        '<|tool_call_argument_begin|>{"text": "x y", "unit": "w"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>',
        "<think>two words</think>The answer is 2.<|im_end|>",
    ],
    "deepseek": [
        'read it first</think>Reading.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>read_file<｜tool▁sep｜>{"path": "a.txt"}'
        '<｜tool▁call▁end｜><｜tool▁call▁begin｜>count<｜tool▁sep｜>{"text": "x y", "unit": "w"}<｜tool▁call▁end｜>'
        "<｜tool▁calls▁end｜>" + EOS,
        "two words</think>The answer is 2." + EOS,
    ],
}


def runs(ids: list[int], mask: list[int]) -> list[list[int]]:
    """The maximal runs of ids where the mask is 1."""
    out, current = [], []
    for token, m in zip(ids, mask):
        if m:
            current.append(token)
        elif current:
            out, current = out + [current], []
    return out + [current] if current else out


@pytest.mark.parametrize("style, fmt, eot, opens_think", [
    ("kimi", "kimi-k2", "<|im_end|>", False), ("deepseek", "deepseek-v3.1", EOS, True),
])
def test_the_probe_finds_the_format_end_of_turn_and_think_block(style, fmt, eot, opens_think, tmp_path):
    tok = HFTokenizer(write_tokenizer(tmp_path, style))
    backend = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert tok.tool_format.name == fmt and tok.opens_think == opens_think
    assert tok.eot_id == backend.token_to_id(eot)
    assert (tok.think_start_id, tok.think_end_id) == (backend.token_to_id("<think>"), backend.token_to_id("</think>"))
    assert tok.vocab_size == backend.get_vocab_size(with_added_tokens=True)


@pytest.mark.parametrize("style", ["kimi", "deepseek"])
def test_mask_marks_exactly_the_assistant_turns_and_they_parse_back(style, tmp_path):
    tok = HFTokenizer(write_tokenizer(tmp_path, style))
    ids, mask = tok.render_with_mask(CONVERSATION, TOOLS, "high")
    generated = runs(ids, mask)
    assert [tok.decode(run) for run in generated] == GENERATED[style]
    # Everything else is the template's own text: the whole rendering is what the template writes.
    assert tok.decode(ids) == tok.render_text(CONVERSATION, TOOLS, "high")
    for run, message in zip(generated, [CONVERSATION[2], CONVERSATION[5]]):
        assert tok.parse_assistant(run) == message
        assert tok.parse_assistant(tok.decode(run)) == message


@pytest.mark.parametrize("style", ["kimi", "deepseek"])
def test_rendering_only_appends_as_the_agent_loop_feeds_it(style, tmp_path):
    tok = HFTokenizer(write_tokenizer(tmp_path, style))
    full, mask = tok.render_with_mask(CONVERSATION, TOOLS, "low")
    prompt = tok.render(CONVERSATION[:2], TOOLS, "low", add_generation_prompt=True)
    first_turn = runs(full, mask)[0]
    assert full[:len(prompt) + len(first_turn)] == prompt + first_turn
    # The loop's feed after a turn: tool results and the next generation prompt, a suffix of the full rendering.
    before = tok.render(CONVERSATION[:3], TOOLS, "low")
    after = tok.render(CONVERSATION[:5], TOOLS, "low", add_generation_prompt=True)
    assert before == prompt + first_turn and after[:len(before)] == before
    assert full[:len(after)] == after


@pytest.mark.parametrize("style", ["kimi", "deepseek"])
def test_malformed_and_truncated_turns_are_listed_not_raised(style, tmp_path):
    tok = HFTokenizer(write_tokenizer(tmp_path, style))
    good = GENERATED[style][0]
    bad_json = good.replace('{"path": "a.txt"}', '{"path": ')
    message = tok.parse_assistant(tok.encode(bad_json))
    assert [c["id"] for c in message["tool_calls"]] == ["call_1"]
    assert [(e["kind"], e["call_index"]) for e in message["parse_errors"]] == [("bad_json", 0)]
    cut = tok.parse_assistant(tok.encode(GENERATED[style][1][:-len(tok.eot)]))
    assert cut["content"] == "The answer is 2." and cut["reasoning_content"] == "two words"
    assert [e["kind"] for e in cut["parse_errors"]] == ["missing_end_of_turn"]


def test_a_template_without_tool_calls_loads_but_refuses_tools(tmp_path):
    directory = write_tokenizer(tmp_path / "plain_ckpt", "plain")
    tok = HFTokenizer(directory)
    assert tok.tool_format is None and tok.decode(tok.render(CONVERSATION[:2])).startswith("<|im_user|>system")
    with pytest.raises(ValueError) as info:
        tok.render(CONVERSATION[:2], TOOLS, "high", add_generation_prompt=True)
    message = str(info.value)
    assert str(directory) in message and "cannot express tool calls" in message and "\n" not in message
    assert "tools given are not rendered" in message


def test_load_tokenizer_tells_jointrl_tokenizers_from_imported_ones(tmp_path, tokenizer):
    save_pretrained(Transformer(PRESETS["debug"]), tmp_path / "native", tokenizer=tokenizer)
    assert isinstance(load_tokenizer(tmp_path / "native"), JointTokenizer)
    assert isinstance(load_tokenizer(write_tokenizer(tmp_path / "imported", "kimi")), HFTokenizer)
    with pytest.raises(FileNotFoundError, match="no tokenizer.json"):
        load_tokenizer(tmp_path / "empty")


@pytest.mark.parametrize("style", ["kimi", "deepseek"])
def test_an_agent_loop_episode_with_tools_runs_on_the_imported_tokenizer(style, tmp_path):
    from jointrl.rl.config.run import RunConfig
    from jointrl.rl.evaluate import evaluate, play
    from jointrl.rl.rollout.agent import Task

    tok = load_tokenizer(write_tokenizer(tmp_path, style))
    torch.manual_seed(0)
    model = Transformer(PRESETS["debug"].model_copy(update={"vocab_size": tok.vocab_size, "max_seq_len": 2048}))
    cfg = RunConfig(model=model.cfg, rollout={"max_new_tokens_per_turn": 12, "max_new_tokens_per_episode": 24,
                                              "max_turns": 2})
    env = "terminal/text-count-v0:easy"
    summary = evaluate(model, tok, cfg, [env], [1_000_000], tiers=["low"])
    assert summary.overall.episodes == 1
    [trajectory] = play(model, tok, cfg, [Task(env, 1_000_000, "low")])
    episode = trajectory.episode
    assert not episode.failed, episode.error
    first = next(i for i, m in enumerate(episode.messages) if m["role"] == "assistant")
    prompt = tok.render(episode.messages[:first], episode.tools, "low", add_generation_prompt=True)
    tokens = trajectory.tokens.tolist()
    assert tokens[:len(prompt)] == prompt and "bash" in tok.decode(prompt)
    # Only sampled tokens are trained.
    assert trajectory.loss_mask[:len(prompt)].sum() == 0 and trajectory.loss_mask[len(prompt):].sum() > 0
