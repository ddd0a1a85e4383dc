"""A vocabulary: ids for the most frequent tokens, an unknown-token id, encoding and decoding."""

UNKNOWN = "<unk>"


class Vocabulary:
    """Token ids by frequency (ties alphabetical); id 0 is the unknown token."""

    def __init__(self, tokens, min_count=1, max_size=None):
        counts = {}
        for token in tokens:
            counts[token] = counts.get(token, 0) + 1
        kept = sorted((t for t, c in counts.items() if c >= min_count), key=lambda t: (-counts[t], t))
        if max_size is not None:
            kept = kept[: max_size - 1]
        self.itos = [UNKNOWN] + kept
        self.stoi = {token: i for i, token in enumerate(self.itos)}

    def __len__(self):
        return len(self.itos)

    def encode(self, tokens):
        """Ids of `tokens`; unknown tokens get id 0."""
        return [self.stoi.get(token, 0) for token in tokens]

    def decode(self, ids):
        """Tokens of `ids`; an id outside the vocabulary is an error."""
        out = []
        for i in ids:
            if not 0 <= i < len(self.itos):
                raise IndexError(f"id {i} is not in a vocabulary of {len(self.itos)}")
            out.append(self.itos[i])
        return out

    def coverage(self, tokens):
        """The fraction of `tokens` that are known, rounded to 4 places."""
        if not tokens:
            return 1.0
        return round(sum(1 for t in tokens if t in self.stoi and t != UNKNOWN) / len(tokens), 4)
