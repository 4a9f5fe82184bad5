"""The tiny integer rules, against hand-worked examples from Kafka's code and docs."""

from hypothesis import given
from hypothesis import strategies as st

from core.rules import (
    EpochEntry,
    acks_all_admissible,
    acks_all_satisfied,
    assign_epoch,
    assign_replicas,
    can_expand_isr,
    choose_log_dir,
    divergence_offset,
    end_offset_for_epoch,
    high_watermark,
    is_out_of_sync,
    offline_leader,
    preferred_leader,
    truncate_epochs,
)
from core.rules.epochs import UNDEFINED_EPOCH, UNDEFINED_OFFSET


def test_high_watermark_is_min_of_isr_and_never_decreases() -> None:
    assert high_watermark(0, 5, (3, 4)) == 3
    assert high_watermark(4, 5, (3, 4)) == 4  # never goes down
    assert high_watermark(0, 5, ()) == 5  # ISR = {leader}
    assert high_watermark(2, 5, (5, None)) == 2  # unknown follower blocks


@given(st.integers(0, 50), st.integers(0, 50), st.lists(st.integers(0, 50), max_size=4))
def test_high_watermark_bounds(hw: int, leo: int, leos: list[int]) -> None:
    hw = min(hw, leo)
    new = high_watermark(hw, leo, tuple(leos))
    assert hw <= new <= leo
    assert all(new <= x for x in leos) or new == hw


def test_acks_rules() -> None:
    assert acks_all_admissible(2, 2) and not acks_all_admissible(1, 2)
    assert acks_all_satisfied(3, 4, 3, 2) == (False, False)
    assert acks_all_satisfied(4, 4, 3, 2) == (True, True)
    assert acks_all_satisfied(4, 4, 1, 2) == (True, False)  # NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_isr_guards() -> None:
    assert can_expand_isr(5, 5, 3)
    assert not can_expand_isr(None, 0, 0)
    assert not can_expand_isr(4, 5, 3)  # below HW
    assert not can_expand_isr(5, 5, 6)  # KAFKA-7128: below the epoch start
    assert can_expand_isr(5, 5, 6, check_epoch_start=False)
    assert not is_out_of_sync(7, 7, True)  # caught up is never out of sync
    assert is_out_of_sync(6, 7, True) and not is_out_of_sync(6, 7, False)


def test_epoch_cache_assign_and_end_offsets() -> None:
    cache: tuple[EpochEntry, ...] = ()
    cache = assign_epoch(cache, 0, 0)
    cache = assign_epoch(cache, 0, 3)  # same epoch: no-op
    cache = assign_epoch(cache, 2, 5)
    assert cache == (EpochEntry(0, 0), EpochEntry(2, 5))
    # Kafka's LeaderEpochFileCache.assign (maybeTruncateNonMonotonicEntries): an older epoch
    # replaces every entry with an epoch >= it or a start offset >= its start
    assert assign_epoch(cache, 1, 9) == (EpochEntry(0, 0), EpochEntry(1, 9))
    assert assign_epoch(cache, 2, 3) == (EpochEntry(0, 0), EpochEntry(2, 3))  # earlier start
    assert assign_epoch(cache, 2, 7) == cache  # the latest epoch again, later: no-op
    assert end_offset_for_epoch(cache, 2, 8) == (2, 8)  # latest: LEO
    assert end_offset_for_epoch(cache, 1, 8) == (0, 5)  # largest <= 1, start of next
    assert end_offset_for_epoch(cache, 0, 8) == (0, 5)
    assert end_offset_for_epoch(cache, 3, 8) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    assert end_offset_for_epoch(((EpochEntry(3, 4)),), 1, 8) == (1, 4)  # older than all
    assert truncate_epochs(cache, 5) == (EpochEntry(0, 0),)
    # a new epoch at a smaller start offset drops entries that would break the ordering
    assert assign_epoch(cache, 3, 4) == (EpochEntry(0, 0), EpochEntry(3, 4))


def test_divergence_offset_kip279() -> None:
    follower = (EpochEntry(0, 0), EpochEntry(1, 2))
    # leader knows epoch 1 ended at 3: keep up to 3 (follower LEO 4)
    assert divergence_offset(follower, 4, 0, 1, 3) == (3, True)
    # leader never had epoch 1, its largest <= 1 is 0 ending at 2: follower knows epoch 0
    assert divergence_offset(follower, 4, 0, 0, 2) == (2, True)
    # undefined: truncate to HW
    assert divergence_offset(follower, 4, 1, UNDEFINED_EPOCH, UNDEFINED_OFFSET) == (1, True)
    # follower does not know the answered epoch 5? it has only smaller: ask again
    assert divergence_offset((EpochEntry(0, 0), EpochEntry(4, 2)), 4, 0, 3, 2) == (2, False)


def test_assignment_matches_kafka_examples() -> None:
    # AdminUtils' documented example: 5 brokers, 10 partitions, RF 3, start index 0, shift 0
    got = assign_replicas((0, 1, 2, 3, 4), 10, 3, 0, 0)
    assert got[:5] == ((0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0), (4, 0, 1))
    assert got[5:] == ((0, 2, 3), (1, 3, 4), (2, 4, 0), (3, 0, 1), (4, 1, 2))
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    for replicas in assign_replicas((0, 1, 2, 3, 4, 5), 12, 3, 1, 2, racks):
        assert len({racks[b] for b in replicas}) == 3  # one replica per rack
        assert len(set(replicas)) == 3


def test_assignment_errors() -> None:
    import pytest

    with pytest.raises(ValueError, match="larger than available brokers"):
        assign_replicas((0, 1), 1, 3, 0, 0)
    with pytest.raises(ValueError, match="positive"):
        assign_replicas((0, 1), 0, 1, 0, 0)


def test_log_dir_choice_and_elections() -> None:
    assert choose_log_dir((("/a", 3), ("/b", 1), ("/c", 1))) == "/b"
    assert offline_leader((0, 1, 2), (1, 2), frozenset({2, 1}), False) == ((1, 2), False)
    assert offline_leader((0, 1, 2), (0,), frozenset({1, 2}), False) == ((), False)
    assert offline_leader((0, 1, 2), (0,), frozenset({1, 2}), True) == ((1, 2), True)
    assert preferred_leader((2, 0, 1), (0, 2), frozenset({0, 1, 2})) == (2,)
    assert preferred_leader((2, 0, 1), (0, 1), frozenset({0, 1, 2})) == ()


def test_an_epoch_led_without_writing_is_dropped_when_the_next_leaders_older_records_land() -> None:
    """Kafka's LeaderEpochFileCache.assign: a broker that led epoch 3 from offset 36 without
    writing, then (as a follower) appends the next leader's epoch-2 records at 36, keeps
    (2, 36) and drops (3, 36). Keeping (3, 36) made a later OffsetsForLeaderEpoch round
    truncate an in-sync replica below the high watermark (harness/sim seed 21340)."""
    cache = (EpochEntry(0, 0), EpochEntry(3, 36))
    assert assign_epoch(cache, 2, 36) == (EpochEntry(0, 0), EpochEntry(2, 36))
    assert assign_epoch(assign_epoch(cache, 2, 36), 2, 37) == (EpochEntry(0, 0),
                                                                EpochEntry(2, 36))
