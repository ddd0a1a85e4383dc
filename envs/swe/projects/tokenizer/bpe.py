"""Byte-pair-style merges over words split into symbols: count pairs, merge one, learn a merge list."""


def pair_counts(words):
    """{(a, b): count} over adjacent symbols of every word; `words` maps a symbol tuple to its frequency."""
    counts = {}
    for symbols, freq in words.items():
        for pair in zip(symbols, symbols[1:]):
            counts[pair] = counts.get(pair, 0) + freq
    return counts


def merge_pair(symbols, pair):
    """`symbols` with every non-overlapping occurrence of `pair` (left to right) joined into one symbol."""
    out = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def learn_merges(corpus, count):
    """Up to `count` merges learned from a list of words: each time the most frequent pair (ties: smallest pair)."""
    words = {}
    for word in corpus:
        key = tuple(word)
        words[key] = words.get(key, 0) + 1
    merges = []
    for _ in range(count):
        counts = pair_counts(words)
        if not counts:
            break
        best = min(counts, key=lambda pair: (-counts[pair], pair))
        merges.append(best)
        merged = {}
        for symbols, freq in words.items():
            key = merge_pair(symbols, best)
            merged[key] = merged.get(key, 0) + freq
        words = merged
    return merges


def apply_merges(word, merges):
    """Split `word` into symbols by applying learned merges in order."""
    symbols = tuple(word)
    for pair in merges:
        symbols = merge_pair(symbols, pair)
    return list(symbols)
