"""Edit distances between strings and the longest prefix shared by a list of words."""


def levenshtein(a, b):
    """The fewest single-character insertions, deletions and substitutions turning `a` into `b`."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            cost = 0 if char_a == char_b else 1
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost))
        previous = current
    return previous[-1]


def hamming(a, b):
    """The number of positions where two equal-length strings differ."""
    if len(a) != len(b):
        raise ValueError(f"hamming distance needs equal lengths, got {len(a)} and {len(b)}")
    return sum(1 for x, y in zip(a, b) if x != y)


def common_prefix(words):
    """The longest string every word in `words` starts with ('' for an empty list)."""
    if not words:
        return ""
    prefix = words[0]
    for word in words[1:]:
        end = 0
        while end < min(len(prefix), len(word)) and prefix[end] == word[end]:
            end += 1
        prefix = prefix[:end]
    return prefix


def closest(word, candidates, max_distance=2):
    """The candidate nearest to `word` by edit distance (first on ties), or None if all are too far."""
    best, best_distance = None, max_distance + 1
    for candidate in candidates:
        distance = levenshtein(word, candidate)
        if distance < best_distance:
            best, best_distance = candidate, distance
    return best
