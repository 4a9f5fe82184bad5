"""The leader-epoch cache (Kafka `LeaderEpochFileCache`) as functions on tuples.

The cache is a tuple of `(epoch, start_offset)` entries, both strictly increasing.
"""

from __future__ import annotations

from typing import NamedTuple


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


def assign_epoch(
    cache: tuple[EpochEntry, ...], epoch: int, start_offset: int
) -> tuple[EpochEntry, ...]:
    """Record that `epoch` starts at `start_offset`.

    A no-op when the latest entry already has this epoch from this offset or earlier.
    Otherwise entries that would break "epochs and start offsets strictly increasing" (an
    epoch >= the new one, or a start offset >= the new one) are removed and the new entry
    appended, as `LeaderEpochFileCache.assign` (Kafka 2.x on, `maybeTruncateNonMonotonicEntries`).
    An OLDER epoch does replace newer entries: a broker that led epoch 3 from offset 36
    without writing, then appends the next leader's epoch-2 records at 36 as a follower, must
    drop (3, 36); keeping it (Kafka 1.x's "ignore older epochs") later answers
    OffsetsForLeaderEpoch wrongly and truncates an in-sync replica below the high watermark
    (found by harness/sim, seed 21340).
    """
    if cache and cache[-1].epoch == epoch and cache[-1].start_offset <= start_offset:
        return cache
    kept = tuple(e for e in cache if e.epoch < epoch and e.start_offset < start_offset)
    return (*kept, EpochEntry(epoch, start_offset))


def end_offset_for_epoch(
    cache: tuple[EpochEntry, ...], requested_epoch: int, log_end_offset: int
) -> tuple[int, int]:
    """`(epoch, end_offset)` answering OffsetsForLeaderEpoch (`LeaderEpochFileCache.endOffsetFor`).

    - the requested epoch is the latest: `(requested, log_end_offset)`;
    - it is newer than every entry (or the cache is empty): undefined;
    - it is older than every entry: `(requested, start offset of the first entry)`;
    - otherwise: the largest epoch <= requested and the start offset of the first larger one.
    """
    if requested_epoch == UNDEFINED_EPOCH or not cache:
        return (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    if requested_epoch == cache[-1].epoch:
        return (requested_epoch, log_end_offset)
    floor: EpochEntry | None = None
    for entry in cache:
        if entry.epoch > requested_epoch:
            if floor is None:
                return (requested_epoch, entry.start_offset)
            return (floor.epoch, entry.start_offset)
        floor = entry
    return (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


def truncate_epochs(cache: tuple[EpochEntry, ...], end_offset: int) -> tuple[EpochEntry, ...]:
    """Drop entries whose start offset is at or beyond a truncation point."""
    return tuple(e for e in cache if e.start_offset < end_offset)


def latest_epoch(cache: tuple[EpochEntry, ...]) -> int:
    return cache[-1].epoch if cache else UNDEFINED_EPOCH
