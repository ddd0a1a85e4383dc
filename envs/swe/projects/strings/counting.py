"""Word statistics: counts, the most frequent words, and the share of vowels."""

VOWELS = "aeiou"


def words(text):
    """The lower-case words of `text` (runs of letters and apostrophes)."""
    found = []
    current = ""
    for char in text.lower():
        if char.isalpha() or (char == "'" and current):
            current += char
        else:
            if current:
                found.append(current.strip("'"))
            current = ""
    if current:
        found.append(current.strip("'"))
    return found


def word_counts(text):
    """How often each word occurs in `text`."""
    counts = {}
    for word in words(text):
        counts[word] = counts.get(word, 0) + 1
    return counts


def top_words(text, n, min_length=1):
    """The `n` most frequent words of at least `min_length` letters, ties broken alphabetically."""
    counts = {w: c for w, c in word_counts(text).items() if len(w) >= min_length}
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [word for word, _ in ranked[:n]]


def vowel_ratio(text):
    """The fraction of letters in `text` that are vowels, rounded to 3 places (0.0 without letters)."""
    letters = [char for char in text.lower() if char.isalpha()]
    if not letters:
        return 0.0
    vowels = sum(1 for char in letters if char in VOWELS)
    return round(vowels / len(letters), 3)
