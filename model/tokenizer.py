"""The byte-level BPE tokenizer: training, exact encode/decode, chat rendering to ids, and the transformers files.

Text is split by a regex (letters, 1-3 digit groups, punctuation runs, whitespace runs) and then byte-mapped, so
every string encodes losslessly. The special tokens of ``jointrl.model.chat`` take ids ``0 .. len(SPECIAL_TOKENS)-1``
in that order. ``encode`` treats text that spells a special token as plain bytes; only the renderer emits special
ids. The vocabulary always has exactly the requested size: when the corpus supports fewer merges than asked for,
the rest is filled with never-produced ``<|reserved_i|>`` tokens (``n_reserved`` says how many), so the embedding
rows line up with the model config.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from jointrl.model import chat

PRETOKENIZE = (
    r"(?i:'(?:[sdmt]|ll|ve|re))|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
RESERVED = "<|reserved_{}|>"
_N_BYTES = 256
# Text runs whose ids a tokenizer keeps: every episode of an env renders the same tool schemas and system prompt,
# at its reset and twice more per tool turn (the conversation before and after the tool results).
PIECE_CACHE = 1024


def _special(token: str) -> AddedToken:
    return AddedToken(token, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True)


class JointTokenizer:
    """A trained BPE plus the chat format: ids of every marker, rendering, parsing and saving."""

    def __init__(self, backend: Tokenizer):
        self._backend = backend
        # Text never turns into special ids; the renderer places those itself.
        self._backend.encode_special_tokens = True
        ids = {}
        for token in chat.SPECIAL_TOKENS:
            token_id = backend.token_to_id(token)
            if token_id is None:
                raise ValueError(f"tokenizer has no special token {token!r}; train it with train_tokenizer")
            ids[token] = token_id
        self.special_ids: dict[str, int] = ids
        self.bos_id, self.eos_id, self.pad_id = ids[chat.BOS], ids[chat.EOS], ids[chat.PAD]
        self.eot_id = ids[chat.EOT]
        self.think_start_id, self.think_end_id = ids[chat.THINK_OPEN], ids[chat.THINK_CLOSE]
        self.tool_call_start_id, self.tool_call_end_id = ids[chat.CALL_OPEN], ids[chat.CALL_CLOSE]
        self.tool_result_start_id, self.tool_result_end_id = ids[chat.RESULT_OPEN], ids[chat.RESULT_CLOSE]
        self.tools_id = ids[chat.TOOLS]
        self.role_ids: dict[str, int] = {role: ids[t] for role, t in chat.ROLE_TOKENS.items()}
        self.tier_ids: dict[str, int] = {tier: ids[t] for tier, t in chat.TIER_TOKENS.items()}
        added = backend.get_added_tokens_decoder()
        # Every added token (the markers and the reserved filler) is special: none comes out of byte BPE.
        self._special_id_set = frozenset(i for i, t in added.items() if t.special)
        self._id_to_special = {i: t.content for i, t in added.items() if t.special}
        self._piece_ids: dict[str, tuple[int, ...]] = {}

    @property
    def vocab_size(self) -> int:
        """Rows of the embedding: every id the tokenizer can produce or decode."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    @property
    def n_reserved(self) -> int:
        """How many ``<|reserved_i|>`` filler tokens pad the vocabulary to its requested size."""
        return sum(1 for t in self._id_to_special.values() if t.startswith("<|reserved_"))

    def is_special(self, token_id: int) -> bool:
        """Whether an id is a marker (or reserved filler) rather than a byte-level token."""
        return token_id in self._special_id_set

    def encode(self, text: str) -> list[int]:
        """Plain text to ids; spellings of special tokens stay ordinary bytes."""
        return self._backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        """Ids to text with every special token written out."""
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} are outside the vocabulary [0, {self.vocab_size})")
        return self._backend.decode(ids, skip_special_tokens=False)

    def render(
        self, messages: list[dict], tools: list[dict] | None = None, tier: str | None = None,
        add_generation_prompt: bool = False,
    ) -> list[int]:
        """Ids of a conversation in the chat format (see ``jointrl.model.chat``)."""
        return self.render_with_mask(messages, tools, tier, add_generation_prompt)[0]

    def render_with_mask(
        self, messages: list[dict], tools: list[dict] | None = None, tier: str | None = None,
        add_generation_prompt: bool = False,
    ) -> tuple[list[int], list[int]]:
        """Ids plus a mask that is 1 on the tokens the policy generates (assistant turns after the prompt)."""
        pieces = chat.render_pieces(messages, tools, tier, add_generation_prompt)
        ids: list[int] = []
        mask: list[int] = []
        for piece in pieces:
            # One encode per text run (not a batch): keeps the thread pool idle, so forked workers stay safe.
            piece_ids = [self.special_ids[piece.text]] if piece.special else self._encode_piece(piece.text)
            ids += piece_ids
            mask += [int(piece.generated)] * len(piece_ids)
        return ids, mask

    def _encode_piece(self, text: str) -> tuple[int, ...]:
        """`encode` of one text run of a rendering, kept for the next rendering that holds it."""
        ids = self._piece_ids.get(text)
        if ids is None:
            if len(self._piece_ids) >= PIECE_CACHE:
                self._piece_ids.clear()  # simpler than tracking use: the runs still in use cost one encode more
            ids = self._piece_ids[text] = tuple(self.encode(text))
        return ids

    def render_text(
        self, messages: list[dict], tools: list[dict] | None = None, tier: str | None = None,
        add_generation_prompt: bool = False,
    ) -> str:
        """The rendering as text, identical to the saved Jinja chat template's output."""
        return chat.render_text(messages, tools, tier, add_generation_prompt)

    def _pieces_of_ids(self, ids: Sequence[int]) -> Iterator[chat.Piece]:
        run: list[int] = []
        for token_id in ids:
            if token_id in self._special_id_set:
                if run:
                    yield chat.Piece(self.decode(run), False)
                    run = []
                yield chat.Piece(self._id_to_special[token_id], True)
            else:
                run.append(token_id)
        if run:
            yield chat.Piece(self.decode(run), False)

    def parse_assistant(self, text_or_ids: str | Sequence[int]) -> dict:
        """A generated assistant turn (text or ids after the generation prompt) back into a message; never raises."""
        if isinstance(text_or_ids, str):
            return chat.parse_assistant_text(text_or_ids)
        ids = [int(i) for i in text_or_ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            # Out-of-vocabulary ids are a caller bug, not model output.
            raise ValueError(f"token ids {bad[:5]} are outside the vocabulary [0, {self.vocab_size})")
        return chat.parse_pieces(list(self._pieces_of_ids(ids)))

    def save(self, directory: str | Path) -> Path:
        """Write tokenizer.json, tokenizer_config.json (with the chat template) and special_tokens_map.json."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        self._backend.save(str(out / "tokenizer.json"))
        named = {"bos_token": chat.BOS, "eos_token": chat.EOS, "pad_token": chat.PAD}
        config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            **named,
            "add_bos_token": False,
            "add_eos_token": False,
            "clean_up_tokenization_spaces": False,
            "chat_template": chat.chat_template(),
        }
        (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
        (out / "special_tokens_map.json").write_text(json.dumps(named, indent=2) + "\n")
        return out

    @classmethod
    def load(cls, directory: str | Path) -> "JointTokenizer":
        """Read a directory written by ``save``; refuses one whose chat template differs from this code's."""
        path = Path(directory)
        if not (path / "tokenizer.json").is_file():
            raise ValueError(f"{path} has no tokenizer.json")
        config_path = path / "tokenizer_config.json"
        if config_path.is_file():
            saved = json.loads(config_path.read_text()).get("chat_template")
            # Tokenizers saved before the thinking-kwarg checks carry the older template; it renders the same ids.
            if saved is not None and saved not in (chat.chat_template(), chat.chat_template(thinking_kwargs=False)):
                raise ValueError(f"{config_path}: chat_template differs from jointrl.model.chat's format")
        return cls(Tokenizer.from_file(str(path / "tokenizer.json")))


def _backend() -> Tokenizer:
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    backend.decoder = decoders.ByteLevel()
    return backend


def _training_pieces(texts: Iterable[str]) -> Iterator[str]:
    # Markers are never part of a byte-level token, so learning merges across them would waste vocabulary.
    for text in texts:
        if not isinstance(text, str):
            raise ValueError(f"training texts must be strings, got {type(text).__name__}")
        for piece in chat.split_specials(text):
            if not piece.special:
                yield piece.text


def train_tokenizer(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> JointTokenizer:
    """Train the byte-level BPE on texts; the result has exactly ``vocab_size`` ids (reserved filler if needed)."""
    smallest = len(chat.SPECIAL_TOKENS) + _N_BYTES
    if vocab_size < smallest:
        raise ValueError(f"vocab_size={vocab_size} is below {smallest} (special tokens + 256 byte tokens)")
    backend = _backend()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[_special(t) for t in chat.SPECIAL_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_training_pieces(texts), trainer)
    short = vocab_size - backend.get_vocab_size(with_added_tokens=True)
    assert short >= 0, "BPE trainer exceeded the requested vocabulary"
    backend.add_special_tokens([_special(RESERVED.format(i)) for i in range(short)])
    for i, token in enumerate(chat.SPECIAL_TOKENS):
        assert backend.token_to_id(token) == i, f"special token {token} did not get id {i}"
    return JointTokenizer(backend)
