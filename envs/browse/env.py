"""The browse environment: a generated offline web per episode, browsed with search/open/find to answer one question."""
from __future__ import annotations

import difflib
import random
from typing import Iterator

from jointrl.envs.base import Action, Env, ToolFailure, tool
from jointrl.envs.browse.answers import matches
from jointrl.envs.browse.find import PatternError, find_lines
from jointrl.envs.browse.pages import PAGE_LINES, Page, render_all
from jointrl.envs.browse.questions import FAMILIES, Question, sample
from jointrl.envs.browse.search import SearchIndex
from jointrl.envs.browse.world import World, generate

MAX_FIND = 20  # matching lines listed by one find

SYSTEM = """You answer a question by browsing a small offline encyclopedia about fictional people, towns, \
rivers, regions, companies, products, sports clubs and albums. Answer only from its pages.

Pages have URLs like wiki://some-title and link to each other as [Title](wiki://some-title). Tools:
- search(query, k=5): keyword search over titles and text; lists titles, URLs and a matching line.
- open(url, page=1): shows a page; long pages are split into numbered pages.
- find(pattern, regex=false): lists the lines of the open page (all its numbered pages) containing the \
pattern, case-insensitive; set regex=true for a regular expression.

A page's Facts box holds its current figures; figures given for earlier years in its History are \
historical. Beware of pages with similar names.

When you know the answer, reply without calling a tool, with the answer alone: a name as written in its \
page title (without a bracketed qualifier such as "(town)"), or a number in digits."""


class BrowseEnv(Env):
    """One question of one family over a generated web; success is a matching final answer."""

    def __init__(self, difficulty: str = "easy", family: str = "lookup", **kwargs):
        if family not in FAMILIES:
            raise ValueError(f"unknown browse family {family!r}; known: {', '.join(FAMILIES)}")
        if difficulty not in PAGE_LINES:
            raise ValueError(f"unknown browse difficulty {difficulty!r}; known: {', '.join(PAGE_LINES)}")
        super().__init__(difficulty=difficulty, family=family, **kwargs)
        self.family = family
        self.page_lines = PAGE_LINES[difficulty]
        self.world: World | None = None
        self.question: Question | None = None
        self._seed_text = ""
        self._pages: dict[str, Page] | None = None
        self._index: SearchIndex | None = None
        self.opened: set[str] = set()
        self.current: str | None = None
        self.searches = 0

    def _reset(self, seed: int) -> list[dict]:
        self._seed_text = f"browse|{self.family}|{self.difficulty}|{seed}"
        rng = random.Random(self._seed_text)
        self.world = generate(rng, self.difficulty)
        self.question = sample(self.world, self.family, self.difficulty, rng, seed)
        # A comparison names its two options: a two-way choice, balanced over seeds by the sampler.
        self.answer_choices = 2 if self.family == "compare" else None
        self._pages, self._index = None, None
        self.opened, self.current, self.searches = set(), None, 0
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": self.question.text}]

    @property
    def pages(self) -> dict[str, Page]:
        """Every page of the episode's web by url (rendered on first use)."""
        if self.world is None:
            raise ToolFailure("the episode has not started; call reset first")
        if self._pages is None:
            self._pages = render_all(self.world, self._seed_text, self.difficulty)
        return self._pages

    @tool(
        "Search the encyclopedia by keywords (BM25 over page titles and text). Returns up to k results, "
        "best first: title, URL and the line that best matches.",
        {"type": "object", "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 200, "description": "keywords, e.g. a name"},
            "k": {"type": "integer", "minimum": 1, "maximum": 10, "description": "how many results (default 5)"},
        }, "required": ["query"]},
        timeout=10.0,
    )
    def search(self, query: str, k: int = 5) -> str:
        """Ranked pages for a keyword query."""
        if self._index is None:
            self._index = SearchIndex(list(self.pages.values()))
        self.searches += 1
        hits = self._index.search(query, k)
        if not hits:
            return f"No page matches {query!r}. Try other words, such as a name from the question."
        lines = [f"Results for {query!r}:"]
        for rank, hit in enumerate(hits, 1):
            # A link as pages write them: after '](' the url is the very tokens an `open` call's JSON string has.
            lines += [f"{rank}. [{hit.page.title}]({hit.page.url})", f"   {hit.snippet}"]
        return "\n".join(lines)

    @tool(
        "Open a page by its URL (wiki://...). Long pages are split into numbered pages: pass page=2, 3, ... "
        "for the rest.",
        {"type": "object", "properties": {
            "url": {"type": "string", "minLength": 1, "maxLength": 300},
            "page": {"type": "integer", "minimum": 1, "description": "which numbered page (default 1)"},
        }, "required": ["url"]},
        timeout=5.0,
    )
    def open(self, url: str, page: int = 1) -> str:
        """One numbered page of a document, with where it sits among the others."""
        url = url.strip()
        doc = self.pages.get(url)
        if doc is None:
            close = difflib.get_close_matches(url, list(self.pages), n=3)
            hint = f" Close matches: {', '.join(close)}." if close else " Use search to find a page's URL."
            raise ToolFailure(f"there is no page at {url!r}.{hint}")
        total = doc.count(self.page_lines)
        if page > total:
            raise ToolFailure(f"{url} has {total} page{'s' * (total > 1)}; page {page} does not exist")
        self.opened.add(url)
        self.current = url
        # Shown whole: a numbered page is at most page_lines lines of at most pages.WIDTH characters.
        body = "\n".join(doc.chunk(page, self.page_lines))
        more = f"page {page} of {total}; open(url={url!r}, page={page + 1}) shows more" if page < total else f"page {page} of {total}; end"
        return f"{doc.title} — {url} — page {page} of {total}\n\n{body}\n\n[{more}]"

    @tool(
        "Find the lines of the open page (all its numbered pages) that contain a pattern. The pattern is "
        "literal and case-insensitive; with regex=true it is a regular expression (no nested repetition, "
        "backreferences or lookarounds).",
        {"type": "object", "properties": {
            "pattern": {"type": "string", "minLength": 1, "maxLength": 100},
            "regex": {"type": "boolean", "description": "treat the pattern as a regular expression (default false)"},
        }, "required": ["pattern"]},
        timeout=5.0,
    )
    def find(self, pattern: str, regex: bool = False) -> str:
        """The matching lines of the open page, with their page and line numbers."""
        if self.current is None:
            raise ToolFailure("no page is open; open a page first")
        doc = self.pages[self.current]
        try:
            hits = find_lines(doc.lines, pattern, regex)
        except PatternError as err:
            raise ToolFailure(str(err)) from err
        if not hits:
            return f"No line of {doc.url} contains {pattern!r}."
        shown = [f"page {i // self.page_lines + 1}, line {i % self.page_lines + 1}: {doc.lines[i].strip()}" for i in hits[:MAX_FIND]]
        more = f" (first {MAX_FIND} shown)" if len(hits) > MAX_FIND else ""
        return f"{len(hits)} line{'s' * (len(hits) > 1)} of {doc.url} match {pattern!r}{more}:\n" + "\n".join(shown)

    def _signals(self) -> dict[str, float]:
        if self.question is None:
            return {"success": 0.0}
        solution = self.question.solution
        correct = float(matches(self.final_answer, solution.answer, solution.numeric, solution.aliases))
        evidence = solution.evidence
        return {
            "success": correct,
            "answer_correct": correct,
            "evidence_visited": len(self.opened & set(evidence)) / len(evidence),
            "pages_opened": float(len(self.opened)),
            "searches": float(self.searches),
        }

    def _solution(self) -> Iterator[Action]:
        assert self.question is not None, "reset before demo"
        solution, seen = self.question.solution, set()
        for op, arg in solution.steps:
            if op == "search":
                yield Action("search", {"query": arg}, reasoning=f'I need the page of "{arg}"; search for it by name.')
                continue
            if arg in seen:
                continue
            seen.add(arg)
            doc = self.pages[arg]
            yield Action("open", {"url": arg}, reasoning=f"Open {doc.title} and read its facts and links.")
            # The facts and lists come before the History prose; read up to where they end.
            for page in range(2, doc.facts_pages(self.page_lines) + 1):
                yield Action("open", {"url": arg, "page": page}, reasoning=f"{doc.title} goes on; read page {page}.")
        yield Action(None, answer=solution.answer, reasoning=f"The pages I read settle it: the answer is {solution.answer}.")

    def close(self) -> None:
        """Drop the episode's web and index; safe to call twice."""
        self.world, self.question, self._pages, self._index = None, None, None, None
        self.current = None
