"""The idempotent producer's sequence rules (Kafka `ProducerStateManager`,
`ProducerStateEntry`), one rule per test."""

from __future__ import annotations

from core.producer import (
    MAX_SEQUENCE,
    BatchMetadata,
    ProducerEntry,
    check_sequence,
    record_batch,
    truncate_producers,
)
from core.types import Errors

PID = 42


def table_after(*batches: tuple[int, int, int], epoch: int = 0, keep: int = 5):  # type: ignore[no-untyped-def]
    """The table after appending (first_sequence, count, base_offset) batches in order."""
    t: tuple[ProducerEntry, ...] = ()
    for first, count, base in batches:
        t = record_batch(t, PID, epoch, first, count, base, keep)
    return t


def test_a_new_producer_must_start_at_sequence_zero() -> None:
    """Kafka rule: an unknown producer id with a non-zero first sequence is
    UNKNOWN_PRODUCER_ID (its state was lost); sequence 0 starts it."""
    assert check_sequence((), PID, 0, 0, 1) == (Errors.NONE, None)
    assert check_sequence((), PID, 0, 1, 1) == (Errors.UNKNOWN_PRODUCER_ID, None)
    assert check_sequence((), PID, 0, -1, 1) == (Errors.UNKNOWN_PRODUCER_ID, None)


def test_the_next_batch_continues_the_sequence() -> None:
    """Kafka rule: the next batch's first sequence is the last one's last sequence + 1;
    anything else is OUT_OF_ORDER_SEQUENCE_NUMBER."""
    t = table_after((0, 3, 0))  # sequences 0..2
    assert check_sequence(t, PID, 0, 3, 1) == (Errors.NONE, None)
    assert check_sequence(t, PID, 0, 4, 1) == (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    assert check_sequence(t, PID, 0, 2, 1) == (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, None)


def test_a_retry_of_a_kept_batch_gets_its_original_offset() -> None:
    """Kafka rule: a duplicate of a retained batch (same first AND last sequence) is answered
    with the original base offset; a batch overlapping it differently is out of order."""
    t = table_after((0, 3, 10), (3, 2, 13))
    assert check_sequence(t, PID, 0, 0, 3) == (Errors.NONE, 10)
    assert check_sequence(t, PID, 0, 3, 2) == (Errors.NONE, 13)
    assert check_sequence(t, PID, 0, 0, 2) == (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    assert check_sequence(t, PID, 0, 3, 1) == (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, None)


def test_only_the_last_five_batches_are_kept_per_producer() -> None:
    """Kafka rule: ProducerStateEntry.NUM_BATCHES_TO_RETAIN = 5: a retry of one of the last
    five batches is a duplicate; an older one is no longer recognised."""
    t = table_after(*[(i, 1, 100 + i) for i in range(7)])  # sequences 0..6
    (entry,) = t
    assert [b.first_sequence for b in entry.batches] == [2, 3, 4, 5, 6]
    assert check_sequence(t, PID, 0, 2, 1) == (Errors.NONE, 102)
    assert check_sequence(t, PID, 0, 1, 1) == (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, None)


def test_sequence_numbers_wrap_around_after_int32_max() -> None:
    """Kafka rule: sequences are int32 and wrap: after 2^31-1 comes 0."""
    near = MAX_SEQUENCE - 1
    t = record_batch((), PID, 0, near, 3, 5, 5)  # sequences 2^31-2, 2^31-1, 0
    last = t[0].batches[-1]
    assert last == BatchMetadata(near, 0, 5)
    assert check_sequence(t, PID, 0, 1, 1) == (Errors.NONE, None)
    assert check_sequence(t, PID, 0, 0, 1) == (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    assert check_sequence(t, PID, 0, near, 3) == (Errors.NONE, 5)  # its retry
    # a batch ending exactly at 2^31-1: the next one starts at 0
    t = record_batch((), PID, 0, MAX_SEQUENCE - 1, 2, 0, 5)
    assert t[0].batches[-1].last_sequence == MAX_SEQUENCE
    assert check_sequence(t, PID, 0, 0, 1) == (Errors.NONE, None)
    assert check_sequence(t, PID, 0, MAX_SEQUENCE, 1) == (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                                          None)


def test_producer_epochs_fence_zombies_and_a_bump_restarts_sequences() -> None:
    """Kafka rule: an older producer epoch is INVALID_PRODUCER_EPOCH; a newer epoch must
    start again at sequence 0 (else OUT_OF_ORDER_SEQUENCE_NUMBER), and forgets the old
    epoch's batches."""
    t = table_after((0, 2, 0), epoch=3)
    assert check_sequence(t, PID, 2, 2, 1) == (Errors.INVALID_PRODUCER_EPOCH, None)
    assert check_sequence(t, PID, 4, 0, 1) == (Errors.NONE, None)
    assert check_sequence(t, PID, 4, 2, 1) == (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    t = record_batch(t, PID, 4, 0, 1, 2, 5)
    assert t == (ProducerEntry(PID, 4, (BatchMetadata(0, 0, 2),)),)


def test_producers_are_kept_apart_and_sorted_by_id() -> None:
    t = record_batch((), 9, 0, 0, 1, 0, 5)
    t = record_batch(t, 3, 0, 0, 1, 1, 5)
    t = record_batch(t, 9, 0, 1, 1, 2, 5)
    assert [e.producer_id for e in t] == [3, 9]
    assert [b.base_offset for b in t[1].batches] == [0, 2]
    assert check_sequence(t, 3, 0, 1, 1) == (Errors.NONE, None)
    assert check_sequence(t, 3, 0, 0, 1) == (Errors.NONE, 1)


def test_truncation_forgets_batches_at_or_beyond_the_truncation_offset() -> None:
    """Kafka rule: after a follower truncates, producer state is rebuilt from what is left:
    a batch whose base offset is at or past the truncation point is gone; a producer with no
    batch left is forgotten."""
    t = record_batch((), 1, 0, 0, 1, 0, 5)
    t = record_batch(t, 1, 0, 1, 1, 1, 5)
    t = record_batch(t, 2, 0, 0, 1, 2, 5)
    assert truncate_producers(t, 3) == t
    assert truncate_producers(t, 2) == (ProducerEntry(1, 0, (BatchMetadata(0, 0, 0),
                                                            BatchMetadata(1, 1, 1))),)
    assert truncate_producers(t, 1) == (ProducerEntry(1, 0, (BatchMetadata(0, 0, 0),)),)
    assert truncate_producers(t, 0) == ()
