"""Idempotent producer state per partition (Kafka `ProducerStateManager`), as values.

For each producer id the leader remembers the epoch and the last few batches' sequence
ranges, so a retried batch is recognised and answered with its original offset instead of
being appended twice.
"""

from __future__ import annotations

from typing import NamedTuple

from core.types import Errors

MAX_SEQUENCE = 2**31 - 1


class BatchMetadata(NamedTuple):
    first_sequence: int
    last_sequence: int
    base_offset: int


class ProducerEntry(NamedTuple):
    producer_id: int
    producer_epoch: int
    batches: tuple[BatchMetadata, ...]  # oldest first, at most max_idempotent_batches


ProducerTable = tuple[ProducerEntry, ...]  # sorted by producer id


class SequenceVerdict(NamedTuple):
    error: Errors
    duplicate_of: int | None  # base offset of the original batch for a retry


def _last_sequence(first: int, count: int) -> int:
    return (first + count - 1) % (MAX_SEQUENCE + 1)


def _find(table: ProducerTable, producer_id: int) -> ProducerEntry | None:
    for e in table:
        if e.producer_id == producer_id:
            return e
    return None


def check_sequence(
    table: ProducerTable, producer_id: int, producer_epoch: int, first_sequence: int, count: int
) -> SequenceVerdict:
    entry = _find(table, producer_id)
    if entry is None:
        if first_sequence != 0:
            return SequenceVerdict(Errors.UNKNOWN_PRODUCER_ID, None)
        return SequenceVerdict(Errors.NONE, None)
    if producer_epoch < entry.producer_epoch:
        return SequenceVerdict(Errors.INVALID_PRODUCER_EPOCH, None)
    if producer_epoch > entry.producer_epoch:
        if first_sequence != 0:
            return SequenceVerdict(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
        return SequenceVerdict(Errors.NONE, None)
    last = _last_sequence(first_sequence, count)
    for b in entry.batches:
        if b.first_sequence == first_sequence and b.last_sequence == last:
            return SequenceVerdict(Errors.NONE, b.base_offset)
    if entry.batches:
        expected = (entry.batches[-1].last_sequence + 1) % (MAX_SEQUENCE + 1)
        if first_sequence != expected:
            return SequenceVerdict(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    return SequenceVerdict(Errors.NONE, None)


def record_batch(
    table: ProducerTable,
    producer_id: int,
    producer_epoch: int,
    first_sequence: int,
    count: int,
    base_offset: int,
    max_batches: int,
) -> ProducerTable:
    """The table after appending an accepted batch."""
    meta = BatchMetadata(first_sequence, _last_sequence(first_sequence, count), base_offset)
    entry = _find(table, producer_id)
    if entry is None or entry.producer_epoch != producer_epoch:
        batches: tuple[BatchMetadata, ...] = (meta,)
    else:
        batches = (*entry.batches, meta)[-max_batches:]
    new = ProducerEntry(producer_id, producer_epoch, batches)
    others = tuple(e for e in table if e.producer_id != producer_id)
    return tuple(sorted((*others, new), key=lambda e: e.producer_id))


def truncate_producers(table: ProducerTable, end_offset: int) -> ProducerTable:
    """Forget batches at or beyond a truncation point (they are no longer in the log)."""
    out: list[ProducerEntry] = []
    for e in table:
        kept = tuple(b for b in e.batches if b.base_offset < end_offset)
        if kept:
            out.append(ProducerEntry(e.producer_id, e.producer_epoch, kept))
    return tuple(out)
