"""High watermark of a leader (Kafka `Partition.maybeIncrementLeaderHW`)."""

from __future__ import annotations


def high_watermark(
    current_hw: int, leader_leo: int, isr_follower_leos: tuple[int | None, ...]
) -> int:
    """The leader's new high watermark.

    The candidate is the minimum of the leader's log end offset and the log end offset of
    every follower in the (maximal) ISR. A follower whose offset the leader has not learnt in
    its current epoch (`None`) blocks any advance: the leader cannot know what it holds. The
    leader's high watermark never goes down, so the result is `max(current_hw, candidate)`.
    """
    candidate = leader_leo
    for leo in isr_follower_leos:
        if leo is None:
            return current_hw
        candidate = min(candidate, leo)
    return max(current_hw, candidate)
