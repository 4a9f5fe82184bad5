"""The leader-epoch cache (Kafka `LeaderEpochFileCache.assign`), one rule per test."""

from __future__ import annotations

from core.rules.epochs import EpochEntry, assign_epoch


def test_a_new_epoch_starting_where_the_latest_started_replaces_it() -> None:
    """Kafka rule (`LeaderEpochFileCache.assign`, its removal of non-monotonic entries):
    a leader that wrote nothing in its epoch leaves an entry starting where the next epoch
    starts; assigning the next epoch removes it (start offsets stay strictly increasing), so
    OffsetsForLeaderEpoch never answers with an epoch that holds no record."""
    cache = (EpochEntry(1, 0), EpochEntry(2, 5))
    assert assign_epoch(cache, 3, 5) == (EpochEntry(1, 0), EpochEntry(3, 5))
    assert assign_epoch(cache, 3, 6) == (*cache, EpochEntry(3, 6))
