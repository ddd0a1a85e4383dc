"""An event-driven state machine with guarded transitions and a history of the states it went through."""


class InvalidTransition(ValueError):
    """An event that the current state does not accept."""


class Machine:
    """States change only through `fire(event)` along the declared (state, event) -> state transitions."""

    def __init__(self, transitions, start, finals=()):
        self.transitions = dict(transitions)
        self.start = start
        self.finals = set(finals)
        self.state = start
        self.history = [start]

    def can(self, event):
        """Whether `event` is accepted in the current state."""
        return (self.state, event) in self.transitions

    def fire(self, event):
        """Take the transition for `event` and return the new state; a finished machine accepts nothing."""
        if self.done():
            raise InvalidTransition(f"machine finished in {self.state!r}")
        if not self.can(event):
            raise InvalidTransition(f"{event!r} is not accepted in state {self.state!r}")
        self.state = self.transitions[(self.state, event)]
        self.history.append(self.state)
        return self.state

    def run(self, events):
        """Fire events in order and return the final state."""
        for event in events:
            self.fire(event)
        return self.state

    def done(self):
        """Whether the machine is in a final state."""
        return self.state in self.finals

    def events(self):
        """The events the current state accepts, sorted."""
        return sorted(event for state, event in self.transitions if state == self.state)

    def path_to(self, target):
        """The shortest list of events leading from the current state to `target` (alphabetical on ties), or None."""
        frontier, seen = [(self.state, [])], {self.state}
        while frontier:
            state, events = frontier.pop(0)
            if state == target:
                return events
            for (source, event), next_state in sorted(self.transitions.items(), key=lambda item: item[0][1]):
                if source == state and next_state not in seen:
                    seen.add(next_state)
                    frontier.append((next_state, events + [event]))
        return None

    def visits(self, state, last=None):
        """How often `state` appears in the history (only its last `last` entries when given)."""
        history = self.history if last is None else self.history[-last:]
        return sum(1 for s in history if s == state)

    def reset(self):
        """Back to the start state with a fresh history."""
        self.state = self.start
        self.history = [self.start]
