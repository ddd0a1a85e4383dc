"""Answer matching: normalised exact match for names, a single number within tolerance for figures."""
from __future__ import annotations

import math
import re
import string
import unicodedata

ARTICLES = re.compile(r"\b(a|an|the)\b")
# Thousands separators must come in groups of three, so "1,2" reads as two numbers, not twelve.
NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w,]\d)|(?<![\w.])-?\d+(?:\.\d+)?(?!\w)")
WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
PUNCTUATION = str.maketrans({ch: " " for ch in string.punctuation + "\u2013\u2014\u2018\u2019\u201c\u201d"})


def normalize(text: str) -> str:
    """Lower case, accents folded, punctuation and the articles a/an/the dropped, spaces collapsed."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = ARTICLES.sub(" ", text.translate(PUNCTUATION))
    return " ".join(text.split())


def numbers(text: str) -> list[float]:
    """Every number written in the text: digits (with or without thousands separators) or a word up to twenty."""
    found = [float(m.group().replace(",", "")) for m in NUMBER.finditer(text)]
    found += [float(WORDS[w]) for w in re.findall(r"[a-z]+", text.lower()) if w in WORDS]
    return found


def matches(answer: str | None, gold: str, numeric: bool, aliases: tuple[str, ...] = (), rel_tol: float = 1e-6) -> bool:
    """Whether `answer` gives the gold answer: for figures, exactly one number, equal within `rel_tol`."""
    if not answer or not answer.strip():
        return False
    if numeric:
        found = set(numbers(answer))
        return len(found) == 1 and math.isclose(found.pop(), float(gold), rel_tol=rel_tol, abs_tol=1e-9)
    said = normalize(answer)
    return bool(said) and any(said == normalize(g) for g in (gold, *aliases))
