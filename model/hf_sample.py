"""A small random-weight transformers kimi_linear checkpoint with its own tokenizer and a Kimi-style chat template.

Something to run `jointrl import`, recipes/kimi_linear_import.yaml and the import round trip on without
downloading weights: transformers builds and saves the model (save_pretrained), the tokenizer is a byte-level
BPE trained on jointrl's synthetic corpus with the Kimi-K2 markers as special tokens, and the chat template is
written here in that format (tools declared in a system turn, reasoning in <think>, tool calls in a tool-call
section). Needs transformers (the test extra).

    python -m jointrl.model.hf_sample OUT [--seed 0]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

SPECIALS = (
    "[BOS]", "[EOS]", "[PAD]", "<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "<|im_end|>",
    "<think>", "</think>", "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
    "<|tool_call_end|>", "<|tool_calls_section_end|>",
)
# Each turn is <|im_ROLE|>name<|im_middle|>text<|im_end|>; tool results answer their call by its id.
CHAT_TEMPLATE = (
    "{%- if tools -%}<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}<|im_end|>{%- endif -%}"
    "{%- for message in messages -%}{%- set text = message.content if message.content is string else '' -%}"
    "{%- if message.role == 'user' -%}<|im_user|>user<|im_middle|>{{ text }}<|im_end|>"
    "{%- elif message.role == 'system' -%}<|im_system|>system<|im_middle|>{{ text }}<|im_end|>"
    "{%- elif message.role == 'tool' -%}<|im_system|>tool<|im_middle|>## Return of {{ message.tool_call_id }}\n"
    "{{ text }}<|im_end|>"
    "{%- else -%}<|im_assistant|>assistant<|im_middle|>"
    "{%- if message.reasoning_content is string -%}<think>{{ message.reasoning_content }}</think>{%- endif -%}"
    "{{ text }}{%- if message.tool_calls -%}<|tool_calls_section_begin|>"
    "{%- for call in message.tool_calls -%}{%- set args = call.function.arguments -%}"
    "<|tool_call_begin|>functions.{{ call.function.name }}:{{ loop.index0 }}<|tool_call_argument_begin|>"
    "{{ args if args is string else args | tojson }}<|tool_call_end|>"
    "{%- endfor -%}<|tool_calls_section_end|>{%- endif -%}<|im_end|>"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}"
)
VOCAB_SIZE = 1024
# Three layers (delta, latent, delta), four experts: a few hundred thousand parameters.
KIMI_LINEAR = dict(
    hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=3, num_attention_heads=2,
    num_key_value_heads=2, q_lora_rank=None, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8,
    v_head_dim=16, num_local_experts=4, num_experts_per_tok=2, first_k_dense_replace=1,
    max_position_embeddings=2048,
    linear_attn_config={"kda_layers": [1, 3], "full_attn_layers": [2], "num_heads": 2, "head_dim": 16,
                        "short_conv_kernel_size": 4},
)


def write_tokenizer(directory: Path, vocab_size: int = VOCAB_SIZE) -> int:
    """tokenizer.json and tokenizer_config.json (with the chat template) in directory; the vocabulary size."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    from jointrl.model.tokenizer_corpus import default_corpus

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in SPECIALS],
    )
    backend.train_from_iterator(default_corpus(0, n_chats=300), trainer)
    backend.save(str(directory / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "[BOS]", "eos_token": "[EOS]",
              "pad_token": "[PAD]", "chat_template": CHAT_TEMPLATE}
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return backend.get_vocab_size(with_added_tokens=True)


def write_sample(directory: str | Path, seed: int = 0) -> Path:
    """Write the random kimi_linear checkpoint and its tokenizer into directory."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    vocab = write_tokenizer(directory)
    ids = {name: SPECIALS.index(token) for name, token in
           (("bos_token_id", "[BOS]"), ("eos_token_id", "[EOS]"), ("pad_token_id", "[PAD]"))}
    torch.manual_seed(seed)
    config = AutoConfig.for_model("kimi_linear", vocab_size=vocab, **KIMI_LINEAR, **ids)
    AutoModelForCausalLM.from_config(config).save_pretrained(directory)
    return directory


def main(argv: list[str] | None = None) -> None:
    """python -m jointrl.model.hf_sample OUT: write the sample checkpoint."""
    parser = argparse.ArgumentParser(prog="python -m jointrl.model.hf_sample", description=__doc__.splitlines()[0])
    parser.add_argument("out", help="directory to write (config.json, model.safetensors, tokenizer files)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    args = parser.parse_args(argv)
    print(f"wrote {write_sample(args.out, args.seed)}")


if __name__ == "__main__":
    main()
