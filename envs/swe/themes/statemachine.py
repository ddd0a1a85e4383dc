"""The state-machine family: tests for the event machine, automata, signal timing, wildcards and specs."""
from __future__ import annotations

import random

from jointrl.envs.swe.case import Case, call, raises, script
from jointrl.envs.swe.family import Family, Module

ORDER = {("new", "pay"): "paid", ("paid", "ship"): "shipped", ("shipped", "deliver"): "delivered",
         ("new", "cancel"): "cancelled", ("paid", "refund"): "refunded", ("shipped", "lose"): "lost"}
EVEN_AS = ("even", ["even"], {("even", "a"): "odd", ("odd", "a"): "even", ("even", "b"): "even", ("odd", "b"): "odd"})
ENDS_AB = ("s", ["t"], {("s", "a"): "m", ("m", "b"): "t", ("m", "a"): "m", ("t", "a"): "m"})
FILES = ("main.py", "test_main.py", "notes.txt", "data.csv", "setup.cfg", "a.py", "main.pyc")


def machine_cases(rng: random.Random) -> list[Case]:
    build = [f"order = Machine({ORDER!r}, 'new', finals=['delivered', 'cancelled'])"]
    path = rng.choice((["pay"], ["pay", "ship"], ["pay", "refund"]))
    return [
        script("run", build, f"order.run({path!r})"),
        script("history", build + ["order.run(['pay', 'ship', 'deliver'])"], "order.history"),
        script("can", build, "[order.can('pay'), order.can('ship')]"),
        script("events", build + [f"order.run({path[:1]!r})"], "order.events()"),
        script("fire_rejects", build, "order.fire('ship')", raises="InvalidTransition"),
        script("fire_rejects", build + ["order.fire('cancel')"], "order.fire('pay')", raises="InvalidTransition"),
        script("done", build + ["order.fire('cancel')"], "order.done()"),
        script("done", build + ["order.fire('pay')"], "order.done()"),
        script("reset", build + ["order.run(['pay', 'ship'])", "order.reset()"], "[order.state, order.history]"),
        script("path_to", build, f"order.path_to({rng.choice(('shipped', 'delivered', 'refunded', 'lost'))!r})"),
        script("path_to", build + ["order.fire('pay')"], "order.path_to('cancelled')"),
        script("path_to", build, "order.path_to('new')"),
        script("visits", ["loop = Machine({('a', 'x'): 'b', ('b', 'y'): 'a'}, 'a')", "loop.run(['x', 'y', 'x', 'y', 'x'])"],
               "[loop.visits('a'), loop.visits('b', last=2)]"),
    ]


def automaton_cases(rng: random.Random) -> list[Case]:
    word = "".join(rng.choice("ab") for _ in range(rng.randint(3, 8)))
    return [
        call("accepts", EVEN_AS, word),
        call("accepts", EVEN_AS, ""),
        call("accepts", ENDS_AB, word),
        call("accepts", ENDS_AB, "aab"),
        call("accepts", ENDS_AB, "abb"),
        call("reachable", ENDS_AB),
        call("reachable", ("x", [], {("x", "a"): "y", ("z", "a"): "x"})),
        call("complement", ENDS_AB, "ab"),
        call("shortest_accepted", ENDS_AB, "ab"),
        call("shortest_accepted", EVEN_AS, "ab"),
        call("shortest_accepted", ("s", ["t"], {("s", "a"): "s"}), "a"),
    ]


def timing_cases(rng: random.Random) -> list[Case]:
    phases = [("green", rng.randint(20, 40)), ("amber", rng.randint(3, 6)), ("red", rng.randint(20, 40))]
    length = sum(d for _, d in phases)
    return [
        call("cycle_length", phases),
        raises("ValueError", "cycle_length", []),
        raises("ValueError", "cycle_length", [("green", 5), ("red", 0)]),
        call("phase_at", phases, rng.randint(0, 3 * length)),
        call("phase_at", phases, phases[0][1]),
        call("phase_at", phases, length),
        call("phase_at", phases, length - 1),
        call("next_change", phases, rng.randint(0, 3 * length)),
        call("next_change", phases, phases[0][1] - 1),
        call("next_change", phases, length),
        call("time_in", phases, "amber", 0, 2 * length),
        call("time_in", phases, "green", rng.randint(0, 10), rng.randint(40, 90)),
    ]


def wildcard_cases(rng: random.Random) -> list[Case]:
    name = rng.choice(FILES)
    return [
        call("match", "*.py", name),
        call("match", "main.???", name),
        call("match", "*", ""),
        call("match", "?", ""),
        call("match", "a*b*c", "aXbYbZc"),
        call("match", "a*b*c", "aXbYcZ"),
        call("match", "*test*", name),
        call("select", rng.choice(("*.py", "*.py?", "main*", "?.py")), list(FILES)),
        call("literal_prefix", "src/*.py"),
        call("literal_prefix", "data?.csv"),
        call("literal_prefix", "plain.txt"),
    ]


def spec_cases(rng: random.Random) -> list[Case]:
    lines = [f"{s} --{e}--> {t}" for (s, e), t in ORDER.items()]
    rng.shuffle(lines)
    text = "\n".join(lines[:4]) + "\n# done\n\n" + lines[4] + "  # note"
    return [
        call("parse_spec", text),
        call("parse_spec", "a --go--> b\na --go--> b"),
        raises("SpecError", "parse_spec", "a --go--> b\na --go--> c"),
        raises("SpecError", "parse_spec", "a -> b"),
        raises("SpecError", "parse_spec", "a --  --> b"),
        call("states", ORDER),
        call("dead_ends", ORDER),
        call("dead_ends", {("a", "x"): "b", ("b", "y"): "a"}),
        call("describe", {("b", "y"): "a", ("a", "x"): "b"}),
    ]


FAMILY = Family(
    name="statemachine",
    topic="the state machine toolkit",
    package_names=("fsmkit", "automata", "workflow"),
    modules=(
        Module("machine", machine_cases),
        Module("automaton", automaton_cases),
        Module("timing", timing_cases),
        Module("wildcard", wildcard_cases),
        Module("spec", spec_cases),
    ),
)
