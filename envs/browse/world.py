"""The generated world of one episode: entities with facts and links, built from a seeded random stream."""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

from jointrl.envs.browse import names
from jointrl.envs.browse.schema import ATTRS, RELATIONS

PRESENT = 2020


@dataclass
class Entity:
    """One page's subject: its kind, name, facts (attrs) and links (relation → target url)."""

    url: str
    title: str  # the name, with the kind in brackets when another kind has the same name
    kind: str
    name: str
    attrs: dict[str, int | str]
    rels: dict[str, str]
    twin_of: str | None = None  # the url this near-duplicate distractor imitates


@dataclass(frozen=True)
class Sizes:
    """How many entities of each kind a world starts with."""

    regions: int
    rivers: int
    towns: int
    companies: int
    labels: int
    products: int
    clubs: int
    musicians: int
    people: int
    namesakes: int  # albums named after towns and companies named after town stems


SIZES = {
    "easy": Sizes(regions=2, rivers=3, towns=8, companies=5, labels=2, products=7, clubs=5, musicians=3, people=3, namesakes=0),
    "medium": Sizes(regions=3, rivers=4, towns=12, companies=7, labels=2, products=10, clubs=7, musicians=4, people=4, namesakes=2),
    "hard": Sizes(regions=3, rivers=4, towns=18, companies=9, labels=3, products=12, clubs=9, musicians=5, people=5, namesakes=3),
    "long": Sizes(regions=3, rivers=4, towns=18, companies=9, labels=3, products=12, clubs=9, musicians=5, people=5, namesakes=3),
}


class World:
    """All entities of an episode by url, with the reverse lists (who links here) derived on demand."""

    def __init__(self, namer: names.Namer):
        self.names = namer
        self.entities: dict[str, Entity] = {}
        self._members: dict[tuple[str, str], list[Entity]] | None = None

    def __getitem__(self, url: str) -> Entity:
        return self.entities[url]

    def add(self, kind: str, name: str, attrs: dict, rels: dict, twin_of: str | None = None) -> Entity:
        """Create an entity; a name another kind already uses gets the kind in brackets, as encyclopedias do."""
        clash = any(e.name.lower() == name.lower() for e in self.entities.values())
        title = f"{name} ({kind})" if clash else name
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        url, n = f"wiki://{slug}", 2
        while url in self.entities:
            url, n = f"wiki://{slug}-{n}", n + 1
        entity = Entity(url, title, kind, name, dict(attrs), {r: t.url if isinstance(t, Entity) else t for r, t in rels.items()}, twin_of)
        self.entities[url] = entity
        self._members = None
        return entity

    def remove(self, url: str) -> None:
        """Drop an entity nothing links to (a distractor that did not work out)."""
        assert not any(url in e.rels.values() for e in self.entities.values()), url
        del self.entities[url]
        self._members = None

    def truncate(self, count: int) -> None:
        """Drop every entity added after the first `count`, newest first (a draft question that did not work out)."""
        for url in list(self.entities)[count:][::-1]:
            self.remove(url)

    def of_kind(self, kind: str, twins: bool = True) -> list[Entity]:
        """Entities of one kind, in creation order (near-duplicate distractors left out unless `twins`)."""
        return [e for e in self.entities.values() if e.kind == kind and (twins or e.twin_of is None)]

    def members(self, owner: str, relation: str) -> list[Entity]:
        """The entities whose `relation` points at `owner`, by title: the list printed on the owner's page."""
        if self._members is None:
            self._members = {}
            for e in self.entities.values():
                for rel, target in e.rels.items():
                    self._members.setdefault((target, rel), []).append(e)
            for listed in self._members.values():
                listed.sort(key=lambda e: e.title)
        return self._members.get((owner, relation), [])

    def confusables(self, entity: Entity) -> list[Entity]:
        """Pages easily mistaken for this one: same name of another kind, or a near-duplicate twin."""
        out = [e for e in self.entities.values() if e is not entity and (
            e.name.lower() == entity.name.lower() or e.twin_of == entity.url or entity.twin_of == e.url)]
        return sorted(out, key=lambda e: e.title)


def _person(world: World, rng: random.Random, born: int, occupation: str) -> Entity:
    """A new person, born in a town that already existed."""
    towns = world.of_kind("town", twins=False)
    older = [t for t in towns if t.attrs["founded"] < born] or [min(towns, key=lambda t: t.attrs["founded"])]
    return world.add("person", world.names.person(), {"born": born, "occupation": occupation}, {"birthplace": rng.choice(older)})


def _person_for(world: World, rng: random.Random, year: int, youngest: int, oldest: int) -> Entity:
    """Someone aged `youngest`..`oldest` in `year`."""
    # Reuse someone of a fitting age now and then, so people found or invent more than one thing.
    fits = [p for p in world.of_kind("person", twins=False) if p.attrs["occupation"] in names.OCCUPATIONS
            and year - oldest <= p.attrs["born"] <= year - youngest]
    if fits and rng.random() < 0.35:
        return rng.choice(fits)
    return _person(world, rng, year - rng.randint(youngest, oldest), rng.choice(names.OCCUPATIONS))


def _town(world: World, rng: random.Random, region: Entity, river: Entity) -> Entity:
    attrs = {"founded": rng.randint(1050, 1850), "population": int(10 ** rng.uniform(3.2, 5.6))}
    return world.add("town", world.names.town(), attrs, {"river": river, "region": region})


# The entity makers below take a fixed link or draw it, always in the same order of random draws.


def _company(world: World, rng: random.Random, industry: str, headquarters: Entity | None = None,
             stem: str | None = None) -> Entity:
    label = industry == names.LABEL_INDUSTRY
    founded = rng.randint(1900, 1960) if label else rng.randint(1850, 2005)
    employees = int(10 ** (rng.uniform(1.5, 3.5) if label else rng.uniform(1.7, 4.9)))
    founder = _person_for(world, rng, founded, 22, 60)
    rels = {"founder": founder, "headquarters": headquarters or rng.choice(world.of_kind("town", twins=False))}
    return world.add("company", world.names.company(industry, stem), {"founded": founded, "employees": employees,
                                                                       "industry": industry}, rels)


def _product(world: World, rng: random.Random, maker: Entity) -> Entity:
    introduced = rng.randint(maker.attrs["founded"] + 1, min(PRESENT, maker.attrs["founded"] + 50))
    rels = {"maker": maker, "inventor": _person_for(world, rng, introduced, 20, 70)}
    return world.add("product", world.names.product(maker.attrs["industry"]), {"introduced": introduced}, rels)


def _club(world: World, rng: random.Random, home: Entity | None = None) -> Entity:
    founded = rng.randint(1860, 1995)
    attrs = {"founded": founded, "titles": rng.randint(0, 30), "sport": rng.choice(names.SPORTS)}
    name = world.names.club()
    founder = _person_for(world, rng, founded, 25, 65)
    rels = {"club_founder": founder, "home": home or rng.choice(world.of_kind("town", twins=False))}
    return world.add("club", name, attrs, rels)


def _album(world: World, rng: random.Random, artist: Entity, year: int, label: Entity, borrowed: str | None = None) -> Entity:
    title = world.names.album(borrowed)
    return world.add("album", title, {"released": year, "tracks": rng.randint(6, 16)}, {"artist": artist, "label": label})


def generate(rng: random.Random, difficulty: str) -> World:
    """A consistent world: every link exists, people are born before what they found, make or record."""
    size = SIZES[difficulty]
    world = World(names.Namer(rng))
    namer = world.names
    regions = [world.add("region", namer.region(), {}, {}) for _ in range(size.regions)]
    rivers = [world.add("river", namer.river(), {"length_km": rng.randint(40, 1400)}, {}) for _ in range(size.rivers)]
    towns = []
    for i in range(size.towns):
        # The first towns go round-robin so every region and river lists at least two.
        region = regions[i % len(regions)] if i < 2 * len(regions) else rng.choice(regions)
        river = rivers[i % len(rivers)] if i < 2 * len(rivers) else rng.choice(rivers)
        towns.append(_town(world, rng, region, river))
    stems = [t.name.split(" ")[0] for t in rng.sample(towns, size.namesakes)]
    makers = []
    for i in range(size.companies):
        industry = rng.choice(sorted(names.INDUSTRIES))
        makers.append(_company(world, rng, industry, stem=stems[i] if i < len(stems) else None))
    labels = [_company(world, rng, names.LABEL_INDUSTRY) for _ in range(size.labels)]
    for _ in range(size.products):
        _product(world, rng, rng.choice(makers))
    for _ in range(size.clubs):
        _club(world, rng)
    borrowed = [t.name for t in rng.sample(towns, size.namesakes)]
    for _ in range(size.musicians):
        artist = _person(world, rng, rng.randint(1930, 1985), rng.choice(names.MUSICIANS))
        born = artist.attrs["born"]
        for year in sorted(rng.sample(range(born + 18, min(PRESENT, born + 55) + 1), rng.randint(1, 4))):
            label = rng.choice([c for c in labels if c.attrs["founded"] <= year] or labels[:1])
            _album(world, rng, artist, year, label, borrowed.pop() if borrowed else None)
    for _ in range(size.people):
        _person(world, rng, rng.randint(1850, 1995), rng.choice(names.OCCUPATIONS))
    return world


# Relations whose lists `spawn` can grow with fresh entries (count and trail questions need long lists).
GROWABLE = ("region", "river", "maker", "label", "headquarters", "home")


def spawn(world: World, relation: str, owner: Entity, rng: random.Random) -> Entity:
    """A fresh entry on `owner`'s list of `relation`, consistent with the world (dates, founders' ages)."""
    regions, rivers = world.of_kind("region"), world.of_kind("river")
    if relation in ("region", "river"):
        region = owner if relation == "region" else rng.choice(regions)
        return _town(world, rng, region, owner if relation == "river" else rng.choice(rivers))
    if relation == "maker":
        return _product(world, rng, owner)
    if relation == "label":
        # A musician active (18 to 55) in a year the label already existed.
        artists = [p for p in world.of_kind("person", twins=False) if p.attrs["occupation"] in names.MUSICIANS
                   and owner.attrs["founded"] <= min(PRESENT, p.attrs["born"] + 55)]
        artist = rng.choice(artists) if artists else _person(world, rng, rng.randint(1930, 1985), rng.choice(names.MUSICIANS))
        first = max(artist.attrs["born"] + 18, owner.attrs["founded"])
        return _album(world, rng, artist, rng.randint(first, max(first, min(PRESENT, artist.attrs["born"] + 55))), owner)
    if relation == "headquarters":
        return _company(world, rng, rng.choice(sorted(names.INDUSTRIES)), owner)
    assert relation == "home", relation
    return _club(world, rng, owner)


# Kinds that get near-duplicate twins (a twin region or river would list nothing).
TWINNED = ("person", "town", "company", "product", "club", "album")


def add_twin(world: World, original: Entity, rng: random.Random) -> Entity:
    """A near-duplicate distractor: a name one edit away, other figures, links to other pages of the right kinds."""
    assert original.kind in TWINNED, original.kind
    attrs: dict[str, int | str] = {}
    for key, value in original.attrs.items():
        if not ATTRS[key].numeric:
            attrs[key] = value
        elif ATTRS[key].year:
            attrs[key] = min(PRESENT, value + rng.choice([-1, 1]) * rng.randint(3, 40))
        else:
            attrs[key] = max(1, int(value * rng.choice([rng.uniform(0.4, 0.9), rng.uniform(1.1, 1.8)])))
    event = next((v for k, v in attrs.items() if ATTRS[k].year), PRESENT)
    rels = {}
    for rel in original.rels:
        choices = world.of_kind(RELATIONS[rel].target, twins=False)
        if RELATIONS[rel].target == "person":
            choices = [p for p in choices if p.attrs["born"] <= event - 18] or choices
        rels[rel] = rng.choice(choices)
    return world.add(original.kind, world.names.near_duplicate(original.kind, original.name), attrs, rels, twin_of=original.url)
