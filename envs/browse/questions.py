"""Samples a question program of one family and difficulty over a world, and words it as a question.

Difficulty is the number of links to follow (easy 1-2 pages, medium 2-3, hard 3-4 and more) and, on
hard, near-duplicate twins of every evidence page; aggregates also grow from a printed list to reading
every entry's page. The long tier (family `trail`) fans out from a list to three or more chains.

Where a family's answer space is small by nature, the seed spreads its answers evenly: a count over
1-60 (`spread`), which of two options is right and whether an age counts from a birth (a few decades) or
from a town's founding (centuries) by the seed's parity, and a list whose one entry is the answer (ordinal,
intersection) to 20-40 entries. No constant answer does better than its share.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from jointrl.envs.browse import programs
from jointrl.envs.browse.names import LABEL_INDUSTRY
from jointrl.envs.browse.programs import Solution, Unanswerable
from jointrl.envs.browse.schema import ATTRS, EVENTS, FACTS, KINDS, RELATIONS, paths
from jointrl.envs.browse.world import GROWABLE, TWINNED, World, add_twin, spawn

YEARS = tuple(a for a, attr in ATTRS.items() if attr.year)
SIZES = tuple(a for a, attr in ATTRS.items() if attr.diff and not attr.narrow)
RANKS = {"asc": ("first", "second", "third"), "desc": ("most recently", "second most recently", "third most recently")}
ATTEMPTS = 400
TWIN_DIFFICULTIES = ("hard", "long")
# The answers of count questions: the length of a list (easy) or how many entries meet a threshold.
COUNTS = {"easy": (2, 61), "medium": (1, 60), "hard": (1, 60)}
# A threshold count's list has 1 to EXTRA entries beyond those that meet it, drawn apart from the count: the
# threshold's place among the values hints at the share that meets it, which then says little about how many.
EXTRA = 40
# Lists that easy count questions ask the length of (each the one list on its owner's page).
COUNTED = ("region", "river", "maker", "label")
# Lists a trail fans out from: each entry links to a person (EVENTS), whose page links to a birthplace.
TRAILS = ("headquarters", "home", "maker", "label")
TRAIL_ENTRIES = (3, 4)
# Ordinal and intersection answers are one entry of a list, so the list is grown to LISTED entries (the seed
# spreads its length): naming an entry at random, after opening only the list, passes 1 time in 20 at most.
LISTED = (20, 40)
# Growable lists that print the figure those questions rank or bound, so the list page alone decides.
PRINTED = ("maker", "region")
PEOPLE = {"company": "the founders of {m}", "club": "the founders of {m}", "product": "the inventors of {m}",
          "album": "the musicians who recorded {m}"}


@dataclass
class Question:
    """A sampled question: its wording, its program (plain data) and the solution in this world."""

    family: str
    text: str
    program: dict
    solution: Solution


@lru_cache(maxsize=None)
def _paths(length: int) -> list[tuple[str, ...]]:
    return paths(length)


def _ref(world: World, rng: random.Random, length: int, kinds) -> dict:
    """A random anchor and a chain of `length` links that ends at one of `kinds`."""
    if length == 0:
        options = [(kind, ()) for kind in kinds]
    else:
        options = [(RELATIONS[p[0]].source, p) for p in _paths(length) if RELATIONS[p[-1]].target in kinds]
    if not options:
        raise Unanswerable(f"no chain of {length} links ends at {kinds}")
    start, path = rng.choice(options)
    anchors = world.of_kind(start, twins=False)
    if not anchors:
        raise Unanswerable(f"no {start} to start from")
    return {"anchor": rng.choice(anchors).url, "path": list(path)}


def spread(seed: int, low: int, high: int) -> int:
    """A value in low..high: each aligned block of (high - low + 1) consecutive seeds takes every value once."""
    span = high - low + 1
    order = list(range(span))
    random.Random(f"spread|{low}|{high}|{seed // span}").shuffle(order)
    return low + order[seed % span]


def _grow(world: World, relation: str, owner, size: int, rng: random.Random) -> list:
    """The owner's list of `relation`, grown with fresh entries to `size` (Unanswerable if already longer)."""
    assert relation in GROWABLE, relation
    members = world.members(owner.url, relation)
    if len(members) > size:
        raise Unanswerable(f"{owner.title} already lists more than {size}")
    # A label's list holds albums and any other company's holds products: grow only the list the page has.
    label = owner.kind == "company" and owner.attrs["industry"] == LABEL_INDUSTRY
    if relation in ("maker", "label") and label != (relation == "label"):
        raise Unanswerable(f"{owner.title} has no {relation} list")
    for _ in range(size - len(members)):
        spawn(world, relation, owner, rng)
    return world.members(owner.url, relation)


def _cut(low: int, high: int, rng: random.Random) -> int:
    """A round-looking integer v with low < v <= high (Unanswerable when there is none)."""
    for step in (1000, 500, 100, 50, 10, 5, 1):
        first = (low // step + 1) * step
        if first <= high:
            return rng.choice(range(first, high + 1, step)[:4])
    raise Unanswerable("no integer between the two figures")


def _threshold(attr: str, values: list[int], hits: int, rng: random.Random) -> dict:
    """A threshold on `attr` met by exactly `hits` of `values`, from below or from above, equal to none of them."""
    s = sorted(values)
    op = rng.choice("<>")
    low, high = (s[hits - 1], s[hits]) if op == "<" else (s[len(s) - hits - 1], s[len(s) - hits])
    return {"attr": attr, "op": op, "value": _cut(low, high - 1, rng)}


def _owner(world, rng, length, relations):
    relation = rng.choice(relations)
    ref = _ref(world, rng, length, (RELATIONS[relation].target,))
    members = world.members(programs.follow(world, ref).url, relation)
    return relation, ref, members


def _numeric(kind: str) -> list[str]:
    return [a for a in FACTS[kind] if ATTRS[a].numeric]


def _lookup(world, rng, difficulty, seed):
    length = rng.choice({"easy": (0, 1), "medium": (1, 2), "hard": (2, 3)}[difficulty])
    ref = _ref(world, rng, length, tuple(k for k in KINDS if FACTS[k]))
    # Wide figures only: a sport, industry or occupation is one of a handful of words a guess would often hit,
    # and so is a number of tracks or titles.
    wide = [a for a in _numeric(programs.follow(world, ref).kind) if not ATTRS[a].narrow]
    return {"family": "lookup", "ref": ref, "attr": rng.choice(wide)}


def _chain(world, rng, difficulty, seed):
    length = rng.choice({"easy": (1, 2), "medium": (2, 3), "hard": (3, 4)}[difficulty])
    return {"family": "chain", "ref": _ref(world, rng, length, tuple(KINDS))}


def _sort(entity) -> tuple[str, bool]:
    """What a name shows about how an entity's figures were drawn: its kind, and for a company whether it is a label."""
    return entity.kind, entity.attrs.get("industry") == LABEL_INDUSTRY


def _compare(world, rng, difficulty, seed):
    length = {"easy": 0, "medium": 1, "hard": 2}[difficulty]
    attr = rng.choice([a for a in ATTRS if ATTRS[a].numeric])
    first = _ref(world, rng, length, ATTRS[attr].kinds)
    # The two options are worded alike (anchors of one sort, the same links) and end at entities of one sort:
    # otherwise the wording alone leans one way (a musician is born later than a club's founder, a label
    # employs fewer than a manufacturer, every town is older than every company).
    anchor = world[first["anchor"]]
    others = [e for e in world.of_kind(anchor.kind, twins=False) if _sort(e) == _sort(anchor) and e is not anchor]
    if not others:
        raise Unanswerable(f"no other {anchor.kind} to compare with")
    second = {"anchor": rng.choice(others).url, "path": list(first["path"])}
    if _sort(programs.follow(world, first)) != _sort(programs.follow(world, second)):
        raise Unanswerable("the two options end at entities of different sorts")
    return {"family": "compare", "refs": [first, second], "attr": attr, "pick": rng.choice(("min", "max"))}


def _difference(world, rng, difficulty, seed):
    lengths = rng.choice({"easy": ((0, 0),), "medium": ((0, 1), (1, 0)), "hard": ((1, 1), (1, 2), (2, 1))}[difficulty])
    attrs = [rng.choice(YEARS) for _ in lengths] if rng.random() < 0.7 else [rng.choice(SIZES)] * 2
    refs = [_ref(world, rng, n, ATTRS[a].kinds) for n, a in zip(lengths, attrs)]
    return {"family": "difference", "refs": refs, "attrs": attrs}


def _age(world, rng, difficulty, seed):
    # No chain of two links ends at a founded, made or recorded thing, so hard counts from one more page:
    # the founding of the person's birthplace. Easy and medium alternate with it, because ages at founding
    # span only a few decades.
    length = {"easy": 0, "medium": 1, "hard": 1}[difficulty]
    since = "birthplace" if difficulty == "hard" else ("born", "birthplace")[seed % 2]
    return {"family": "age", "ref": _ref(world, rng, length, tuple(EVENTS)), "since": since}


def _count(world, rng, difficulty, seed):
    # The list is grown to the count the seed asks for, so counts spread evenly over a wide range.
    target = spread(seed, *COUNTS[difficulty])
    if difficulty == "easy":
        relation = rng.choice(COUNTED)
        ref = _ref(world, rng, 0, (RELATIONS[relation].target,))
        _grow(world, relation, programs.follow(world, ref), target, rng)
        return {"family": "count", "owner": ref, "relation": relation, "where": None}
    # Towns of a region, whose list prints their founding years and populations; hard reaches the region
    # through a longer chain and reads its list over more numbered pages.
    ref = _ref(world, rng, rng.choice({"medium": (0, 1), "hard": (1, 2)}[difficulty]), ("region",))
    owner = programs.follow(world, ref)
    size = max(len(world.members(owner.url, "region")), target + rng.randint(1, EXTRA))
    members = _grow(world, "region", owner, size, rng)
    attr = rng.choice(RELATIONS["region"].shows)
    where = _threshold(attr, [m.attrs[attr] for m in members], target, rng)
    return {"family": "count", "owner": ref, "relation": "region", "where": where}


def _trail(world, rng, difficulty, seed):
    relation = rng.choice(TRAILS)
    ref = _ref(world, rng, rng.choice((1, 2)), (RELATIONS[relation].target,))
    _grow(world, relation, programs.follow(world, ref), rng.choice(TRAIL_ENTRIES), rng)
    return {"family": "trail", "owner": ref, "relation": relation}


def _ordinal(world, rng, difficulty, seed):
    length, ks = {"easy": ((0,), (1,)), "medium": ((1,), (1, 2)), "hard": ((1, 2), (1, 2, 3))}[difficulty]
    relation, ref, _ = _listed(world, rng, seed, rng.choice(length))
    attr = next(a for a in FACTS[RELATIONS[relation].source] if ATTRS[a].year)
    return {"family": "ordinal", "owner": ref, "relation": relation, "attr": attr, "k": rng.choice(ks), "order": rng.choice(("asc", "desc"))}


def _aggregate(world, rng, difficulty, seed):
    length = {"easy": 0, "medium": 1, "hard": 2}[difficulty]
    relations = [r for r in RELATIONS if any(ATTRS[a].total for a in FACTS[RELATIONS[r].source])]
    relation, ref, members = _owner(world, rng, length, relations)
    if difficulty == "hard" and len(members) < 3:
        raise Unanswerable("a hard total sums at least three entries")
    attr = next(a for a in FACTS[RELATIONS[relation].source] if ATTRS[a].total)
    return {"family": "aggregate", "owner": ref, "relation": relation, "attr": attr}


def _intersection(world, rng, difficulty, seed):
    length = {"easy": 0, "medium": 1, "hard": 2}[difficulty]
    relation, ref, members = _listed(world, rng, seed, length)
    attr = rng.choice(RELATIONS[relation].shows)
    return {"family": "intersection", "owner": ref, "relation": relation,
            "where": _threshold(attr, [m.attrs[attr] for m in members], 1, rng)}


def _listed(world, rng, seed, length):
    """A printed list `length` links away, grown to LISTED entries: (relation, ref to its owner, entries)."""
    relation = rng.choice(PRINTED)
    ref = _ref(world, rng, length, (RELATIONS[relation].target,))
    return relation, ref, _grow(world, relation, programs.follow(world, ref), spread(seed, *LISTED), rng)


SAMPLERS = {
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
FAMILIES = tuple(SAMPLERS)


def name_ref(world: World, ref: dict) -> str:
    """The ref in words: 'the founder of the company that makes the product "Zorvex Lamp"'.

    The name is quoted as a search call's JSON writes it, so the question holds it as the very tokens the call
    does: after a space a name starts on a space-prefixed token, a different id than after a quote, and a small
    policy then copies the name wrong (docs/learning.md).
    """
    anchor = world[ref["anchor"]]
    text = KINDS[anchor.kind].anchor.format(name=f'"{anchor.name}"')
    for rel in ref["path"]:
        text = RELATIONS[rel].phrase.format(x=text)
    return text


def word(world: World, p: dict) -> str:
    """The question a program asks, as the user sees it."""
    family = p["family"]
    if family == "lookup":
        return ATTRS[p["attr"]].lookup.format(x=name_ref(world, p["ref"]))
    if family == "chain":
        lead = "Who is" if programs.follow(world, p["ref"]).kind == "person" else "What is the name of"
        return f"{lead} {name_ref(world, p['ref'])}?"
    if family == "compare":
        attr = ATTRS[p["attr"]]
        a, b = (name_ref(world, r) for r in p["refs"])
        return f"{attr.less if p['pick'] == 'min' else attr.more}: {a} or {b}? Answer with the name."
    if family == "difference":
        (a, b), (x, y) = (name_ref(world, r) for r in p["refs"]), p["attrs"]
        if x == y and ATTRS[x].diff:
            return ATTRS[x].diff.format(a=a, b=b)
        return f"How many years passed between {ATTRS[x].event.format(x=a)} and {ATTRS[y].event.format(x=b)}?"
    if family == "age":
        _, _, who, verb = EVENTS[programs.follow(world, p["ref"]).kind]
        since = f"the birth of {who}" if p["since"] == "born" else f"the founding of the birthplace of {who}"
        return f"How many years after {since} was {name_ref(world, p['ref'])} {verb}?"
    members = RELATIONS[p["relation"]].members.format(o=name_ref(world, p["owner"]))
    if family == "count":
        if p["where"] is None:
            return RELATIONS[p["relation"]].count.format(o=name_ref(world, p["owner"]))
        return f"How many of {members} {_condition(p['where'], plural=True)}?"
    if family == "ordinal":
        return f"Of {members}, which one was {ATTRS[p['attr']].verb} {RANKS[p['order']][p['k'] - 1]}?"
    if family == "aggregate":
        return ATTRS[p["attr"]].total.format(m=members)
    if family == "trail":
        people = PEOPLE[RELATIONS[p["relation"]].source].format(m=members)
        return f"What is the combined 2020 census population of the towns where {people} were born? Count each town once."
    assert family == "intersection", family
    rel = RELATIONS[p["relation"]]
    constraint = rel.constraint.format(o=name_ref(world, p["owner"]))
    return f"Which {KINDS[rel.source].noun} {constraint} and {_condition(p['where'], plural=False)}?"


def _condition(where: dict, plural: bool) -> str:
    attr = ATTRS[where["attr"]]
    phrase = (attr.below if where["op"] == "<" else attr.above)[int(plural)]
    return phrase.format(v=where["value"] if attr.year else f"{where['value']:,}")


def sample(world: World, family: str, difficulty: str, rng: random.Random, seed: int) -> Question:
    """A question of `family` with one answer in `world`; on hard and long, every evidence page gets a near-duplicate twin.

    Entries a sampler adds to the world (grown lists, twins) are dropped again when the attempt fails.
    """
    for _ in range(ATTEMPTS):
        mark = len(world.entities)
        try:
            return _attempt(world, family, difficulty, rng, seed)
        except Unanswerable:
            world.truncate(mark)
    raise RuntimeError(f"no {difficulty} {family} question found in {ATTEMPTS} attempts")


def _attempt(world: World, family: str, difficulty: str, rng: random.Random, seed: int) -> Question:
    program = SAMPLERS[family](world, rng, difficulty, seed)
    solution = programs.evaluate(world, program)
    if family == "compare" and programs.follow(world, program["refs"][seed % 2]).name != solution.answer:
        # Which option is right alternates with the seed, so naming the first (or second) wins half the time.
        program["refs"].reverse()
        solution = programs.evaluate(world, program)
    text = word(world, program)
    # A named answer printed in the question (bar the two options of a comparison) gives itself away.
    if not solution.numeric and family != "compare" and solution.answer.lower() in text.lower():
        raise Unanswerable("the question names its answer")
    if difficulty in TWIN_DIFFICULTIES:
        for url in solution.evidence:
            if world[url].kind in TWINNED:
                add_twin(world, world[url], rng)
        solution = programs.evaluate(world, program)
    return Question(family, text, program, solution)
