"""Where a follower truncates after OffsetsForLeaderEpoch (KIP-101 / KIP-279)."""

from __future__ import annotations

from core.rules.epochs import UNDEFINED_EPOCH, UNDEFINED_OFFSET, EpochEntry, end_offset_for_epoch


def divergence_offset(
    follower_cache: tuple[EpochEntry, ...],
    follower_leo: int,
    follower_hw: int,
    leader_epoch: int,
    leader_end_offset: int,
) -> tuple[int, bool]:
    """`(truncation_offset, done)` given the leader's answer `(leader_epoch, leader_end_offset)`
    to OffsetsForLeaderEpoch for the follower's latest epoch.

    As `AbstractFetcherThread.getOffsetTruncationState` (Kafka 2.1-2.6):
    - undefined end offset (the leader knows no such epoch): truncate to the follower's HW;
    - the follower knows no epoch at or below the answer's epoch: truncate to the leader's
      end offset;
    - the follower holds the answer's epoch: truncate to
      `min(follower end offset for it, leader end offset)`; done;
    - otherwise: truncate to where the follower's largest smaller epoch ends and ask again
      about that epoch (`done = False`).
    Never beyond the follower's own log end offset.
    """
    if leader_end_offset == UNDEFINED_OFFSET:
        return (min(follower_hw, follower_leo), True)
    if leader_epoch == UNDEFINED_EPOCH:
        return (min(leader_end_offset, follower_leo), True)
    f_epoch, f_end = end_offset_for_epoch(follower_cache, leader_epoch, follower_leo)
    if f_epoch == UNDEFINED_EPOCH:
        return (min(leader_end_offset, follower_leo), True)
    if f_epoch == leader_epoch:
        return (min(f_end, leader_end_offset, follower_leo), True)
    return (min(f_end, follower_leo), False)
