"""State machines: an event-driven machine, finite automata, a timed signal cycle, glob matching, specs."""
