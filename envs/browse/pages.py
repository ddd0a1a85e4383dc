"""Renders the world as text pages with links, history prose and dated figures, and splits them into pages."""
from __future__ import annotations

import random
import re
import textwrap
from dataclasses import dataclass

from jointrl.envs.browse.schema import ATTRS, FACTS, LINKS, LISTS, RELATIONS
from jointrl.envs.browse.world import PRESENT, Entity, World

WIDTH = 100  # no line is longer, so `find` scans short lines
LINK = re.compile(r"\[[^\]]*\]\(wiki://[^)]*\)")
NO_BREAK = "\u00a0"
# Lines per page of a document, and how many lines of history prose a page carries.
PAGE_LINES = {"easy": 80, "medium": 30, "hard": 15, "long": 20}
HISTORY_LINES = {"easy": (1, 2), "medium": (3, 6), "hard": (10, 20), "long": (6, 12)}
DATED_FIGURES = {"easy": 0, "medium": 1, "hard": 2, "long": 2}
# Difficulties whose web also has an outdated census page per region, and that census's year.
OUTDATED = ("long",)
CENSUS_YEAR = 1990

ADJECTIVES = ("small", "stone", "wooden", "new", "second", "larger", "restored")
THINGS = ("bridge", "chapel", "warehouse", "workshop", "mill", "hall", "clock tower")
FEATURES = ("old mill", "market square", "east gate", "main hall", "harbour wall", "archive")
PROSE = (
    "In {y} a {adj} {thing} was built near the {feature}.",
    "A {adj} {thing} from {y} is kept in the local museum.",
    "Records from {y} mention a dispute over the {feature}.",
    "The {feature} was restored in {y} after a long campaign.",
    "In {y} a delegation from {other} stayed for {n} days.",
    "Local histories note a hard winter in {y}.",
    "A commemorative plaque was unveiled in {y}.",
    "In {y} the {feature} was painted by a travelling artist.",
    "The archive holds {n} letters written between {y} and {y2}.",
    "A meeting with representatives of {other} took place in {y}.",
)


@dataclass
class Page:
    """One document: its url, title and text lines (every line at most WIDTH characters)."""

    url: str
    title: str
    lines: list[str]
    facts_end: int  # lines before the History prose: the lead, Facts box and lists live there

    def count(self, size: int) -> int:
        """How many numbered pages of `size` lines the document spans."""
        return max(1, -(-len(self.lines) // size))

    def chunk(self, number: int, size: int) -> list[str]:
        """The lines of numbered page `number` (1-based)."""
        return self.lines[(number - 1) * size: number * size]

    def facts_pages(self, size: int) -> int:
        """How many numbered pages it takes to read everything but the History prose."""
        return max(1, -(-self.facts_end // size))


def link(entity: Entity) -> str:
    """A markdown link to an entity's page."""
    return f"[{entity.title}]({entity.url})"


def figure(key: str, value: int | str) -> str:
    """A fact value as printed: years bare, other counts with thousands separators."""
    if isinstance(value, int) and not ATTRS[key].year:
        return f"{value:,}"
    return str(value)


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _lead(world: World, e: Entity) -> str:
    at = {r: world[u] for r, u in e.rels.items()}
    a = e.attrs
    if e.kind == "person":
        return f"{e.title} is {_a(a['occupation'])} born in {link(at['birthplace'])}."
    if e.kind == "town":
        return f"{e.title} is a town in {link(at['region'])} on the {link(at['river'])}."
    if e.kind == "river":
        return f"The {e.title} is a river; the towns on its banks are listed below."
    if e.kind == "region":
        return f"{e.title} is a region. Its towns are listed below with their founding years and 2020 census populations."
    if e.kind == "company":
        return f"{e.title} is {_a(a['industry'])} company headquartered in {link(at['headquarters'])}."
    if e.kind == "product":
        return f"The {e.title} is a product made by {link(at['maker'])}."
    if e.kind == "club":
        return f"{e.title} is {_a(a['sport'])} club based in {link(at['home'])}."
    assert e.kind == "album", e.kind
    return f"{e.title} is an album by {link(at['artist'])}."


def _dated(e: Entity, rng: random.Random) -> tuple[int, str] | None:
    """A figure from an earlier year that differs from the Facts box: a trap for careless reading."""
    a = e.attrs
    if e.kind == "town":
        y = rng.randrange(1900, 2011, 10)
        return y, f"At the {y} census the population was {int(a['population'] * rng.uniform(0.3, 0.95)):,}."
    if e.kind == "company" and a["founded"] < PRESENT - 5:
        y = rng.randint(a["founded"] + 1, PRESENT - 5)
        return y, f"In {y} the company employed {int(a['employees'] * rng.uniform(0.2, 0.9)) + 1:,} people."
    if e.kind == "club" and a["titles"] > 0 and a["founded"] < PRESENT - 5:
        y = rng.randint(a["founded"] + 1, PRESENT - 5)
        return y, f"By {y} the club had won {rng.randrange(a['titles'])} league titles."
    if e.kind == "river":
        y = rng.randint(1850, 1950)
        km = max(10, a["length_km"] + rng.choice([-1, 1]) * rng.randint(5, 60))
        return y, f"A survey in {y} gave its length as {km:,} km, a figure since revised."
    if e.kind == "album" and a["released"] < PRESENT - 5:
        y = rng.randint(a["released"] + 5, PRESENT)
        return y, f"A {y} reissue added {rng.randint(1, 5)} bonus tracks."
    if e.kind == "product" and a["introduced"] < PRESENT:
        y = rng.randint(a["introduced"] + 1, PRESENT)
        return y, f"An improved model followed in {y}."
    return None


def _history(world: World, e: Entity, rng: random.Random, difficulty: str) -> list[str]:
    """History prose in date order, none of it older than the entity itself."""
    others = [x.title for x in world.entities.values() if x.kind in ("town", "company", "club")]
    since = min(PRESENT - 1, next((v for k, v in e.attrs.items() if ATTRS[k].year), 1700))
    dated = []
    for _ in range(rng.randint(*HISTORY_LINES[difficulty])):
        y = rng.randint(since, PRESENT - 1)
        dated.append((y, rng.choice(PROSE).format(
            y=y, y2=min(PRESENT, y + rng.randint(1, 30)), n=rng.randint(2, 90), adj=rng.choice(ADJECTIVES), thing=rng.choice(THINGS),
            feature=rng.choice(FEATURES), other=rng.choice(others))))
    for _ in range(DATED_FIGURES[difficulty]):
        figure_then = _dated(e, rng)
        if figure_then is not None:
            dated.append(figure_then)
    return [text for _, text in sorted(dated)]


def render(world: World, e: Entity, rng: random.Random, difficulty: str) -> Page:
    """The full text of an entity's page: lead, Facts box, the lists of what links here, history."""
    body = [f"# {e.title}", "", _lead(world, e)]
    confusables = world.confusables(e)
    if confusables:
        body.append("Not to be confused with " + ", ".join(link(x) for x in confusables) + ".")
    body += ["", "Facts", f"  Type: {e.kind}"]
    body += [f"  {ATTRS[k].label}: {figure(k, e.attrs[k])}" for k in FACTS[e.kind]]
    body += [f"  {RELATIONS[r].label}: {link(world[e.rels[r]])}" for r in LINKS[e.kind]]
    for rel in LISTS[e.kind]:
        listed = world.members(e.url, rel)
        if not listed:
            continue
        body += ["", RELATIONS[rel].heading]
        for m in listed:
            shown = "; ".join(f"{ATTRS[k].label}: {figure(k, m.attrs[k])}" for k in RELATIONS[rel].shows)
            body.append(f"  - {link(m)}" + (f" — {shown}" if shown else ""))
    lines = _wrap(body)
    facts_end = len(lines)
    history = _history(world, e, rng, difficulty)
    if history:
        lines += _wrap(["", "History"] + [f"  {line}" for line in history])
    return Page(e.url, e.title, lines, facts_end)


def census(world: World, region: Entity, rng: random.Random) -> Page:
    """An outdated page: a region's towns with their populations at an earlier census, which 2020 questions rule out."""
    title = f"{CENSUS_YEAR} census of {region.title}"
    body = [f"# {title}", "", f"The {CENSUS_YEAR} census of {link(region)}, since superseded by the 2020 census.", "",
            "Facts", "  Type: census", "", "Towns"]
    for town in world.members(region.url, "region"):
        then = int(town.attrs["population"] * rng.uniform(0.5, 0.95))
        body.append(f"  - {link(town)} — Population ({CENSUS_YEAR} census): {then:,}")
    lines = _wrap(body)
    return Page(f"{region.url}-census-{CENSUS_YEAR}", title, lines, len(lines))


def _wrap(body: list[str]) -> list[str]:
    """Lines folded to WIDTH, never inside a link (its spaces are held as no-break spaces while folding)."""
    lines = []
    for line in body:
        if len(line) <= WIDTH:
            lines.append(line)
            continue
        held = LINK.sub(lambda m: m.group().replace(" ", NO_BREAK), line)
        folded = textwrap.wrap(held, WIDTH, subsequent_indent="    ", break_on_hyphens=False)
        lines += [part.replace(NO_BREAK, " ") for part in folded]
    return lines


def render_all(world: World, seed_text: str, difficulty: str) -> dict[str, Page]:
    """Every page of the world (and outdated census pages where the difficulty has them); each page's prose
    comes from its own stream, so the order does not matter."""
    pages = {url: render(world, e, random.Random(f"{seed_text}|{url}"), difficulty) for url, e in world.entities.items()}
    if difficulty in OUTDATED:
        for region in world.of_kind("region"):
            page = census(world, region, random.Random(f"{seed_text}|census|{region.url}"))
            pages[page.url] = page
    return pages
