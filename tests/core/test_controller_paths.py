"""Controller paths pinned one Kafka rule per test: topic deletion, ISR change
notifications, the preferred-leader rebalance, operator moves, controller changes."""

from __future__ import annotations

from core import effects as fx
from core import events as ev
from core.config import ProtocolConfig
from core.messages import StopReplicaRequest, UpdateMetadataRequest
from core.node import BrokerState, init, step
from core.timers import LeaderImbalanceTimer
from core.types import NO_LEADER, LeaderIsr, LiveBroker, TopicPartition

CFG = ProtocolConfig()
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
LIVE = (LiveBroker(0, 1), LiveBroker(1, 4), LiveBroker(2, 1))


def controller(snaps: tuple[ev.PartitionSnapshot, ...], cfg: ProtocolConfig = CFG,
               live: tuple[LiveBroker, ...] = LIVE) -> tuple[BrokerState, list[fx.Effect]]:
    s = init(0, cfg)
    s, _ = step(s, ev.BrokerRegistered(1))
    return step(s, ev.ControllerElection(True, 0, 3, 5, live, snaps))


def writes(out: list[fx.Effect]) -> dict[TopicPartition, LeaderIsr]:
    return {e.tp: e.proposed for e in out if isinstance(e, fx.ZkWritePartitionState)}


def msgs(out: list[fx.Effect], kind: type) -> list[tuple[int, object]]:
    return [(e.dst, e.message) for e in out
            if isinstance(e, fx.Send) and isinstance(e.message, kind)]


SNAPS = (
    ev.PartitionSnapshot(A0, (0, 1), LeaderIsr(0, 0, (0, 1), 1, 0)),
    ev.PartitionSnapshot(A1, (1, 2), LeaderIsr(1, 0, (1, 2), 1, 0)),
    ev.PartitionSnapshot(B0, (2, 0), LeaderIsr(0, 2, (0, 2), 1, 3)),
)


def test_deleting_a_topic_stops_and_deletes_its_replicas_on_live_brokers() -> None:
    """Kafka rule (TopicDeletionManager): every live replica of the topic gets StopReplica
    with delete=true, the partitions leave the controller and the brokers' metadata, and the
    topic's znodes are removed; other topics are untouched."""
    s, _ = controller(SNAPS)
    s, out = step(s, ev.TopicsDeleted(("a", "zz")))
    stops = msgs(out, StopReplicaRequest)
    assert stops == [(0, StopReplicaRequest(0, 3, 1, (A0,), True)),
                     (1, StopReplicaRequest(0, 3, 4, (A0, A1), True)),
                     (2, StopReplicaRequest(0, 3, 1, (A1,), True))]
    assert s.controller is not None and [p.tp for p in s.controller.partitions] == [B0]
    metas = msgs(out, UpdateMetadataRequest)
    assert len(metas) == 3 and all(
        [i.tp for i in m.partitions] == [B0] for _, m in metas)  # type: ignore[attr-defined]
    assert out[-2:] == [fx.ZkDeleteTopic("a"), fx.ZkDeleteTopic("zz")]
    # nothing to delete: nothing happens; a non-controller ignores the event
    assert step(s, ev.TopicsDeleted(()))[1] == []
    plain = init(1, CFG)
    assert step(plain, ev.TopicsDeleted(("a",))) == (plain, [])


def test_topic_deletion_forgets_pending_elections_of_the_topic() -> None:
    snaps = (ev.PartitionSnapshot(A0, (0, 1, 2), LeaderIsr(1, 0, (0, 1, 2), 1, 0)),)
    s, _ = controller(snaps)
    s, out = step(s, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(2, 1))))
    assert any(isinstance(e, fx.Choose) for e in out)
    assert s.controller is not None and len(s.controller.pending) == 1
    s, _ = step(s, ev.TopicsDeleted(("a",)))
    assert s.controller is not None and s.controller.pending == ()


def test_an_isr_change_notification_refreshes_only_newer_partition_states() -> None:
    """Kafka rule: on /isr_change_notification the controller rereads the partitions and
    keeps a state only if its znode version is newer; then it sends UpdateMetadata."""
    s, _ = controller(SNAPS)
    newer = LeaderIsr(0, 0, (0,), 1, 1)
    s2, out = step(s, ev.IsrChanged((ev.PartitionSnapshot(A0, (0, 1), newer),)))
    assert s2.controller is not None and s2.controller.partitions[0].state == newer
    assert len(msgs(out, UpdateMetadataRequest)) == 3
    older = LeaderIsr(0, 0, (0,), 1, 0)
    for snap in (ev.PartitionSnapshot(A0, (0, 1), older), ev.PartitionSnapshot(A0, (0, 1), None),
                 ev.PartitionSnapshot(TopicPartition("zz", 0), (0,), newer)):
        assert step(s, ev.IsrChanged((snap,))) == (s, [])
    plain = init(1, CFG)
    assert step(plain, ev.IsrChanged((ev.PartitionSnapshot(A0, (0, 1), newer),))) == (plain, [])


def test_the_rebalance_timer_moves_leadership_back_to_in_sync_preferred_replicas() -> None:
    """Kafka rule (auto.leader.rebalance.enable): every
    leader.imbalance.check.interval.seconds, a partition whose preferred replica (the first
    assigned) is live and in the ISR but not leading gets it back as leader, same ISR."""
    s, out = controller(SNAPS)
    assert out[-1] == fx.SetTimer(LeaderImbalanceTimer(), 300_000)
    s, out = step(s, ev.TimerFired(LeaderImbalanceTimer()))
    # B0 (assignment (2, 0), leader 0, 2 in ISR): moves to 2; A0 and A1 are led by 0 and 1
    assert writes(out) == {B0: LeaderIsr(2, 3, (0, 2), 3, 4)}
    assert out[-1] == fx.SetTimer(LeaderImbalanceTimer(), 300_000)
    # preferred replica out of the ISR or dead: no move
    snaps = (ev.PartitionSnapshot(B0, (2, 0), LeaderIsr(0, 2, (0,), 1, 3)),)
    s, _ = controller(snaps)
    assert writes(step(s, ev.TimerFired(LeaderImbalanceTimer()))[1]) == {}
    s, _ = controller(SNAPS, live=(LiveBroker(0, 1), LiveBroker(1, 4)))
    _, out = step(s, ev.TimerFired(LeaderImbalanceTimer()))
    assert B0 not in writes(out)
    # without auto rebalance no timer is armed
    from dataclasses import replace

    _, out = controller(SNAPS, cfg=replace(CFG, auto_leader_rebalance_enable=False))
    assert not any(isinstance(e, fx.SetTimer) for e in out)
    # a non-controller ignores the timer
    plain = init(1, CFG)
    assert step(plain, ev.TimerFired(LeaderImbalanceTimer())) == (plain, [])


def test_an_operator_moves_leadership_only_to_a_live_in_sync_replica() -> None:
    """Kafka rule (preferred leader election towards a target): the target must be assigned,
    live and in the ISR, and not the leader already; the ISR stays as it is."""
    s, _ = controller(SNAPS)
    assert writes(step(s, ev.LeaderMoveRequested(A0, 1))[1]) == {A0: LeaderIsr(1, 1, (0, 1), 3,
                                                                               1)}
    for tp, target in ((A0, 0), (A0, 2), (A1, 0), (TopicPartition("zz", 0), 1)):
        assert step(s, ev.LeaderMoveRequested(tp, target))[1] == [], (tp, target)
    s2, _ = controller(SNAPS, live=(LiveBroker(0, 1), LiveBroker(2, 1)))
    assert step(s2, ev.LeaderMoveRequested(A0, 1))[1] == []
    plain = init(1, CFG)
    assert step(plain, ev.LeaderMoveRequested(A0, 1)) == (plain, [])


def test_a_controller_resigns_when_another_broker_holds_the_controller_znode() -> None:
    """Kafka rule: /controller names someone else: this broker stops acting as controller;
    /controller gone: a registered broker runs for it, an unregistered one does not."""
    s, _ = controller(SNAPS)
    s2, out = step(s, ev.ControllerChanged(2))
    assert s2.controller is None and s2.controller_id == 2 and out == []
    s3, _ = step(s, ev.ControllerChanged(0))
    assert s3.controller is not None
    s4, out = step(s2, ev.ControllerChanged(NO_LEADER))
    assert out == [fx.ZkElectController(0)] and s4.controller_id == NO_LEADER
    assert step(init(1, CFG), ev.ControllerChanged(NO_LEADER))[1] == []
    # losing the election: someone else is controller
    lost, out = step(init(1, CFG), ev.ControllerElection(False, 2, 3, 5, LIVE, ()))
    assert lost.controller is None and lost.controller_id == 2 and out == []


def test_a_session_expiry_registers_again_and_drops_the_controller_role() -> None:
    """Kafka rule: a ZooKeeper session expiry removes the broker's ephemeral znodes: it
    registers again and is no longer controller; it keeps its broker epoch until the new
    registration is answered (KafkaController.brokerEpoch)."""
    s, _ = controller(SNAPS)
    epoch = s.broker_epoch
    s, out = step(s, ev.SessionExpired())
    assert out == [fx.ZkRegisterBroker(0)] and s.controller is None and s.broker_epoch == epoch


def test_a_new_partition_starts_with_its_live_replicas_as_isr() -> None:
    """Kafka rule (NewPartition -> OnlinePartition): the first live assigned replica leads
    and the live assigned replicas form the ISR."""
    snap = ev.PartitionSnapshot(A0, (1, 2, 0), None)
    s, out = controller((), live=(LiveBroker(0, 1), LiveBroker(2, 1)))
    s, out = step(s, ev.TopicsChanged((snap,)))
    choose = [e for e in out if isinstance(e, fx.Choose)]
    assert choose and choose[0].options == (2, 0)
    s, out = step(s, ev.Chosen(choose[0].key, 0))
    assert writes(out)[A0] == LeaderIsr(2, 0, (2, 0), 3, 0)


def test_an_elected_leader_is_always_in_the_isr_it_writes() -> None:
    """Kafka rule (leader_in_isr): a choice answered after the ISR changed still writes an
    ISR that holds the new leader."""
    snaps = (ev.PartitionSnapshot(A0, (0, 1, 2), LeaderIsr(1, 0, (0, 1, 2), 1, 0)),)
    s, _ = controller(snaps)
    s, out = step(s, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(2, 1))))
    (choice,) = [e for e in out if isinstance(e, fx.Choose)]
    assert choice.options == (0, 2)
    shrunk = LeaderIsr(1, 0, (0, 1), 1, 1)  # meanwhile the old leader dropped 2
    s, _ = step(s, ev.IsrChanged((ev.PartitionSnapshot(A0, (0, 1, 2), shrunk),)))
    _, out = step(s, ev.Chosen(choice.key, 1))
    assert writes(out)[A0] == LeaderIsr(2, 1, (2, 0), 3, 2)


def test_update_metadata_from_an_older_controller_is_ignored() -> None:
    """Kafka rule: a broker keeps the metadata of the newest controller epoch it has seen;
    UpdateMetadata from an older controller changes nothing."""
    from core.types import PartitionInfo

    info = PartitionInfo(A0, 0, 0, (0, 1), 0, (0, 1))
    s = init(1, CFG)
    s, _ = step(s, ev.BrokerRegistered(4))
    s, _ = step(s, ev.MessageReceived(0, UpdateMetadataRequest(0, 5, 4, (info,), LIVE)))
    assert (s.controller_epoch, s.controller_id, s.metadata) == (5, 0, (info,))
    s2, out = step(s, ev.MessageReceived(2, UpdateMetadataRequest(2, 4, 4, (), ())))
    assert (s2, out) == (s, [])
    s3, _ = step(s, ev.MessageReceived(2, UpdateMetadataRequest(2, 6, 4, (), ())))
    assert (s3.controller_epoch, s3.controller_id, s3.metadata) == (6, 2, ())
    # addressed to an earlier incarnation of this broker (KIP-380): ignored
    s4, _ = step(s, ev.MessageReceived(2, UpdateMetadataRequest(2, 6, 3, (), ())))
    assert s4 == s


def test_after_its_write_lands_the_controller_caches_and_sends_the_new_state() -> None:
    """Kafka rule: once its conditional ZooKeeper write succeeds the controller caches the
    new leader and ISR and sends LeaderAndIsr (and UpdateMetadata) with them."""
    from core.messages import LeaderAndIsrRequest

    s, _ = controller(SNAPS)
    s, out = step(s, ev.LeaderMoveRequested(A0, 1))
    proposed = writes(out)[A0]
    s, out = step(s, ev.PartitionStateWritten(A0, proposed, True, True, False, None))
    assert s.controller is not None
    assert [p.state for p in s.controller.partitions if p.tp == A0] == [proposed]
    lairs = msgs(out, LeaderAndIsrRequest)
    assert [d for d, _ in lairs] == [0, 1]
    for _, m in lairs:
        (info,) = m.partitions  # type: ignore[attr-defined]
        assert (info.leader, info.leader_epoch, info.isr) == (1, 1, (0, 1))
    assert len(msgs(out, UpdateMetadataRequest)) == 3


def test_a_started_broker_gets_metadata_and_its_partitions_and_nobody_else_is_told_twice() -> None:
    """Kafka rule (onBrokerStartup): every live broker gets UpdateMetadata naming the new
    broker, and the new broker gets LeaderAndIsr for the partitions it hosts."""
    from core.messages import LeaderAndIsrRequest

    s, out = controller(SNAPS, live=(LiveBroker(0, 1), LiveBroker(1, 4)))
    # the ISR shrinks the new controller wrote (2 was not live) are answered first
    for tp, proposed in writes(out).items():
        s, _ = step(s, ev.PartitionStateWritten(tp, proposed, True, True, False, None))
    s, out = step(s, ev.BrokersChanged(LIVE))
    metas = msgs(out, UpdateMetadataRequest)
    assert sorted(d for d, _ in metas) == [0, 1, 2]
    assert all(m.live_brokers == LIVE for _, m in metas)  # type: ignore[attr-defined]
    lairs = msgs(out, LeaderAndIsrRequest)
    assert [d for d, _ in lairs] == [2]
    assert [i.tp for i in lairs[0][1].partitions] == [A1, B0]  # type: ignore[attr-defined]


def test_a_started_broker_is_not_told_a_state_the_controllers_write_in_flight_may_replace(
) -> None:
    """Harness/sim seed 313738, at the core: leader 2 wrote ISR (0, 1, 2) (zk version 7) and
    died before its change notification went out, so the controller's cache kept ISR (1, 2)
    (version 6). Its election for 2's death (leader 1, expecting version 6) was still in
    flight when 2 registered again, and 2 was told from the cache that it led epoch 3 with
    ISR (1, 2): it advanced its HW past broker 0, a member of ZooKeeper's ISR (strong_isr).
    Kafka's controller answers each event to the end (its writes are synchronous), so the
    election comes before the startup. Now the startup's LeaderAndIsr leaves out a partition
    whose write of ours is in flight; the write's answer tells the brokers: here a version
    conflict, and with ZooKeeper's state (leader 2 live, ISR all live) standing, LeaderAndIsr
    with the state read, to every live replica."""
    from core.messages import LeaderAndIsrRequest

    stale = LeaderIsr(2, 3, (1, 2), 1, 6)
    s, out = controller((ev.PartitionSnapshot(A0, (0, 1, 2), stale),))
    assert writes(out) == {}
    s, out = step(s, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(1, 4))))
    election = writes(out)[A0]
    assert (election.leader, election.isr, election.zk_version) == (1, (1,), 7)
    back = (LiveBroker(0, 1), LiveBroker(1, 4), LiveBroker(2, 13))
    s, out = step(s, ev.BrokersChanged(back))
    assert msgs(out, LeaderAndIsrRequest) == [] and writes(out) == {}
    assert sorted(d for d, _ in msgs(out, UpdateMetadataRequest)) == [0, 1, 2]
    zk = LeaderIsr(2, 3, (0, 1, 2), 1, 7)  # leader 2's expansion, never notified
    s, out = step(s, ev.PartitionStateWritten(A0, election, True, False, False, zk))
    assert writes(out) == {}
    assert s.controller is not None and s.controller.writing == ()
    lairs = msgs(out, LeaderAndIsrRequest)
    assert [d for d, _ in lairs] == [0, 1, 2]
    for _, m in lairs:
        (info,) = m.partitions  # type: ignore[attr-defined]
        assert (info.leader, info.leader_epoch, info.isr, info.zk_version) == (2, 3, (0, 1, 2), 7)
    assert sorted(d for d, _ in msgs(out, UpdateMetadataRequest)) == [0, 1, 2]


def test_a_started_broker_hears_of_a_write_in_flight_once_it_lands() -> None:
    """The same deferral when the write succeeds: its answer sends LeaderAndIsr to every
    live replica, the broker that started meanwhile included; a fenced answer resigns."""
    from core.messages import LeaderAndIsrRequest

    s, _ = controller((ev.PartitionSnapshot(A0, (0, 1, 2), LeaderIsr(2, 3, (1, 2), 1, 6)),))
    s, out = step(s, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(1, 4))))
    election = writes(out)[A0]
    assert s.controller is not None and s.controller.writing == (A0,)
    s, out = step(s, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(1, 4), LiveBroker(2, 13))))
    assert msgs(out, LeaderAndIsrRequest) == []
    s2, out = step(s, ev.PartitionStateWritten(A0, election, True, True, False, None))
    assert [d for d, _ in msgs(out, LeaderAndIsrRequest)] == [0, 1, 2]
    assert s2.controller is not None and s2.controller.writing == ()
    s3, out = step(s, ev.PartitionStateWritten(A0, election, True, False, True, None))
    assert s3.controller is None and out == [fx.ZkResignController(0)]


def test_a_dead_follower_leaves_the_isr_and_nothing_else_changes() -> None:
    """Kafka rule (onReplicasBecomeOffline): when a follower's broker dies the controller
    removes it from the ISR with the leader kept; a death that changes no ISR writes
    nothing."""
    s, _ = controller(SNAPS)
    _, out = step(s, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(1, 4))))
    w = writes(out)
    assert w[B0] == LeaderIsr(0, 3, (0,), 3, 4)  # 2 was a follower of B0
    assert A0 not in w  # 2 holds no replica of A0
    snaps = (ev.PartitionSnapshot(A0, (0, 1, 2), LeaderIsr(0, 0, (0, 1), 1, 0)),)
    s, _ = controller(snaps)
    _, out = step(s, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(1, 4))))
    assert writes(out) == {}  # 2 was not in the ISR


def test_a_topic_config_change_touches_only_that_topics_partitions() -> None:
    """Kafka rule: a topic's settings apply to its own partitions only."""
    from core.config import TopicConfig

    s, _ = controller(SNAPS)
    new = TopicConfig(unclean_leader_election_enable=True)
    s, _ = step(s, ev.TopicConfigChanged("a", new))
    assert s.controller is not None
    configs = {p.tp: p.config for p in s.controller.partitions}
    assert configs[A0] == new and configs[A1] == new and configs[B0] == TopicConfig()


def test_a_new_controller_fences_requests_of_older_controllers() -> None:
    """Kafka rule (controller epoch fencing): a broker that wins the controller election
    takes the new controller epoch as the highest it has seen, so control requests from an
    older controller are ignored."""
    from core.messages import LeaderAndIsrRequest
    from core.types import PartitionInfo

    s, _ = controller(SNAPS)
    assert s.controller_epoch == 3
    info = PartitionInfo(A0, 1, 9, (0, 1), 9, (0, 1))
    s2, out = step(s, ev.MessageReceived(1, LeaderAndIsrRequest(1, 2, 1, (info,))))
    assert (s2, out) == (s, [])


def test_a_control_request_for_the_new_registration_is_taken_before_the_broker_knows_it() -> None:
    """Kafka rule (KIP-380, KafkaApis.isBrokerEpochStale): only a control request for an
    OLDER broker epoch is stale. After a session expiry the controller may see the broker's
    new registration, and send it a LeaderAndIsr with the new epoch, before the broker has the
    answer to its own registration: the request must be taken (dropping it left a stale
    leader forever: harness/sim seed 20028). One for the earlier incarnation is not."""
    from core.messages import LeaderAndIsrRequest
    from core.types import PartitionInfo

    s = init(0, CFG)
    s, _ = step(s, ev.BrokerRegistered(5))
    s, _ = step(s, ev.SessionExpired())
    info = PartitionInfo(A0, 1, 7, (1, 0), 9, (1, 0))  # broker 1 leads epoch 7
    newer, out = step(s, ev.MessageReceived(1, LeaderAndIsrRequest(1, 4, 8, (info,))))
    r = next(x for x in newer.replicas if x.tp == A0)
    assert r.leader == 1 and r.leader_epoch == 7 and out
    older = step(s, ev.MessageReceived(1, LeaderAndIsrRequest(1, 4, 4, (info,))))
    assert older == (s, [])
    # and before any registration at all, nothing is taken
    fresh = init(0, CFG)
    assert step(fresh, ev.MessageReceived(1, LeaderAndIsrRequest(1, 4, 8, (info,)))) == (fresh,
                                                                                         [])


def test_a_bounced_leader_loses_its_leaderships_and_its_isr_places() -> None:
    """Kafka rule (KIP-380, processBrokerChange): a broker seen again with a new broker epoch
    (it restarted between two reads of /brokers/ids) gets onBrokerFailure, then
    onBrokerStartup. Its leaderships move to another live ISR member at a new epoch, it
    leaves the ISRs, and it is not told its old state: a wiped or lossy leader kept leading
    at the same epoch before, and its followers truncated to its shorter log."""
    from core.messages import LeaderAndIsrRequest

    s, _ = controller(SNAPS)
    bounced = (LiveBroker(0, 9), LiveBroker(1, 4), LiveBroker(2, 1))
    s, out = step(s, ev.BrokersChanged(bounced))
    w = writes(out)
    assert w == {A0: LeaderIsr(1, 1, (1,), 3, 1), B0: LeaderIsr(2, 3, (2,), 3, 4)}
    assert msgs(out, LeaderAndIsrRequest) == []  # nothing stale to broker 0; A1 is not its
    assert sorted(d for d, _ in msgs(out, UpdateMetadataRequest)) == [0, 1, 2]
    # once a write lands, broker 0 hears the new state as a follower outside the ISR
    s, out = step(s, ev.PartitionStateWritten(A0, w[A0], True, True, False, None))
    lairs = msgs(out, LeaderAndIsrRequest)
    assert [d for d, _ in lairs] == [0, 1]
    for _, m in lairs:
        (info,) = m.partitions  # type: ignore[attr-defined]
        assert (info.leader, info.leader_epoch, info.isr) == (1, 1, (1,))
    # a plain restart (gone, then back) is unchanged: the broker gets its partitions
    s, out = step(s, ev.BrokersChanged((LiveBroker(1, 4), LiveBroker(2, 1))))
    s, out = step(s, ev.BrokersChanged(bounced))
    assert writes(out) == {}


def test_the_controller_keeps_live_brokers_sorted_through_a_bounce() -> None:
    """A driver may list `/brokers/ids` in any order; the controller's view (what
    UpdateMetadata carries, and the order it sends in) stays sorted by broker id, also
    across the bounce handling that takes the bounced broker out for a moment."""
    s, _ = controller(SNAPS)
    s, _ = step(s, ev.BrokersChanged((LiveBroker(2, 1), LiveBroker(0, 9), LiveBroker(1, 4))))
    assert s.controller is not None
    assert [b.broker_id for b in s.controller.live] == [0, 1, 2]


def test_a_bounced_broker_stays_out_of_an_isr_elected_after_a_choice() -> None:
    """More than one candidate: the election waits for its `Chosen`, by which time the
    bounced broker is live again; the ISR written still leaves it out."""
    from core.messages import LeaderAndIsrRequest

    a = ev.PartitionSnapshot(A0, (0, 1, 2), LeaderIsr(0, 0, (0, 1, 2), 1, 0))
    s, _ = controller((a,))
    s, out = step(s, ev.BrokersChanged((LiveBroker(0, 9), LiveBroker(1, 4), LiveBroker(2, 1))))
    (choose,) = [e for e in out if isinstance(e, fx.Choose)]
    assert choose.options == (1, 2) and writes(out) == {}
    assert msgs(out, LeaderAndIsrRequest) == []  # not told it still leads epoch 0
    s, out = step(s, ev.Chosen(choose.key, 1))
    assert writes(out) == {A0: LeaderIsr(2, 1, (1, 2), 3, 1)}


def test_a_new_controller_keeps_brokers_that_restarted_unseen_out_of_their_old_isrs() -> None:
    """Found by the `safe-wipe-one` campaign in CI: the controller, also a leader, was killed
    and wiped; it registered again before any other broker had taken over, so no controller
    ever saw it go. The next controller (here itself, broker 0) reads ZooKeeper's states,
    which still name it leader and ISR member of its old incarnation. Its registration is
    newer than those states (`registered_since`): it leaves their leadership and ISR, and is
    not told it leads; before, it led epoch 0 again with an empty log and its followers
    truncated every acknowledged record to it."""
    from core.messages import LeaderAndIsrRequest

    snaps = (
        ev.PartitionSnapshot(A0, (0, 1, 2), LeaderIsr(0, 0, (0, 1, 2), 1, 0),
                             registered_since=(0,)),
        ev.PartitionSnapshot(A1, (1, 2, 0), LeaderIsr(1, 0, (1, 2, 0), 1, 0),
                             registered_since=(0,)),
        # written after broker 0's registration: its membership is of this incarnation
        ev.PartitionSnapshot(B0, (2, 0), LeaderIsr(2, 2, (2, 0), 1, 3)),
    )
    s, out = controller(snaps)
    w = writes(out)
    assert w == {A1: LeaderIsr(1, 1, (1, 2), 3, 1)}  # a live leader: the ISR shrinks
    (choose,) = [e for e in out if isinstance(e, fx.Choose)]
    assert choose.options == (1, 2)  # A0's new leader, broker 0 not among the candidates
    lairs = msgs(out, LeaderAndIsrRequest)
    told = {(d, i.tp) for d, m in lairs for i in m.partitions}  # type: ignore[attr-defined]
    assert told == {(0, B0), (2, B0)}  # nobody hears A0 or A1 as they stood
    s, out = step(s, ev.Chosen(choose.key, 0))
    assert writes(out) == {A0: LeaderIsr(1, 1, (1, 2), 3, 1)}
    # once the write lands, broker 0 hears it is a follower outside the ISR
    s, out = step(s, ev.PartitionStateWritten(A0, LeaderIsr(1, 1, (1, 2), 3, 1), True, True,
                                              False, None))
    infos = [(d, i.leader, i.isr) for d, m in msgs(out, LeaderAndIsrRequest)
             for i in m.partitions]  # type: ignore[attr-defined]
    assert infos == [(0, 1, (1, 2)), (1, 1, (1, 2)), (2, 1, (1, 2))]
    # the exclusion ends with our write: broker 0, caught up later, may rejoin and lead
    ctx = [p for p in s.controller.partitions if p.tp == A0]  # type: ignore[union-attr]
    assert ctx[0].restarted == ()


def test_a_restarted_last_replica_standing_is_still_elected() -> None:
    """Nobody else in the ISR is live: the restarted broker is the last replica standing,
    which Kafka elects (KIP-966, `hiwater spec bugs`: last-replica-standing); it is told the
    state as it stands rather than left without a leader for good."""
    from core.messages import LeaderAndIsrRequest

    snap = ev.PartitionSnapshot(A0, (0, 1), LeaderIsr(0, 4, (0,), 1, 7), registered_since=(0,))
    s, out = controller((snap,), live=(LiveBroker(0, 9), LiveBroker(1, 4)))
    assert writes(out) == {}
    told = [(d, i.leader, i.leader_epoch) for d, m in msgs(out, LeaderAndIsrRequest)
            for i in m.partitions]  # type: ignore[attr-defined]
    assert told == [(0, 0, 4), (1, 0, 4)]
    # trusted from now on: a later change of brokers does not move it out again
    assert s.controller is not None and s.controller.partitions[0].restarted == ()


def test_a_registration_newer_than_a_state_that_does_not_name_the_broker_changes_nothing(
) -> None:
    """Broker 2 registered after the state was written, but the state names it neither
    leader nor ISR member: the state is trusted and told as it stands."""
    from core.messages import LeaderAndIsrRequest

    snap = ev.PartitionSnapshot(A0, (0, 1, 2), LeaderIsr(0, 4, (0, 1), 1, 7),
                                registered_since=(2,))
    s, out = controller((snap,))
    assert writes(out) == {}
    assert [d for d, _ in msgs(out, LeaderAndIsrRequest)] == [0, 1, 2]
    assert s.controller is not None and s.controller.partitions[0].restarted == ()


def test_with_the_bug_switched_on_a_new_controller_trusts_the_old_isr() -> None:
    """`failover_trusts_restarted` (ZooKeeper-era Kafka): the state is believed as read."""
    from core.messages import LeaderAndIsrRequest

    snap = ev.PartitionSnapshot(A0, (0, 1, 2), LeaderIsr(0, 0, (0, 1, 2), 1, 0),
                                registered_since=(0,))
    _s, out = controller((snap,), cfg=CFG.with_bug("failover_trusts_restarted"))
    assert writes(out) == {} and not [e for e in out if isinstance(e, fx.Choose)]
    assert [(d, m.partitions[0].leader) for d, m in msgs(out, LeaderAndIsrRequest)] == [
        (0, 0), (1, 0), (2, 0)]  # type: ignore[attr-defined]
