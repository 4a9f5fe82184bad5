"""Where a follower truncates (KIP-101 / KIP-279, `AbstractFetcherThread`), case by case."""

from __future__ import annotations

from core.rules.epochs import UNDEFINED_EPOCH, UNDEFINED_OFFSET, EpochEntry
from core.rules.truncation import divergence_offset

CACHE = (EpochEntry(1, 0), EpochEntry(3, 4))  # follower: epoch 1 from 0, epoch 3 from 4


def test_an_unknown_epoch_truncates_to_the_high_watermark() -> None:
    """Kafka rule: the leader knows no such epoch (undefined end offset): truncate to the
    follower's HW, never beyond its own LEO."""
    assert divergence_offset(CACHE, 6, 2, UNDEFINED_EPOCH, UNDEFINED_OFFSET) == (2, True)
    assert divergence_offset(CACHE, 1, 2, UNDEFINED_EPOCH, UNDEFINED_OFFSET) == (1, True)


def test_a_kip101_answer_truncates_to_the_leaders_end_offset() -> None:
    """Kafka rule (KIP-101, no epoch in the answer): truncate to the leader's end offset,
    never beyond the follower's LEO."""
    assert divergence_offset(CACHE, 6, 0, UNDEFINED_EPOCH, 5) == (5, True)
    assert divergence_offset(CACHE, 6, 0, UNDEFINED_EPOCH, 9) == (6, True)


def test_an_answer_the_follower_cannot_place_truncates_to_the_leaders_end_offset() -> None:
    """Kafka rule (KIP-279): the answer's epoch is newer than any the follower holds (or it
    holds none): truncate to the leader's end offset (at most its own LEO). An epoch older
    than all of the follower's ends where the follower's first epoch starts."""
    assert divergence_offset(CACHE, 6, 0, 5, 3) == (3, True)
    assert divergence_offset(CACHE, 2, 0, 5, 3) == (2, True)
    assert divergence_offset((), 2, 0, 5, 1) == (1, True)
    assert divergence_offset(CACHE, 6, 0, 0, 3) == (0, True)


def test_the_same_epoch_truncates_to_the_smaller_end() -> None:
    """Kafka rule (KIP-279): both know the epoch: truncate to the smaller of the two end
    offsets; done."""
    assert divergence_offset(CACHE, 6, 0, 1, 3) == (3, True)
    assert divergence_offset(CACHE, 6, 0, 1, 5) == (4, True)
    assert divergence_offset(CACHE, 6, 0, 3, 5) == (5, True)
    assert divergence_offset(CACHE, 6, 0, 3, 8) == (6, True)


def test_a_different_epoch_truncates_to_the_followers_end_and_asks_again() -> None:
    """Kafka rule (KIP-279): the leader answered an epoch the follower does not hold:
    truncate to where the follower's largest smaller epoch ends, and ask again."""
    assert divergence_offset(CACHE, 6, 0, 2, 9) == (4, False)
    assert divergence_offset(CACHE, 3, 0, 2, 9) == (3, False)
