"""Controlled shutdown (KIP-143's ZooKeeper-era ControlledShutdown): the broker asks the
controller, the controller moves every leadership off it and takes it out of the ISR of every
partition it follows, then answers; only then does the broker stop."""

from __future__ import annotations

from core import effects as fx
from core import events as ev
from core.config import ProtocolConfig
from core.messages import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    StopReplicaRequest,
)
from core.node import BrokerState, init, step
from core.timers import LeaderImbalanceTimer
from core.types import NO_LEADER, Errors, LeaderIsr, LiveBroker, TopicPartition

CFG = ProtocolConfig()
LED_CHOICE = TopicPartition("a", 0)  # led by 1, two other ISR members: a choice
FOLLOWED = TopicPartition("b", 0)  # 1 follows 2 and is in the ISR
ELSEWHERE = TopicPartition("c", 0)  # 1 holds no replica
FOLLOWED_OUT = TopicPartition("d", 0)  # 1 follows 2 but is out of the ISR already
LED_ONE = TopicPartition("e", 0)  # led by 1, one other ISR member
LAST = TopicPartition("f", 0)  # 1 is the ISR's only member, 0 leads (a stale state)
STUCK = TopicPartition("g", 0)  # led by 1, nobody else in the ISR: stays with 1
SINGLE = TopicPartition("h", 0)  # led by 1, its only replica: nothing to move
SNAPSHOTS = (
    ev.PartitionSnapshot(LED_CHOICE, (1, 0, 2), LeaderIsr(1, 3, (0, 1, 2), 1, 5)),
    ev.PartitionSnapshot(FOLLOWED, (2, 1), LeaderIsr(2, 1, (2, 1), 1, 2)),
    ev.PartitionSnapshot(ELSEWHERE, (0, 2), LeaderIsr(0, 0, (0, 2), 1, 0)),
    ev.PartitionSnapshot(FOLLOWED_OUT, (2, 1), LeaderIsr(2, 0, (2,), 1, 1)),
    ev.PartitionSnapshot(LED_ONE, (1, 2), LeaderIsr(1, 0, (1, 2), 1, 0)),
    ev.PartitionSnapshot(LAST, (0, 1), LeaderIsr(0, 6, (1,), 1, 4)),
    ev.PartitionSnapshot(STUCK, (1, 2), LeaderIsr(1, 2, (1,), 1, 2)),
    ev.PartitionSnapshot(SINGLE, (1,), LeaderIsr(1, 0, (1,), 1, 0)),
)


def controller() -> BrokerState:
    s = init(0, CFG)
    s, _ = step(s, ev.Started())
    s, _ = step(s, ev.BrokerRegistered(1))
    live = (LiveBroker(0, 1), LiveBroker(1, 7), LiveBroker(2, 1))
    s, _ = step(s, ev.ControllerElection(True, 0, 2, 2, live, SNAPSHOTS))
    assert s.controller is not None and s.controller.shutting_down == ()
    return s


def writes(out: list[fx.Effect]) -> dict[TopicPartition, LeaderIsr]:
    return {e.tp: e.proposed for e in out if isinstance(e, fx.ZkWritePartitionState)}


def test_a_broker_asks_the_controller_before_shutting_down() -> None:
    """Kafka rule: on a clean stop the broker sends ControlledShutdown (its id and broker
    epoch) to the controller it knows and waits; with no controller known it cannot ask."""
    s = init(1, CFG)
    s, _ = step(s, ev.BrokerRegistered(7))
    s0, out = step(s, ev.ControlledShutdownRequested())
    assert out == [] and not s0.shutting_down  # no controller known
    s, _ = step(s, ev.ControllerChanged(0))
    s, out = step(s, ev.ControlledShutdownRequested())
    assert out == [fx.Send(0, ControlledShutdownRequest(1, 7))]
    assert s.shutting_down
    s2, out = step(s, ev.MessageReceived(0, ControlledShutdownResponse(Errors.NONE, ())))
    assert s2 == s and out == []


def test_controlled_shutdown_moves_leadership_away_and_shrinks_every_followed_isr() -> None:
    """Kafka rule: controlled shutdown moves leadership away from the broker and removes it
    from the ISR of every partition it follows; it answers with the replicated partitions
    that nobody can take over (so the broker waits and asks again), and stops the replicas
    it follows (without deleting them)."""
    s, out = step(controller(), ev.MessageReceived(1, ControlledShutdownRequest(1, 7)))
    assert s.controller is not None and s.controller.shutting_down == (1,)
    w = writes(out)
    # followed, in the ISR: the leader stays, the ISR loses the broker (conditional write)
    assert w[FOLLOWED] == LeaderIsr(2, 2, (2,), 2, 3)
    # led, one other live ISR member: it leads now, the shutting-down broker leaves the ISR
    assert w[LED_ONE] == LeaderIsr(2, 1, (2,), 2, 1)
    # led, several candidates: Kafka's order (assignment order), without the broker
    choices = [e for e in out if isinstance(e, fx.Choose)]
    assert [c.options for c in choices] == [(0, 2)]
    assert LED_CHOICE not in w
    # untouched: not hosted, already out of the ISR, or its last ISR member (never empties)
    assert ELSEWHERE not in w and FOLLOWED_OUT not in w and LAST not in w
    assert STUCK not in w and SINGLE not in w
    stops = [e for e in out if isinstance(e, fx.Send) and isinstance(e.message,
                                                                    StopReplicaRequest)]
    assert stops == [fx.Send(1, StopReplicaRequest(0, 2, 7, (FOLLOWED, FOLLOWED_OUT, LAST),
                                                   False))]
    assert out[-1] == fx.Send(1, ControlledShutdownResponse(Errors.NONE, (STUCK,)))
    # the choice made, the new leader's ISR excludes the shutting-down broker
    s, out = step(s, ev.Chosen(choices[0].key, 1))
    assert writes(out)[LED_CHOICE] == LeaderIsr(2, 4, (0, 2), 2, 6)


def test_a_stale_broker_epoch_cannot_ask_for_shutdown() -> None:
    """Kafka rule (KIP-380): a ControlledShutdown from an earlier incarnation of the broker
    gets STALE_BROKER_EPOCH and changes nothing."""
    c = controller()
    s, out = step(c, ev.MessageReceived(1, ControlledShutdownRequest(1, 6)))
    assert out == [fx.Send(1, ControlledShutdownResponse(Errors.STALE_BROKER_EPOCH, ()))]
    assert s == c


def test_only_the_controller_handles_controlled_shutdown() -> None:
    s = init(2, CFG)
    s, _ = step(s, ev.BrokerRegistered(1))
    s2, out = step(s, ev.MessageReceived(1, ControlledShutdownRequest(1, 7)))
    assert s2 == s and out == []


def test_asking_twice_keeps_the_broker_listed_once() -> None:
    s, _ = step(controller(), ev.MessageReceived(1, ControlledShutdownRequest(1, 7)))
    s, _ = step(s, ev.MessageReceived(1, ControlledShutdownRequest(1, 7)))
    assert s.controller is not None and s.controller.shutting_down == (1,)


def test_a_shutting_down_broker_is_never_elected_nor_added_back() -> None:
    """Kafka rule: while a broker shuts down the controller elects no leader on it (offline
    election, preferred election, operator moves) and keeps it out of new ISRs."""
    s, _ = step(controller(), ev.MessageReceived(1, ControlledShutdownRequest(1, 7)))
    # operator move and preferred election towards it are refused
    _, out = step(s, ev.LeaderMoveRequested(LED_CHOICE, 1))
    assert out == []
    _, out = step(s, ev.TimerFired(LeaderImbalanceTimer()))
    assert LED_CHOICE not in writes(out)
    # broker 2 dies: the partitions it led get no leader on broker 1
    _s2, out = step(s, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(1, 7))))
    w = writes(out)
    assert w[FOLLOWED].leader == NO_LEADER and w[FOLLOWED_OUT].leader == NO_LEADER
    # the broker goes away: it is no longer listed as shutting down
    s3, _ = step(s, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(2, 1))))
    assert s3.controller is not None and s3.controller.shutting_down == ()
    # ...and when it comes back (a new broker epoch) it may lead again
    s4, out = step(s3, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(1, 8),
                                          LiveBroker(2, 1))))
    assert any(isinstance(e, fx.Send) and e.dst == 1 and isinstance(e.message,
                                                                  LeaderAndIsrRequest)
               for e in out)
    s4, out = step(s4, ev.LeaderMoveRequested(LED_CHOICE, 0))
    assert writes(out)[LED_CHOICE].leader == 0


def test_a_broker_that_is_not_live_cannot_ask_for_shutdown() -> None:
    """Kafka rule: ControlledShutdown from a broker the controller does not see live is
    refused (Kafka: BrokerNotAvailable). Regression: a broker whose session had expired
    (broker epoch -1) was accepted and listed as shutting down; after it registered again it
    could never lead nor rejoin an ISR."""
    c = controller()
    s, _ = step(c, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(2, 1))))
    s2, out = step(s, ev.MessageReceived(1, ControlledShutdownRequest(1, -1)))
    assert out == [fx.Send(1, ControlledShutdownResponse(Errors.STALE_BROKER_EPOCH, ()))]
    assert s2 == s
    s3, _ = step(s2, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(1, 8), LiveBroker(2, 1))))
    assert s3.controller is not None and s3.controller.shutting_down == ()


def test_a_bounced_broker_is_no_longer_shutting_down() -> None:
    """Kafka rule: a broker that comes back (same id, new broker epoch, seen in one
    notification with its departure) is a new incarnation: not shutting down, it may lead.
    Regression: it stayed listed as shutting down and could never lead again."""
    s, _ = step(controller(), ev.MessageReceived(1, ControlledShutdownRequest(1, 7)))
    s, _ = step(s, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(1, 9), LiveBroker(2, 1))))
    assert s.controller is not None and s.controller.shutting_down == ()
    # a notification that leaves it as it was keeps it shutting down
    s2, _ = step(controller(), ev.MessageReceived(1, ControlledShutdownRequest(1, 7)))
    s2, _ = step(s2, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(1, 7), LiveBroker(2, 1))))
    assert s2.controller is not None and s2.controller.shutting_down == (1,)
