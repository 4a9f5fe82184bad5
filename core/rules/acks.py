"""Admission and completion rules for produce requests with acks=all."""

from __future__ import annotations


def acks_all_admissible(isr_size: int, min_insync_replicas: int) -> bool:
    """acks=all is refused before appending when the ISR is below min.insync.replicas
    (NOT_ENOUGH_REPLICAS, `Partition.appendRecordsToLeader`)."""
    return isr_size >= min_insync_replicas


def acks_all_satisfied(
    high_watermark: int, required_offset: int, isr_size: int, min_insync_replicas: int
) -> tuple[bool, bool]:
    """`(done, ok)` for a request in purgatory (`Partition.checkEnoughReplicasReachOffset`).

    `required_offset` is the log end offset right after the request's records. The request is
    done once the high watermark covers it; it succeeds only if the ISR still has at least
    min.insync.replicas members, else NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    """
    if high_watermark < required_offset:
        return (False, False)
    return (True, isr_size >= min_insync_replicas)
