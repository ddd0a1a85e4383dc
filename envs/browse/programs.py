"""Evaluates a question program over a world: its single answer, and the reading steps that establish it.

A program is plain data (JSON-able), e.g. `{"family": "lookup", "ref": {"anchor": url, "path": ["maker"]},
"attr": "founded"}`. A ref names an entity through an anchor page and a chain of links; a list is the
set of entities whose `relation` points at an owner; `where` is a threshold `{"attr", "op", "value"}`.
Anything that would leave the question ambiguous (equal values, two candidates) raises Unanswerable.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from jointrl.envs.browse.schema import ATTRS, EVENTS, RELATIONS
from jointrl.envs.browse.world import Entity, World


class Unanswerable(Exception):
    """The program has no single well-defined answer in this world."""


@dataclass
class Solution:
    """The answer, its accepted spellings, and the search/open steps that read the evidence in order."""

    answer: str
    numeric: bool
    aliases: tuple[str, ...] = ()
    steps: list[tuple[str, str]] = field(default_factory=list)  # ("search", title) | ("open", url)

    @property
    def evidence(self) -> list[str]:
        """The urls that must be read, in reading order, each once."""
        return list(dict.fromkeys(arg for op, arg in self.steps if op == "open"))


def follow(world: World, ref: dict) -> Entity:
    """The entity a ref names: its anchor, then one link per relation of its path."""
    entity = world[ref["anchor"]]
    for rel in ref["path"]:
        if rel not in entity.rels:
            raise Unanswerable(f"{entity.title} has no {rel}")
        entity = world[entity.rels[rel]]
    return entity


def satisfies(entity: Entity, where: dict) -> bool:
    """Whether an entity's figure is strictly on the asked side of the threshold."""
    value = entity.attrs.get(where["attr"])
    if value is None:
        return False
    return value < where["value"] if where["op"] == "<" else value > where["value"]


def _read(world: World, ref: dict, steps: list, own_page: bool) -> Entity:
    """Follow a ref, recording the search for its anchor and every page opened on the way."""
    entity = world[ref["anchor"]]
    steps.append(("search", entity.title))
    for rel in ref["path"]:
        steps.append(("open", entity.url))
        entity = world[entity.rels[rel]]
    if own_page:
        steps.append(("open", entity.url))
    return entity


def _value(entity: Entity, attr: str) -> int | str:
    if attr not in entity.attrs:
        raise Unanswerable(f"{entity.title} has no {attr}")
    return entity.attrs[attr]


def _listing(world: World, program: dict, steps: list, attr: str | None) -> list[Entity]:
    """The owner's list; members' own pages are read only when the list does not print `attr`."""
    owner = _read(world, program["owner"], steps, own_page=True)
    if RELATIONS[program["relation"]].target != owner.kind:
        raise Unanswerable(f"{owner.title} has no {program['relation']} list")
    members = world.members(owner.url, program["relation"])
    if attr is not None and attr not in RELATIONS[program["relation"]].shows:
        steps += [("open", m.url) for m in members]
    return members


def _name(entity: Entity, steps: list) -> Solution:
    return Solution(entity.name, False, (entity.title,), steps)


def _number(value: int, steps: list) -> Solution:
    return Solution(str(value), True, (), steps)


def _lookup(world, p, steps):
    entity = _read(world, p["ref"], steps, own_page=True)
    value = _value(entity, p["attr"])
    return _number(value, steps) if ATTRS[p["attr"]].numeric else Solution(str(value), False, (), steps)


def _chain(world, p, steps):
    if not p["ref"]["path"]:
        raise Unanswerable("a chain needs at least one link")
    return _name(_read(world, p["ref"], steps, own_page=False), steps)


def _compare(world, p, steps):
    a, b = (_read(world, ref, steps, own_page=True) for ref in p["refs"])
    va, vb = _value(a, p["attr"]), _value(b, p["attr"])
    if a is b or va == vb:
        raise Unanswerable("the two compared figures are equal")
    pick_a = (va < vb) == (p["pick"] == "min")
    return _name(a if pick_a else b, steps)


def _difference(world, p, steps):
    a, b = (_read(world, ref, steps, own_page=True) for ref in p["refs"])
    va, vb = _value(a, p["attrs"][0]), _value(b, p["attrs"][1])
    if va == vb:
        raise Unanswerable("the two figures are equal")
    return _number(abs(va - vb), steps)


def _age(world, p, steps):
    entity = _read(world, p["ref"], steps, own_page=True)
    if entity.kind not in EVENTS:
        raise Unanswerable(f"{entity.title} has no person tied to an event")
    relation, attr, _, _ = EVENTS[entity.kind]
    person = world[entity.rels[relation]]
    steps.append(("open", person.url))
    since = person
    if p["since"] == "birthplace":
        since = world[person.rels["birthplace"]]
        steps.append(("open", since.url))
    years = _value(entity, attr) - _value(since, "born" if since is person else "founded")
    if years <= 0:
        raise Unanswerable("the event precedes the date it is counted from")
    return _number(years, steps)


def _count(world, p, steps):
    where = p.get("where")
    members = _listing(world, p, steps, where["attr"] if where else None)
    if not members:
        raise Unanswerable("the list is empty")
    return _number(sum(1 for m in members if where is None or satisfies(m, where)), steps)


def _ordinal(world, p, steps):
    members = _listing(world, p, steps, p["attr"])
    if not 1 <= p["k"] < len(members):
        raise Unanswerable("the list is shorter than the rank asked for")
    ranked = sorted(members, key=lambda m: _value(m, p["attr"]), reverse=p["order"] == "desc")
    # Ties further down a long list do not matter; the first k places must each hold one entry.
    top = [m.attrs[p["attr"]] for m in ranked[:p["k"] + 1]]
    if len(set(top)) != len(top):
        raise Unanswerable("the ranking is not well defined")
    return _name(ranked[p["k"] - 1], steps)


def _aggregate(world, p, steps):
    members = _listing(world, p, steps, p["attr"])
    if len(members) < 2:
        raise Unanswerable("a total needs at least two entries")
    return _number(sum(_value(m, p["attr"]) for m in members), steps)


def _intersection(world, p, steps):
    members = _listing(world, p, steps, p["where"]["attr"])
    hits = [m for m in members if satisfies(m, p["where"])]
    kind = RELATIONS[p["relation"]].source
    elsewhere = [e for e in world.of_kind(kind) if satisfies(e, p["where"])]
    # Both conditions must matter: the list alone and the threshold alone each leave several candidates.
    if len(hits) != 1 or len(members) < 2 or len(elsewhere) < 2:
        raise Unanswerable("the two conditions do not single out one entity")
    return _name(hits[0], steps)


def _trail(world, p, steps):
    members = _listing(world, p, steps, None)
    if len(members) < 3:
        raise Unanswerable("a trail fans out to three entries at least")
    relation = EVENTS[RELATIONS[p["relation"]].source][0]
    towns: dict[str, Entity] = {}
    for member in members:
        person = world[member.rels[relation]]
        town = world[person.rels["birthplace"]]
        steps += [("open", member.url), ("open", person.url), ("open", town.url)]
        towns[town.url] = town
    # Ten pages at least, each holding a fact the answer needs: ten calls or more however the facts are found.
    if len(dict.fromkeys(arg for op, arg in steps if op == "open")) < 10:
        raise Unanswerable("the trail is too short")
    return _number(sum(_value(t, "population") for t in towns.values()), steps)


FAMILIES = {
    "lookup": _lookup,
    "chain": _chain,
    "compare": _compare,
    "difference": _difference,
    "age": _age,
    "count": _count,
    "ordinal": _ordinal,
    "aggregate": _aggregate,
    "intersection": _intersection,
    "trail": _trail,
}


def evaluate(world: World, program: dict) -> Solution:
    """The program's answer in this world with the steps that read its evidence; Unanswerable if ambiguous."""
    return FAMILIES[program["family"]](world, program, [])
