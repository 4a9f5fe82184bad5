"""Replica assignment and log-directory placement as Kafka does them
(`AdminUtils.assignReplicasToBrokers`, `getRackAlternatedBrokerList`, `LogManager`)."""

from __future__ import annotations

from collections import Counter

import pytest

from core.rules.assignment import _rack_alternated, assign_replicas, choose_log_dir

# AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_broker_list_is_kafkas() -> None:
    """Kafka rule: brokers are listed round-robin over racks (racks and brokers in sorted
    order), so consecutive brokers are on different racks."""
    assert _rack_alternated(tuple(range(6)), RACKS) == (0, 3, 1, 5, 4, 2)
    assert _rack_alternated((0, 1, 2), {0: "b", 1: "a", 2: "a"}) == (1, 0, 2)


def test_rack_aware_assignment_is_kafkas_example() -> None:
    """Kafka rule: rack-aware assignment over the rack-alternated list (Kafka's own test,
    7 partitions, RF 3, fixed start index 0, start partition 0)."""
    assert assign_replicas(tuple(range(6)), 7, 3, 0, 0, RACKS) == (
        (0, 3, 1), (3, 1, 5), (1, 5, 4), (5, 4, 2), (4, 2, 0), (2, 0, 3), (0, 4, 2))


def test_the_first_replica_walks_the_broker_list_from_the_start_index() -> None:
    """Kafka rule: partition p's first replica is broker (start index + p) mod n."""
    for start in range(4):
        got = assign_replicas((10, 11, 12, 13), 8, 1, start, 0)
        assert [r[0] for r in got] == [(10, 11, 12, 13)[(p + start) % 4] for p in range(8)]


def test_the_replica_shift_grows_each_time_the_partitions_wrap_the_broker_list() -> None:
    """Kafka rule: a follower is at shift 1 + (shift + j) mod (n - 1) from the first
    replica, and the shift grows by one after every n partitions."""
    got = assign_replicas((0, 1, 2, 3), 12, 2, 0, 0)
    seconds = [(r[1] - r[0]) % 4 for r in got]
    assert seconds == [1] * 4 + [2] * 4 + [3] * 4
    got = assign_replicas((0, 1, 2, 3), 4, 3, 0, 2)
    assert got == ((0, 3, 1), (1, 0, 2), (2, 1, 3), (3, 2, 0))


def test_replicas_are_spread_evenly() -> None:
    """Kafka rule: with n brokers and a multiple of n partitions every broker leads the same
    number of partitions and holds the same number of replicas."""
    got = assign_replicas(tuple(range(5)), 20, 3, 2, 1)
    assert all(len(set(r)) == 3 for r in got)
    assert set(Counter(r[0] for r in got).values()) == {4}
    assert set(Counter(b for r in got for b in r).values()) == {12}


def test_rack_aware_assignment_with_more_replicas_than_racks() -> None:
    """Kafka rule: every rack gets a replica before any rack gets a second one, and no
    broker gets two replicas of a partition."""
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    got = assign_replicas((0, 1, 2, 3), 8, 3, 0, 0, racks)
    for r in got:
        assert len(set(r)) == 3
        assert {racks[b] for b in r[:2]} == {"a", "b"}
    got = assign_replicas((0, 1, 2, 3), 4, 4, 1, 1, racks)
    assert all(sorted(r) == [0, 1, 2, 3] for r in got)


def test_assignment_refuses_impossible_requests_and_accepts_the_limits() -> None:
    with pytest.raises(ValueError, match="replication factor must be positive"):
        assign_replicas((0, 1), 1, 0, 0, 0)
    with pytest.raises(ValueError, match="number of partitions must be positive"):
        assign_replicas((0, 1), 0, 1, 0, 0)
    with pytest.raises(ValueError, match="larger than available brokers"):
        assign_replicas((0, 1), 1, 3, 0, 0)
    with pytest.raises(ValueError, match="every broker needs a rack"):
        assign_replicas((0, 1), 1, 1, 0, 0, {0: "a"})
    assert assign_replicas((0, 1), 1, 1, 0, 0) == ((0,),)
    assert assign_replicas((0, 1), 1, 2, 0, 0) == ((0, 1),)


def test_a_new_partition_goes_to_the_log_dir_with_fewest_partitions() -> None:
    """Kafka rule (LogManager.nextLogDirs): the directory with the fewest partitions; ties go
    to the first listed."""
    assert choose_log_dir((("/a", 1), ("/b", 2))) == "/a"
    assert choose_log_dir((("/a", 2), ("/b", 1), ("/c", 1))) == "/b"
    assert choose_log_dir((("/a", 3), ("/b", 3), ("/c", 2))) == "/c"
    assert choose_log_dir((("/a", 0),)) == "/a"
    with pytest.raises(ValueError, match="no log directories"):
        choose_log_dir(())


def test_a_rack_with_fewer_brokers_is_skipped_once_used_up() -> None:
    """Kafka rule (getRackAlternatedBrokerList with uneven racks): a rack whose brokers are
    all listed is skipped; the others go on round-robin."""
    assert _rack_alternated((0, 1, 2, 3), {0: "a", 1: "a", 2: "a", 3: "b"}) == (0, 3, 1, 2)
    assert _rack_alternated((5, 6, 7), {5: "x", 6: "y", 7: "y"}) == (5, 6, 7)


def test_once_every_rack_is_used_the_walk_never_repeats_a_broker() -> None:
    """Kafka rule (assignReplicasToBrokersRackAware): a broker skipped because its rack was
    used is taken on the walk's next lap, once every rack holds a replica, but a broker that
    already holds a replica of the partition is never taken twice (Kafka's escape,
    `brokerSet.size == numBrokers`, cannot apply: the replication factor is at most the
    number of brokers). For partition 2 the second lap reaches broker 1 before broker 0."""
    racks = {0: "a", 1: "a", 2: "b", 3: "c"}
    got = assign_replicas((0, 1, 2, 3), 4, 4, 0, 0, racks)
    assert got == ((0, 2, 3, 1), (2, 3, 1, 0), (3, 1, 2, 0), (1, 2, 3, 0))
