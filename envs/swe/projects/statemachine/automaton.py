"""Deterministic finite automata given as (start, accepting states, {(state, symbol): state})."""


def accepts(dfa, word):
    """Whether the automaton ends in an accepting state after reading `word` (a missing edge rejects)."""
    start, accepting, delta = dfa
    state = start
    for symbol in word:
        if (state, symbol) not in delta:
            return False
        state = delta[(state, symbol)]
    return state in accepting


def reachable(dfa):
    """The states reachable from the start, sorted."""
    start, _, delta = dfa
    seen, frontier = {start}, [start]
    while frontier:
        state = frontier.pop()
        for (source, _), target in delta.items():
            if source == state and target not in seen:
                seen.add(target)
                frontier.append(target)
    return sorted(seen)


def complement(dfa, alphabet):
    """The automaton accepting exactly the words over `alphabet` that `dfa` rejects (missing edges go to a sink)."""
    start, accepting, delta = dfa
    states = {start} | {s for s, _ in delta} | set(delta.values())
    sink = "sink"
    full = dict(delta)
    for state in sorted(states | {sink}):
        for symbol in alphabet:
            full.setdefault((state, symbol), sink)
    return (start, sorted((states | {sink}) - set(accepting)), full)


def shortest_accepted(dfa, alphabet):
    """The shortest accepted word (alphabetically first among equals), or None."""
    start, accepting, delta = dfa
    frontier, seen = [(start, "")], {start}
    while frontier:
        next_frontier = []
        for state, word in frontier:
            if state in accepting:
                return word
            for symbol in sorted(alphabet):
                target = delta.get((state, symbol))
                if target is not None and target not in seen:
                    seen.add(target)
                    next_frontier.append((target, word + symbol))
        frontier = next_frontier
    return None
