"""Read machine specs written one transition per line, 'state --event--> state', with '#' comments."""


class SpecError(ValueError):
    """A line that is not a transition, or a state reached two ways by one event."""


def parse_spec(text):
    """{(state, event): target} from the spec's lines."""
    transitions = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        left, arrow, target = line.partition("-->")
        source, dashes, event = left.partition("--")
        if not arrow or not dashes or not source.strip() or not event.strip() or not target.strip():
            raise SpecError(f"line {number}: expected 'state --event--> state', got {raw!r}")
        key = (source.strip(), event.strip())
        if key in transitions and transitions[key] != target.strip():
            raise SpecError(f"line {number}: {key} already leads to {transitions[key]!r}")
        transitions[key] = target.strip()
    return transitions


def states(transitions):
    """Every state named in the transitions, sorted."""
    return sorted({s for s, _ in transitions} | set(transitions.values()))


def dead_ends(transitions):
    """States with no way out, sorted."""
    return sorted(set(transitions.values()) - {s for s, _ in transitions})


def describe(transitions):
    """One line per transition, sorted, in the spec's own notation."""
    return [f"{s} --{e}--> {t}" for (s, e), t in sorted(transitions.items())]
