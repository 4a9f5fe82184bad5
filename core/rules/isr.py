"""ISR guards (Kafka `Partition.isFollowerInSync`, `isFollowerOutOfSync`)."""

from __future__ import annotations


def can_expand_isr(
    follower_leo: int | None,
    leader_hw: int,
    leader_epoch_start_offset: int,
    check_epoch_start: bool = True,
) -> bool:
    """A follower outside the ISR may join once it has fetched in the leader's current epoch
    and reached both the leader's high watermark and, since KAFKA-7128, the start offset of
    the leader's epoch (so the leader's HW has "reached its current epoch")."""
    if follower_leo is None:
        return False
    if follower_leo < leader_hw:
        return False
    return not (check_epoch_start and follower_leo < leader_epoch_start_offset)


def is_out_of_sync(follower_leo: int | None, leader_leo: int, lag_time_expired: bool) -> bool:
    """A follower leaves the ISR when it has not caught up to the leader's log end offset for
    replica.lag.time.max.ms. A follower whose LEO equals the leader's is never out of sync."""
    if follower_leo is not None and follower_leo == leader_leo:
        return False
    return lag_time_expired
