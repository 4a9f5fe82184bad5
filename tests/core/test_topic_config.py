"""Per-topic replication settings (`/config/topics/<t>`) override the broker's defaults:
`min.insync.replicas` on the leader (acks=all admission and completion) and
`unclean.leader.election.enable` on the controller (offline election)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core import effects as fx
from core import events as ev
from core.config import ProtocolConfig, TopicConfig
from core.messages import FetchRequest, LeaderAndIsrRequest
from core.node import BrokerState, init, partition_config, step, topic_config
from core.timers import ReplicaLagTimer
from core.types import NO_LEADER, Errors, LeaderIsr, LiveBroker, PartitionInfo, TopicPartition

TP = TopicPartition("t", 0)
OTHER = TopicPartition("u", 0)
BROKER_MIN_ISR_1 = ProtocolConfig(min_insync_replicas=1)


def registered(cfg: ProtocolConfig, broker_id: int = 0) -> BrokerState:
    s = init(broker_id, cfg)
    s, _ = step(s, ev.Started())
    s, _ = step(s, ev.BrokerRegistered(1))
    return s


def lead(s: BrokerState, tp: TopicPartition, isr: tuple[int, ...]) -> BrokerState:
    info = PartitionInfo(tp, 0, 0, isr, 0, (0, 1, 2))
    s, _ = step(s, ev.MessageReceived(9, LeaderAndIsrRequest(9, 1, 1, (info,))))
    return s


def produce_all(
    s: BrokerState, tp: TopicPartition, rid: int
) -> tuple[BrokerState, list[fx.Effect]]:
    return step(s, ev.ProduceReceived(rid, tp, -1, 1, b"x"))


def replies(out: list[fx.Effect]) -> list[fx.ProduceReply]:
    return [e for e in out if isinstance(e, fx.ProduceReply)]


def test_topic_config_validates_and_overrides_only_what_it_sets() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        TopicConfig(min_insync_replicas=0)
    with pytest.raises(ValueError, match="integer"):
        TopicConfig(min_insync_replicas=True)
    assert TopicConfig().is_default and TopicConfig().applied_to(BROKER_MIN_ISR_1) is (
        BROKER_MIN_ISR_1)
    eff = TopicConfig(min_insync_replicas=3).applied_to(BROKER_MIN_ISR_1)
    assert eff.min_insync_replicas == 3 and eff.unclean_leader_election_enable is False
    eff = TopicConfig(unclean_leader_election_enable=True).applied_to(BROKER_MIN_ISR_1)
    assert eff.min_insync_replicas == 1 and eff.unclean_leader_election_enable is True


def test_topic_min_isr_refuses_acks_all_although_the_broker_default_allows_it() -> None:
    s = registered(BROKER_MIN_ISR_1)
    s, out = step(s, ev.TopicConfigChanged("t", TopicConfig(min_insync_replicas=3)))
    assert out == [] and topic_config(s, "t").min_insync_replicas == 3
    s = lead(lead(s, TP, (0, 1)), OTHER, (0, 1))
    assert partition_config(s, TP).min_insync_replicas == 3
    assert partition_config(s, OTHER).min_insync_replicas == 1
    s, out = produce_all(s, TP, 1)
    assert out == [fx.ProduceReply(1, TP, Errors.NOT_ENOUGH_REPLICAS, -1)]
    # acks=1 is not subject to min.insync.replicas
    s, out = step(s, ev.ProduceReceived(2, TP, 1, 1, b"x"))
    assert replies(out) == [fx.ProduceReply(2, TP, Errors.NONE, 0)]
    # a topic without the override keeps the broker default: ISR 2 >= 1, accepted
    s, out = produce_all(s, OTHER, 3)
    assert fx.AppendAsLeader(OTHER, 0, 1, 0, b"x") in out and not replies(out)


def test_topic_min_isr_also_decides_completion_after_append() -> None:
    """ISR {0,1} meets a topic min ISR of 2; the ISR then shrinks to {0} before the HW passes
    the write: the acks=all answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka's
    DelayedProduce, although the broker default (1) would have accepted it."""
    s = registered(BROKER_MIN_ISR_1)
    s, _ = step(s, ev.TopicConfigChanged("t", TopicConfig(min_insync_replicas=2)))
    s = lead(s, TP, (0, 1))
    s, out = produce_all(s, TP, 1)
    assert not replies(out)
    s, out = step(s, ev.TimerFired(ReplicaLagTimer(TP, 1)))  # follower 1 never fetched: shrink
    w = next(e for e in out if isinstance(e, fx.ZkWritePartitionState))
    assert w.proposed.isr == (0,)
    s, out = step(s, ev.PartitionStateWritten(TP, w.proposed, False, True, False, None))
    assert fx.ProduceReply(1, TP, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 0) in out


def test_a_lower_topic_min_isr_admits_what_the_broker_default_refuses() -> None:
    s = registered(ProtocolConfig(min_insync_replicas=2))
    s, _ = step(s, ev.TopicConfigChanged("t", TopicConfig(min_insync_replicas=1)))
    s = lead(s, TP, (0,))
    s, out = produce_all(s, TP, 1)
    assert replies(out) == [fx.ProduceReply(1, TP, Errors.NONE, 0)]  # ISR {0} commits at once
    s = lead(s, OTHER, (0,))
    s, out = produce_all(s, OTHER, 2)
    assert out == [fx.ProduceReply(2, OTHER, Errors.NOT_ENOUGH_REPLICAS, -1)]


def test_the_topic_config_can_be_learnt_or_changed_while_leading() -> None:
    s = lead(registered(BROKER_MIN_ISR_1), TP, (0, 1))
    s, out = produce_all(s, TP, 1)
    assert not replies(out)  # in purgatory
    s, _ = step(s, ev.TopicConfigChanged("t", TopicConfig(min_insync_replicas=3)))
    s, out = produce_all(s, TP, 2)
    assert out == [fx.ProduceReply(2, TP, Errors.NOT_ENOUGH_REPLICAS, -1)]
    # back to the default: the override is forgotten
    s, _ = step(s, ev.TopicConfigChanged("t", TopicConfig()))
    assert s.topic_configs == ()
    s, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 1, 0, 0)))
    assert fx.ProduceReply(1, TP, Errors.NONE, 0) in out


def _controller(cfg: ProtocolConfig, config: TopicConfig) -> BrokerState:
    """Broker 0 becomes controller of a partition led by 1 with ISR {1,2}, the topic's config
    as read from ZooKeeper at the election."""
    s = registered(cfg)
    s, _ = step(s, ev.ControllerChanged(NO_LEADER))
    live = tuple(LiveBroker(b, 1) for b in (0, 1, 2))
    snap = ev.PartitionSnapshot(TP, (0, 1, 2), LeaderIsr(1, 4, (1, 2), 1, 7), config)
    s, _ = step(s, ev.ControllerElection(True, 0, 2, 2, live, (snap,)))
    return s


def _offline_election(s: BrokerState) -> LeaderIsr:
    """Brokers 1 and 2 (the whole ISR) die; only 0, outside the ISR, is left."""
    s, out = step(s, ev.BrokersChanged((LiveBroker(0, 1),)))
    return next(e for e in out if isinstance(e, fx.ZkWritePartitionState)).proposed


@pytest.mark.parametrize(
    ("broker_unclean", "topic_unclean", "elected"),
    [
        (False, True, True),  # the topic enables it: the out-of-ISR replica leads
        (True, False, False),  # the topic disables it: no leader, the ISR keeps its last
        (False, None, False),  # no override: the broker default decides
        (True, None, True),
    ],
)
def test_topic_unclean_setting_decides_the_offline_election(
    broker_unclean: bool, topic_unclean: bool | None, elected: bool
) -> None:
    cfg = replace(BROKER_MIN_ISR_1, unclean_leader_election_enable=broker_unclean)
    s = _controller(cfg, TopicConfig(unclean_leader_election_enable=topic_unclean))
    proposed = _offline_election(s)
    if elected:
        assert proposed.leader == 0 and proposed.isr == (0,)
    else:
        assert proposed.leader == NO_LEADER and proposed.isr == (1, 2)


def test_new_topics_bring_their_config_to_the_controller() -> None:
    s = registered(BROKER_MIN_ISR_1)
    s, _ = step(s, ev.ControllerChanged(NO_LEADER))
    live = tuple(LiveBroker(b, 1) for b in (0, 1, 2))
    s, _ = step(s, ev.ControllerElection(True, 0, 2, 2, live, ()))
    unclean = TopicConfig(unclean_leader_election_enable=True)
    s, _ = step(s, ev.TopicsChanged((ev.PartitionSnapshot(
        TP, (0, 1, 2), LeaderIsr(1, 0, (1, 2), 2, 0), unclean),)))
    assert _offline_election(s).leader == 0


def test_a_config_change_reaches_the_controller_and_elects_an_offline_partition() -> None:
    s = _controller(BROKER_MIN_ISR_1, TopicConfig())
    s, out = step(s, ev.BrokersChanged((LiveBroker(0, 1),)))
    w = next(e for e in out if isinstance(e, fx.ZkWritePartitionState))
    assert w.proposed.leader == NO_LEADER
    s, _ = step(s, ev.PartitionStateWritten(TP, w.proposed, True, True, False, None))
    s, out = step(s, ev.TopicConfigChanged("t", TopicConfig(unclean_leader_election_enable=True)))
    w = next(e for e in out if isinstance(e, fx.ZkWritePartitionState))
    assert w.proposed.leader == 0 and w.proposed.isr == (0,)
    assert s.controller is not None
    assert s.controller.partitions[0].config.unclean_leader_election_enable is True


def test_the_controller_broker_knows_the_configs_it_read_for_its_own_replicas() -> None:
    """The controller's LeaderAndIsr to itself needs no ZooKeeper read: the topic's config
    came with the partitions it read (election and new topics)."""
    strict = TopicConfig(min_insync_replicas=3)
    s = _controller(BROKER_MIN_ISR_1, strict)
    assert topic_config(s, "t") == strict
    s, _ = step(s, ev.TopicsChanged((ev.PartitionSnapshot(OTHER, (0, 1), None, strict),)))
    assert partition_config(s, OTHER).min_insync_replicas == 3
    # a controller that lost an election learns nothing from it
    s = registered(BROKER_MIN_ISR_1)
    snap = ev.PartitionSnapshot(TP, (0, 1, 2), None, strict)
    s, _ = step(s, ev.ControllerElection(False, 1, 2, 2, (), (snap,)))
    assert s.topic_configs == ()
