"""Keyword search over an episode's pages: BM25 (bm25s) over titles and text, an exact title ranked first."""
from __future__ import annotations

import re
from dataclasses import dataclass

from jointrl.envs.browse.pages import Page

LINK = re.compile(r"\[([^\]]*)\]\(wiki://[^)]*\)")
SNIPPET = 160
TITLE_WEIGHT = 3  # the title counts as this many copies of itself, so a page outranks pages that mention it


def plain(line: str) -> str:
    """A line with markdown links reduced to their text."""
    return LINK.sub(r"\1", line).strip()


def _title_key(text: str) -> str:
    return " ".join(text.lower().split())


@dataclass
class Hit:
    """One search result: the page, its score and the line that best matches the query."""

    page: Page
    score: float
    snippet: str


class SearchIndex:
    """A BM25 index over a fixed set of pages; built once, queried many times."""

    def __init__(self, pages: list[Page]):
        # Imported here: bm25s (and numpy/scipy under it) costs a quarter second, paid only by episodes that search.
        import bm25s

        self._bm25s = bm25s
        self.pages = pages
        self._titles = {_title_key(p.title): i for i, p in enumerate(pages)}
        corpus = [" ".join([p.title] * TITLE_WEIGHT + [plain(line) for line in p.lines[1:]]) for p in pages]
        self._index = bm25s.BM25()
        self._index.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)

    def search(self, query: str, k: int) -> list[Hit]:
        """The `k` best pages for a query (fewer when fewer pages share a word with it)."""
        ranked: list[tuple[int, float]] = []
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        if tokens.ids and tokens.ids[0]:
            docs, scores = self._index.retrieve(tokens, k=min(k, len(self.pages)), show_progress=False)
            ranked = [(int(d), float(s)) for d, s in zip(docs[0], scores[0]) if s > 0]
        exact = self._titles.get(_title_key(query))
        if exact is not None:
            best = max((s for _, s in ranked), default=0.0)
            ranked = [(exact, best)] + [(d, s) for d, s in ranked if d != exact]
        words = set(re.findall(r"\w+", query.lower()))
        return [Hit(self.pages[d], s, _snippet(self.pages[d], words)) for d, s in ranked[:k]]


def _snippet(page: Page, words: set[str]) -> str:
    """The text line sharing most words with the query (the lead line on a tie), shortened."""
    lines = [plain(line) for line in page.lines[1:] if line.strip() and not line.startswith("#")]
    best = max(lines, key=lambda line: len(words & set(re.findall(r"\w+", line.lower()))), default="")
    return best if len(best) <= SNIPPET else best[: SNIPPET - 1] + "…"
