"""The vocabulary of the generated web: entity kinds, their attributes and relations, and their wording."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """A kind of entity: how a question names one and how it is called in 'Which <noun> ...'."""

    noun: str
    anchor: str  # how a question names an entity of this kind, with {name}


@dataclass(frozen=True)
class Attr:
    """A fact in an entity's Facts box, with the phrasings the question families need."""

    label: str  # the Facts-box label on the page
    kinds: tuple[str, ...]
    numeric: bool = True
    year: bool = False
    # A count of a few dozen at most: read alone or differenced, a guess would often hit it.
    narrow: bool = False
    lookup: str = ""  # the question asking for it, with {x}
    more: str = ""  # comparison lead picking the larger value
    less: str = ""  # comparison lead picking the smaller value
    above: tuple[str, str] = ("", "")  # threshold phrase (singular, plural) with {v}
    below: tuple[str, str] = ("", "")
    event: str = ""  # for years: the event it dates, with {x}
    verb: str = ""  # for years: the past participle used by ordinal questions
    diff: str = ""  # for counts and sizes: the difference question, with {a} and {b}
    total: str = ""  # for additive counts: the sum question over {m} (a list of entities)


@dataclass(frozen=True)
class Relation:
    """A link from one entity to exactly one other; its target's page lists every source pointing at it."""

    source: str
    target: str
    label: str  # the Facts-box label on the source page
    phrase: str  # the target named through the source {x}
    heading: str  # the list heading on the target page
    shows: tuple[str, ...]  # attributes of the source printed beside it in that list
    members: str  # the listed sources named through the target {o}
    count: str  # the question counting them
    constraint: str  # a clause saying a source has this target {o}


KINDS: dict[str, Kind] = {
    "person": Kind("person", "{name}"),
    "town": Kind("town", "the town of {name}"),
    "river": Kind("river", "the {name}"),
    "region": Kind("region", "the region of {name}"),
    "company": Kind("company", "the company {name}"),
    "product": Kind("product", "the product {name}"),
    "club": Kind("club", "the club {name}"),
    "album": Kind("album", "the album {name}"),
}


def _years(label, kinds, verb, event, who="Which"):
    """A year fact, worded for every family from its verb ('founded') and event ('the founding of {x}')."""
    return Attr(
        label, kinds, year=True, verb=verb, event=event,
        lookup=f"In what year was {{x}} {verb}?",
        less=f"{who} was {verb} earlier", more=f"{who} was {verb} later",
        below=(f"was {verb} before {{v}}", f"were {verb} before {{v}}"),
        above=(f"was {verb} after {{v}}", f"were {verb} after {{v}}"),
    )


ATTRS: dict[str, Attr] = {
    "founded": _years("Founded", ("town", "company", "club"), "founded", "the founding of {x}"),
    "born": _years("Born", ("person",), "born", "the birth of {x}", who="Who"),
    "introduced": _years("Introduced", ("product",), "introduced", "the introduction of {x}"),
    "released": _years("Released", ("album",), "released", "the release of {x}"),
    "population": Attr(
        "Population (2020 census)", ("town",),
        lookup="What was the population of {x} at the 2020 census?",
        more="Which had the larger population at the 2020 census",
        less="Which had the smaller population at the 2020 census",
        above=("had more than {v} inhabitants at the 2020 census",) * 2,
        below=("had fewer than {v} inhabitants at the 2020 census",) * 2,
        diff="By how many inhabitants did the 2020 census populations of {a} and {b} differ?",
        total="What was the combined 2020 census population of {m}?",
    ),
    "length_km": Attr(
        "Length (km)", ("river",),
        lookup="How long is {x}, in kilometres?",
        more="Which is longer", less="Which is shorter",
        above=("is longer than {v} km", "are longer than {v} km"),
        below=("is shorter than {v} km", "are shorter than {v} km"),
        diff="By how many kilometres do the lengths of {a} and {b} differ?",
    ),
    "employees": Attr(
        "Employees (2020)", ("company",),
        lookup="How many people did {x} employ in 2020?",
        more="Which employed more people in 2020", less="Which employed fewer people in 2020",
        above=("employed more than {v} people in 2020",) * 2,
        below=("employed fewer than {v} people in 2020",) * 2,
        diff="By how many people did the 2020 workforces of {a} and {b} differ?",
        total="How many people did {m} employ in total in 2020?",
    ),
    "tracks": Attr(
        "Tracks (original release)", ("album",), narrow=True,
        more="Which has more tracks on its original release", less="Which has fewer tracks on its original release",
        above=("has more than {v} tracks on its original release", "have more than {v} tracks on their original release"),
        below=("has fewer than {v} tracks on its original release", "have fewer than {v} tracks on their original release"),
        total="How many tracks are there in total on the original releases of {m}?",
    ),
    "titles": Attr(
        "League titles (to 2020)", ("club",), narrow=True,
        more="Which had won more league titles by 2020", less="Which had won fewer league titles by 2020",
        above=("had won more than {v} league titles by 2020",) * 2,
        below=("had won fewer than {v} league titles by 2020",) * 2,
        total="How many league titles had {m} won in total by 2020?",
    ),
    "occupation": Attr("Occupation", ("person",), numeric=False),
    "industry": Attr("Industry", ("company",), numeric=False),
    "sport": Attr("Sport", ("club",), numeric=False),
}

RELATIONS: dict[str, Relation] = {
    "maker": Relation(
        "product", "company", "Maker", "the company that makes {x}", "Products", ("introduced",),
        "the products made by {o}", "How many products does {o} make?", "is made by {o}"),
    "inventor": Relation(
        "product", "person", "Inventor", "the inventor of {x}", "Inventions", (),
        "the inventions of {o}", "How many inventions is {o} credited with?", "was invented by {o}"),
    "founder": Relation(
        "company", "person", "Founder", "the founder of {x}", "Companies founded", (),
        "the companies founded by {o}", "How many companies did {o} found?", "was founded by {o}"),
    "club_founder": Relation(
        "club", "person", "Founder", "the founder of {x}", "Clubs founded", (),
        "the clubs founded by {o}", "How many clubs did {o} found?", "was founded by {o}"),
    "headquarters": Relation(
        "company", "town", "Headquarters", "the town where {x} is headquartered", "Companies headquartered here", (),
        "the companies headquartered in {o}", "How many companies are headquartered in {o}?", "is headquartered in {o}"),
    "home": Relation(
        "club", "town", "Home town", "the home town of {x}", "Clubs based here", (),
        "the clubs based in {o}", "How many clubs are based in {o}?", "is based in {o}"),
    "artist": Relation(
        "album", "person", "Artist", "the musician who recorded {x}", "Discography", ("released",),
        "the albums recorded by {o}", "How many albums has {o} recorded?", "was recorded by {o}"),
    "label": Relation(
        "album", "company", "Label", "the label that released {x}", "Albums on this label", (),
        "the albums released by {o}", "How many albums has {o} released?", "was released by {o}"),
    "birthplace": Relation(
        "person", "town", "Birthplace", "the birthplace of {x}", "People born here", (),
        "the people born in {o}", "How many people were born in {o}?", "was born in {o}"),
    "river": Relation(
        "town", "river", "River", "the river that flows through {x}", "Towns on the river", (),
        "the towns on {o}", "How many towns lie on {o}?", "lies on {o}"),
    "region": Relation(
        "town", "region", "Region", "the region containing {x}", "Towns", ("founded", "population"),
        "the towns in {o}", "How many towns lie in {o}?", "lies in {o}"),
}

# The Facts-box order of each kind (relations are listed after attributes).
FACTS: dict[str, tuple[str, ...]] = {
    kind: tuple(a for a, attr in ATTRS.items() if kind in attr.kinds) for kind in KINDS
}
LINKS: dict[str, tuple[str, ...]] = {
    kind: tuple(r for r, rel in RELATIONS.items() if rel.source == kind) for kind in KINDS
}
LISTS: dict[str, tuple[str, ...]] = {
    kind: tuple(r for r, rel in RELATIONS.items() if rel.target == kind) for kind in KINDS
}
# Events tied to a person (family "age"): the link to that person, the year of the event, who they are
# to it, and the event's verb.
EVENTS: dict[str, tuple[str, str, str, str]] = {
    "company": ("founder", "founded", "its founder", "founded"),
    "club": ("club_founder", "founded", "its founder", "founded"),
    "album": ("artist", "released", "the musician who recorded it", "released"),
    "product": ("inventor", "introduced", "its inventor", "introduced"),
}


def paths(length: int) -> list[tuple[str, ...]]:
    """Every chain of `length` relations that can be followed link by link (each starts where the last ended)."""
    chains: list[tuple[str, ...]] = [()]
    for _ in range(length):
        chains = [c + (r,) for c in chains for r, rel in RELATIONS.items() if not c or RELATIONS[c[-1]].target == rel.source]
    return chains


def start_kind(path: tuple[str, ...], default: str) -> str:
    """The kind a chain starts from (`default` for the empty chain)."""
    return RELATIONS[path[0]].source if path else default


def end_kind(path: tuple[str, ...], start: str) -> str:
    """The kind a chain arrives at."""
    return RELATIONS[path[-1]].target if path else start
