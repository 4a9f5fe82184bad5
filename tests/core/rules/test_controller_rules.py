"""Controller rules found unpinned by mutation testing (docs/mutation.md), one Kafka rule
per test: failover elections, the form of the controller's ZooKeeper writes, choices among
candidates, and version conflicts. Driven through `core.step`."""

from __future__ import annotations

import pytest

from core import controller as ctl
from core import effects as fx
from core import events as ev
from core.config import ProtocolConfig
from core.messages import ControlledShutdownRequest
from core.node import BrokerState, init, step
from core.types import NO_LEADER, InvariantBroken, LeaderIsr, LiveBroker, TopicPartition

CFG = ProtocolConfig()
A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)
LIVE = (LiveBroker(0, 1), LiveBroker(1, 4), LiveBroker(2, 1))
EPOCH_ZK_VERSION = 5


def controller(snaps: tuple[ev.PartitionSnapshot, ...],
               live: tuple[LiveBroker, ...] = LIVE) -> tuple[BrokerState, list[fx.Effect]]:
    s, _ = step(init(0, CFG), ev.BrokerRegistered(1))
    return step(s, ev.ControllerElection(True, 0, 3, EPOCH_ZK_VERSION, live, snaps))


def zk_writes(out: list[fx.Effect]) -> list[fx.ZkWritePartitionState]:
    return [e for e in out if isinstance(e, fx.ZkWritePartitionState)]


def chooses(out: list[fx.Effect]) -> list[fx.Choose]:
    return [e for e in out if isinstance(e, fx.Choose)]


def test_a_new_controller_elects_a_leader_for_partitions_whose_leader_is_gone() -> None:
    """Kafka rule (`onControllerFailover` -> `triggerOnlinePartitionStateChange`): the new
    controller elects a leader for every partition whose leader is not live, at once."""
    snaps = (ev.PartitionSnapshot(A0, (3, 1), LeaderIsr(3, 4, (3, 1), 2, 7)),)
    _, out = controller(snaps)
    (write,) = zk_writes(out)
    assert (write.tp, write.proposed.leader, write.proposed.leader_epoch,
            write.proposed.isr) == (A0, 1, 5, (1,))


def test_the_controllers_writes_are_fenced_by_its_epoch_and_conditional_on_the_version() -> None:
    """Kafka rule (KAFKA-6082, `ZkVersion`): a controller's partition-state write is a
    conditional update on the znode version it read (-1: create, for a new partition), in
    one transaction with a check of the controller-epoch znode's version, and is marked
    as the controller's."""
    snaps = (ev.PartitionSnapshot(A0, (3, 1), LeaderIsr(3, 4, (3, 1), 2, 7)),
             ev.PartitionSnapshot(A1, (1, 3), None))
    _, out = controller(snaps)
    writes = {w.tp: w for w in zk_writes(out)}
    assert [(w.expected_zk_version, w.controller_epoch_zk_version, w.by_controller)
            for w in (writes[A0], writes[A1])] == [(7, EPOCH_ZK_VERSION, True),
                                                   (-1, EPOCH_ZK_VERSION, True)]
    assert (writes[A1].proposed.leader_epoch, writes[A1].proposed.zk_version) == (0, 0)


def test_every_partition_needing_a_leader_gets_its_own_choice() -> None:
    """Kafka rule: the controller elects each partition on its own; a choice pending for
    one partition does not hold back another's (one pending choice per partition and
    controller epoch)."""
    snaps = (ev.PartitionSnapshot(A0, (0, 1), None), ev.PartitionSnapshot(A1, (1, 2), None))
    s, out = controller(snaps)
    assert [c.options for c in chooses(out)] == [(0, 1), (1, 2)]
    assert s.controller is not None and len(s.controller.pending) == 2
    # the same partitions again (a brokers notification): no second choice for either
    s2, out = step(s, ev.BrokersChanged(LIVE))
    assert chooses(out) == [] and s2.controller is not None
    assert len(s2.controller.pending) == 2


def test_a_choice_must_be_one_of_the_options_offered() -> None:
    """Kafka rule (the election picks one of the candidates it computed): an answer outside
    the options offered is a broken invariant of the driver, never a leader."""
    snaps = (ev.PartitionSnapshot(A0, (0, 1), None),)
    s, out = controller(snaps)
    (choose,) = chooses(out)
    for bad in (-1, len(choose.options)):
        with pytest.raises(InvariantBroken, match="outside the offered options"):
            step(s, ev.Chosen(choose.key, bad))
    _, out = step(s, ev.Chosen(choose.key, 1))
    (write,) = zk_writes(out)
    assert (write.proposed.leader, write.proposed.isr) == (1, (0, 1))


def test_a_version_conflict_makes_the_controller_decide_again_from_zookeeper() -> None:
    """Kafka rule (BadVersion on a partition-state write): the controller takes what
    ZooKeeper now holds as its view of the partition and decides again from it."""
    snaps = (ev.PartitionSnapshot(A0, (3, 1, 2), LeaderIsr(3, 4, (3, 1), 2, 7)),)
    s, out = controller(snaps)
    (write,) = zk_writes(out)
    # meanwhile the (live) leader 2 was elected by someone else and wrote version 8
    current = LeaderIsr(2, 5, (2,), 2, 8)
    s, out = step(s, ev.PartitionStateWritten(A0, write.proposed, True, False, False, current))
    assert s.controller is not None
    (ctx,) = s.controller.partitions
    assert ctx.state == current
    assert zk_writes(out) == []  # leader 2 is live: nothing to change


def test_a_partition_written_offline_is_elected_when_its_isr_member_returned_meanwhile() -> None:
    """Kafka rule (`onBrokerStartup` -> `triggerOnlinePartitionStateChange`): a partition
    whose ISR member is live gets that member as leader. Kafka's controller writes
    synchronously; ours writes asynchronously, so a broker that registered again while the
    write taking its partition offline was in flight is judged against the written state
    when the write completes (harness/sim seeds 5119, 201697: offline for good before)."""
    snaps = (ev.PartitionSnapshot(A0, (3, 1), LeaderIsr(3, 4, (3,), 2, 7)),)
    s, out = controller(snaps)  # broker 3, the ISR's only member, is not live
    (offline,) = zk_writes(out)
    assert (offline.proposed.leader, offline.proposed.isr) == (NO_LEADER, (3,))
    s, out = step(s, ev.BrokersChanged((*LIVE, LiveBroker(3, 9))))  # back, write in flight
    assert zk_writes(out) == []  # judged against the state before the write: nothing to do
    s, out = step(s, ev.PartitionStateWritten(A0, offline.proposed, True, True, False, None))
    (elected,) = zk_writes(out)
    assert (elected.proposed.leader, elected.proposed.isr) == (3, (3,))


def test_a_written_live_leader_that_is_shutting_down_is_left_to_controlled_shutdown() -> None:
    """Kafka rule (controlled shutdown): a partition whose shutting-down leader is its ISR's
    only member stays with that leader until the broker stops (it is not taken offline while
    its leader still serves); completing a write that names that live leader elects nothing
    and writes nothing."""
    snaps = (ev.PartitionSnapshot(A0, (1, 2), LeaderIsr(1, 2, (1,), 2, 2)),)
    s, _ = controller(snaps)
    s, out = step(s, ev.MessageReceived(1, ControlledShutdownRequest(1, 4)))
    assert s.controller is not None and s.controller.shutting_down == (1,)
    assert zk_writes(out) == []  # nobody else in the ISR: it stays with broker 1
    written = LeaderIsr(1, 2, (1,), 2, 3)
    s, out = step(s, ev.PartitionStateWritten(A0, written, True, True, False, None))
    assert zk_writes(out) == []


def test_an_answer_settles_only_the_write_it_answers() -> None:
    """The controller counts its partition-state writes in flight (Kafka's controller waits
    for each ZooKeeper answer before its next event; ours writes asynchronously): an answer
    settles one write of its own partition, never another partition's nor a second write
    of the same partition."""
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    c = ctl.ControllerState(0, 1, 0, (), (), writing=(a, b, a))
    assert ctl._answered(c, a).writing == (b, a)
    assert ctl._answered(c, b).writing == (a, a)
    assert ctl._answered(ctl._answered(c, a), a).writing == (b,)
    # an answer to a write of an earlier controllership of ours is no write of this one
    assert ctl._answered(c, TopicPartition("t", 2)) is c
