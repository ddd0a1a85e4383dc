"""Split prose into words and sentences, and slide n-gram windows over token lists."""

ABBREVIATIONS = ("dr", "mr", "mrs", "ms", "st", "etc", "e.g", "i.e")


def split_words(text):
    """Words of `text`: letters and digits, keeping inner hyphens and apostrophes ("don't", "well-known")."""
    out = []
    current = ""
    for i, char in enumerate(text):
        inner = char in "-'" and current and i + 1 < len(text) and text[i + 1].isalnum()
        if char.isalnum() or inner:
            current += char
        elif current:
            out.append(current)
            current = ""
    if current:
        out.append(current)
    return out


def sentences(text):
    """Sentences end at '.', '!' or '?' followed by a space or the end, except after a known abbreviation."""
    out = []
    start = 0
    for i, char in enumerate(text):
        if char not in ".!?":
            continue
        if i + 1 < len(text) and not text[i + 1].isspace():
            continue
        last_word = text[start:i].split()[-1].lower() if text[start:i].split() else ""
        if char == "." and last_word in ABBREVIATIONS:
            continue
        sentence = text[start:i + 1].strip()
        if sentence:
            out.append(sentence)
        start = i + 1
    rest = text[start:].strip()
    if rest:
        out.append(rest)
    return out


def ngrams(tokens, n):
    """Consecutive windows of `n` tokens, as tuples."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def ngram_counts(tokens, n):
    """How often each window of `n` tokens occurs."""
    counts = {}
    for gram in ngrams(tokens, n):
        counts[gram] = counts.get(gram, 0) + 1
    return counts
