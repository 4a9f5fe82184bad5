"""Partition leader election algorithms (Kafka `PartitionLeaderElectionAlgorithms`).

Each returns the candidates in Kafka's order of preference; Kafka takes the first. The
controller hands the list to whoever makes choices (the broker takes the first, the model
checker tries every one), so these functions never decide alone.
"""

from __future__ import annotations


def offline_leader(
    assignment: tuple[int, ...],
    isr: tuple[int, ...],
    live: frozenset[int],
    unclean_leader_election_enable: bool,
) -> tuple[tuple[int, ...], bool]:
    """`(candidates, unclean)`: live ISR members in assignment order; if there are none and
    unclean election is enabled, live replicas outside the ISR (then `unclean` is True)."""
    clean = tuple(r for r in assignment if r in live and r in isr)
    if clean:
        return (clean, False)
    if unclean_leader_election_enable:
        return (tuple(r for r in assignment if r in live), True)
    return ((), False)


def preferred_leader(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: frozenset[int]
) -> tuple[int, ...]:
    """The preferred replica (first in the assignment), if it is live and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return (assignment[0],)
    return ()


def controlled_shutdown_leader(
    assignment: tuple[int, ...],
    isr: tuple[int, ...],
    live: frozenset[int],
    shutting_down: frozenset[int],
) -> tuple[int, ...]:
    """Live ISR members that are not shutting down, in assignment order."""
    return tuple(r for r in assignment if r in live and r in isr and r not in shutting_down)
