"""How many CPUs a learner rank asks Ray for on a machine without GPUs, by hand."""
import pytest

from jointrl.rl.actor_group import learner_cpus


@pytest.mark.parametrize("cpus,free,workers,ranks,expected", [
    (16, 16, 2, 2, 7),  # its half of the cores would be 8, but each of the 2 workers keeps one of 16 free CPUs
    (16, 32, 2, 2, 8),  # a roomier session: the learner's share of the machine's cores
    (2, 2, 1, 1, 1),  # the quickstart machine: one core for the worker, one for the rank
    (2, 1, 4, 2, 1),  # a session already too small still gives each rank one CPU rather than none
    (8, 8, 0, 3, 2),
])
def test_learner_cpus_by_hand(cpus, free, workers, ranks, expected):
    assert learner_cpus(cpus, free, workers, ranks) == expected
