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
        attrs = {"founded": rng.randint(1050, 1850), "population": int(10 ** rng.uniform(3.2, 5.6))}
        towns.append(world.add("town", namer.town(), attrs, {"river": river, "region": region}))

    def person(born: int, occupation: str) -> Entity:
        """A new person, born in a town that already existed."""
        older = [t for t in towns if t.attrs["founded"] < born] or [min(towns, key=lambda t: t.attrs["founded"])]
        return world.add("person", namer.person(), {"born": born, "occupation": occupation}, {"birthplace": rng.choice(older)})

    def person_for(year: int, youngest: int, oldest: int) -> Entity:
        """Someone aged `youngest`..`oldest` in `year`."""
        # Reuse someone of a fitting age now and then, so people found or invent more than one thing.
        fits = [p for p in world.of_kind("person") if p.attrs["occupation"] in names.OCCUPATIONS
                and year - oldest <= p.attrs["born"] <= year - youngest]
        if fits and rng.random() < 0.35:
            return rng.choice(fits)
        return person(year - rng.randint(youngest, oldest), rng.choice(names.OCCUPATIONS))

    stems = [t.name.split(" ")[0] for t in rng.sample(towns, size.namesakes)]
    makers = []
    for i in range(size.companies):
        industry = rng.choice(sorted(names.INDUSTRIES))
        founded = rng.randint(1850, 2005)
        attrs = {"founded": founded, "employees": int(10 ** rng.uniform(1.7, 4.9)), "industry": industry}
        rels = {"founder": person_for(founded, 22, 60), "headquarters": rng.choice(towns)}
        makers.append(world.add("company", namer.company(industry, stems[i] if i < len(stems) else None), attrs, rels))
    labels = []
    for _ in range(size.labels):
        founded = rng.randint(1900, 1960)
        attrs = {"founded": founded, "employees": int(10 ** rng.uniform(1.5, 3.5)), "industry": names.LABEL_INDUSTRY}
        rels = {"founder": person_for(founded, 22, 60), "headquarters": rng.choice(towns)}
        labels.append(world.add("company", namer.company(names.LABEL_INDUSTRY), attrs, rels))
    for _ in range(size.products):
        maker = rng.choice(makers)
        introduced = rng.randint(maker.attrs["founded"] + 1, min(PRESENT, maker.attrs["founded"] + 50))
        rels = {"maker": maker, "inventor": person_for(introduced, 20, 70)}
        world.add("product", namer.product(maker.attrs["industry"]), {"introduced": introduced}, rels)
    for _ in range(size.clubs):
        founded = rng.randint(1860, 1995)
        attrs = {"founded": founded, "titles": rng.randint(0, 30), "sport": rng.choice(names.SPORTS)}
        world.add("club", namer.club(), attrs, {"club_founder": person_for(founded, 25, 65), "home": rng.choice(towns)})
    borrowed = [t.name for t in rng.sample(towns, size.namesakes)]
    for _ in range(size.musicians):
        artist = person(rng.randint(1930, 1985), rng.choice(names.MUSICIANS))
        born = artist.attrs["born"]
        for year in sorted(rng.sample(range(born + 18, min(PRESENT, born + 55) + 1), rng.randint(1, 4))):
            label = rng.choice([c for c in labels if c.attrs["founded"] <= year] or labels[:1])
            title = namer.album(borrowed.pop() if borrowed else None)
            world.add("album", title, {"released": year, "tracks": rng.randint(6, 16)}, {"artist": artist, "label": label})
    for _ in range(size.people):
        person(rng.randint(1850, 1995), rng.choice(names.OCCUPATIONS))
    return world


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
