"""A broker as a value: its replicas, what it knows of the controller, and (when it is the
controller) the controller role. `step` is the only way to change it."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, assert_never

from core import controller as ctl
from core import effects as fx
from core import events as ev
from core import replica as rep
from core.config import DEFAULT_TOPIC_CONFIG, ProtocolConfig, TopicConfig
from core.messages import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    Message,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from core.producer import ProducerTable
from core.rules.epochs import EpochEntry
from core.timers import (
    FetchTimeoutTimer,
    FetchTimer,
    LeaderImbalanceTimer,
    ProduceTimeoutTimer,
    ReplicaLagTimer,
    TimerKey,
)
from core.types import (
    NO_BROKER_EPOCH,
    NO_LEADER,
    Errors,
    LiveBroker,
    PartitionInfo,
    TopicPartition,
)

Effects = list[fx.Effect]


class BrokerState(NamedTuple):
    broker_id: int
    config: ProtocolConfig
    broker_epoch: int = NO_BROKER_EPOCH
    controller_epoch: int = -1  # highest controller epoch seen (T3)
    controller_id: int = NO_LEADER
    replicas: tuple[rep.ReplicaState, ...] = ()  # sorted by tp
    controller: ctl.ControllerState | None = None
    # metadata cache from UpdateMetadata, for answering clients
    metadata: tuple[PartitionInfo, ...] = ()
    live_brokers: tuple[LiveBroker, ...] = ()
    shutting_down: bool = False
    # topics whose `/config/topics/<t>` overrides a replication setting, sorted by topic
    topic_configs: tuple[tuple[str, TopicConfig], ...] = ()


class DurableReplica(NamedTuple):
    """What survives a restart for one replica: the log's offsets and the checkpoints."""

    tp: TopicPartition
    replicas: tuple[int, ...]
    log_start_offset: int
    log_end_offset: int
    epochs: tuple[EpochEntry, ...]
    hw_checkpoint: int
    producers: ProducerTable = ()


def init(broker_id: int, config: ProtocolConfig) -> BrokerState:
    """A broker that has never run."""
    return BrokerState(broker_id=broker_id, config=config)


def recover(
    broker_id: int, config: ProtocolConfig, durable: tuple[DurableReplica, ...]
) -> BrokerState:
    """A broker restarted from what its disk kept. In-memory state (leader epochs, roles,
    controller epoch, broker epoch) starts over, as in Kafka."""
    replicas = tuple(
        rep.recovered_replica(
            d.tp, broker_id, d.replicas, d.log_start_offset, d.log_end_offset, d.epochs,
            d.hw_checkpoint, d.producers,
        )
        for d in sorted(durable, key=lambda d: d.tp)
    )
    return BrokerState(broker_id=broker_id, config=config, replicas=replicas)


def replica(state: BrokerState, tp: TopicPartition) -> rep.ReplicaState | None:
    for r in state.replicas:
        if r.tp == tp:
            return r
    return None


def topic_config(state: BrokerState, topic: str) -> TopicConfig:
    """The topic's own replication settings as this broker last read them (none: defaults)."""
    for t, c in state.topic_configs:
        if t == topic:
            return c
    return DEFAULT_TOPIC_CONFIG


def partition_config(state: BrokerState, tp: TopicPartition) -> ProtocolConfig:
    """What the partition obeys: the broker's config with its topic's overrides on top."""
    if not state.topic_configs:
        return state.config
    return topic_config(state, tp.topic).applied_to(state.config)


def _with_topic_config(state: BrokerState, topic: str, config: TopicConfig) -> BrokerState:
    if topic_config(state, topic) == config:
        return state
    others = tuple(x for x in state.topic_configs if x[0] != topic)
    kept = others if config.is_default else (*others, (topic, config))
    return state._replace(topic_configs=tuple(sorted(kept, key=lambda x: x[0])))


def _learn_topic_configs(
    state: BrokerState, partitions: tuple[ev.PartitionSnapshot, ...]
) -> BrokerState:
    """The controller read these topics' configs from ZooKeeper with their partitions: the
    broker knows them too (its own replicas get their LeaderAndIsr without a ZooKeeper read)."""
    for snap in partitions:
        state = _with_topic_config(state, snap.tp.topic, snap.config)
    return state


def _on_topic_config_changed(
    state: BrokerState, e: ev.TopicConfigChanged
) -> tuple[BrokerState, Effects]:
    state = _with_topic_config(state, e.topic, e.config)
    if state.controller is None:
        return state, []
    c, out = ctl.on_topic_config_changed(state.controller, e.topic, e.config, state.config)
    return state._replace(controller=ctl.note_writes(c, out)), out


def _put(state: BrokerState, r: rep.ReplicaState) -> BrokerState:
    # one pass, and no copy when the handler left the replica as it was (every step of
    # the live broker goes through here; replicas are unique by partition)
    replicas = state.replicas
    for i, x in enumerate(replicas):
        if x.tp == r.tp:
            if x is r:
                return state
            return state._replace(replicas=(*replicas[:i], r, *replicas[i + 1:]))
    return state._replace(replicas=tuple(sorted((*replicas, r), key=lambda x: x.tp)))


def step(state: BrokerState, event: ev.Event) -> tuple[BrokerState, Effects]:
    """The broker's transition function: pure, total, deterministic."""
    cfg = state.config
    # The cases are disjoint classes: the order is only a cost. The frequent events
    # (messages, timers, client requests) come first.
    match event:
        case ev.MessageReceived(src=src, message=msg):
            return _on_message(state, src, msg, cfg)
        case ev.TimerFired(key=key):
            return _on_timer(state, key, cfg)
        case ev.ProduceReceived():
            r = replica(state, event.tp)
            if r is None:
                return state, _no_such_partition(event.acks, event.request_id, event.tp)
            r, out = rep.on_produce(
                r, event.request_id, event.acks, event.record_count, event.records,
                event.producer_id, event.producer_epoch, event.base_sequence, event.timeout_ms,
                partition_config(state, event.tp),
            )
            return _put(state, r), out
        case ev.ConsumerFetchReceived():
            r = replica(state, event.tp)
            if r is None:
                return state, [
                    fx.ConsumerFetchReply(
                        event.request_id, event.tp, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1,
                        event.fetch_offset, event.fetch_offset,
                    )
                ]
            r, out = rep.on_consumer_fetch(
                r, event.request_id, event.fetch_offset, event.current_leader_epoch
            )
            return state, out
        case ev.ListOffsetsReceived():
            r = replica(state, event.tp)
            if r is None:
                return state, [
                    fx.ListOffsetsReply(
                        event.request_id, event.tp, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1
                    )
                ]
            r, out = rep.on_list_offsets(
                r, event.request_id, event.timestamp, event.current_leader_epoch,
                partition_config(state, event.tp),
            )
            return state, out
        case ev.Started():
            return state, [fx.ZkRegisterBroker(state.broker_id)]
        case ev.BrokerRegistered(broker_epoch=epoch):
            return state._replace(broker_epoch=epoch), []
        case ev.SessionExpired():
            # Ephemeral nodes are gone: register again, stop being controller. Replicas keep
            # going until the controller says otherwise (a zombie may not know yet). The
            # broker epoch stays the old one until the new registration is answered, as in
            # Kafka (KafkaController.brokerEpoch): a controller that saw the new registration
            # first sends control requests with the NEWER epoch, and they must be taken
            # (KafkaApis.isBrokerEpochStale: only an older epoch is stale). Resetting it
            # here dropped such a LeaderAndIsr, never resent: a stale leader forever
            # (harness/sim seed 20028).
            return state._replace(controller=None), [fx.ZkRegisterBroker(state.broker_id)]
        case ev.ControllerChanged(controller_id=cid):
            return _on_controller_changed(state, cid)
        case ev.ControllerElection():
            return _on_controller_election(state, event, cfg)
        case ev.BrokersChanged(live_brokers=live):
            if state.controller is None:
                return state, []
            c, out = ctl.on_brokers_changed(state.controller, live, cfg)
            return state._replace(controller=ctl.note_writes(c, out)), out
        case ev.TopicsChanged(partitions=parts):
            if state.controller is None:
                return state, []
            c, out = ctl.on_topics_changed(state.controller, parts, cfg)
            state = _learn_topic_configs(state, parts)
            return state._replace(controller=ctl.note_writes(c, out)), out
        case ev.TopicsDeleted(topics=topics):
            if state.controller is None:
                return state, []
            c, out = ctl.on_topics_deleted(state.controller, topics)
            return state._replace(controller=ctl.note_writes(c, out)), out
        case ev.IsrChanged(partitions=parts):
            if state.controller is None:
                return state, []
            c, out = ctl.on_isr_changed(state.controller, parts)
            return state._replace(controller=ctl.note_writes(c, out)), out
        case ev.PartitionStateWritten():
            return _on_partition_written(state, event, cfg)
        case ev.TopicConfigChanged():
            return _on_topic_config_changed(state, event)
        case ev.Chosen(key=key, option=option):
            if state.controller is None:
                return state, []
            c, out = ctl.on_chosen(state.controller, key, option, cfg)
            return state._replace(controller=ctl.note_writes(c, out)), out
        case ev.SendFailed(message=msg):
            return _on_send_failed(state, msg)
        case ev.LeaderMoveRequested(tp=tp, target=target):
            if state.controller is None:
                return state, []
            c, out = ctl.on_leader_move(state.controller, tp, target, cfg)
            return state._replace(controller=ctl.note_writes(c, out)), out
        case ev.ControlledShutdownRequested():
            if state.controller_id == NO_LEADER:
                return state, []
            req = ControlledShutdownRequest(state.broker_id, state.broker_epoch)
            return state._replace(shutting_down=True), [fx.Send(state.controller_id, req)]
    return state, []


def _no_such_partition(acks: int, request_id: int, tp: TopicPartition) -> Effects:
    if acks == 0:
        return []
    return [fx.ProduceReply(request_id, tp, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)]


def _on_controller_changed(state: BrokerState, cid: int) -> tuple[BrokerState, Effects]:
    out: Effects = []
    if state.controller is not None and cid != state.broker_id:
        state = state._replace(controller=None)  # someone else holds /controller: resign
    state = state._replace(controller_id=cid)
    if cid == NO_LEADER and state.broker_epoch != NO_BROKER_EPOCH:
        out.append(fx.ZkElectController(state.broker_id))
    return state, out


def _on_controller_election(
    state: BrokerState, e: ev.ControllerElection, cfg: ProtocolConfig
) -> tuple[BrokerState, Effects]:
    if not e.won:
        return state._replace(controller_id=e.controller_id), []
    state = _learn_topic_configs(state, e.partitions)
    c, out = ctl.on_elected(
        state.broker_id, e.controller_epoch, e.epoch_zk_version, e.live_brokers, e.partitions, cfg
    )
    state = state._replace(

        controller=ctl.note_writes(c, out),
        controller_id=state.broker_id,
        controller_epoch=max(state.controller_epoch, e.controller_epoch),
    )
    return state, out


def _on_partition_written(
    state: BrokerState, e: ev.PartitionStateWritten, cfg: ProtocolConfig
) -> tuple[BrokerState, Effects]:
    if not e.by_controller:
        r = replica(state, e.tp)
        if r is None:
            return state, []
        r, out = rep.on_isr_written(r, e.proposed, e.ok, e.current, e.unknown,
                                     partition_config(state, e.tp))
        return _put(state, r), out
    if state.controller is None:
        return state, []
    c, out = ctl.on_partition_written(
        state.controller, e.tp, e.proposed, e.ok, e.fenced, e.current, cfg
    )
    if c is None:
        return state._replace(controller=None), [fx.ZkResignController(state.broker_id)]
    return state._replace(controller=ctl.note_writes(c, out)), out


def _on_timer(
    state: BrokerState, key: TimerKey, cfg: ProtocolConfig
) -> tuple[BrokerState, Effects]:
    if isinstance(key, LeaderImbalanceTimer):
        if state.controller is None:
            return state, []
        c, out = ctl.on_rebalance_timer(state.controller, cfg)
        return state._replace(controller=ctl.note_writes(c, out)), out
    r = replica(state, key.tp)
    if r is None:
        return state, []
    pcfg = partition_config(state, key.tp)
    match key:
        case FetchTimer():
            r, out = rep.on_fetch_timer(r, pcfg)
        case FetchTimeoutTimer():
            r, out = rep.on_fetch_timeout(r, pcfg)
        case ReplicaLagTimer(follower=follower):
            r, out = rep.on_lag_timer(r, follower, pcfg)
        case ProduceTimeoutTimer(request_id=request_id):
            r, out = rep.on_produce_timeout(r, request_id)
        case _:
            assert_never(key)
    return _put(state, r), out


def _on_send_failed(state: BrokerState, msg: Message) -> tuple[BrokerState, Effects]:
    """Only a follower's fetch waits for an answer; the controller learns that a broker is
    gone from ZooKeeper, and a broker shutting down bounds its own wait for the controller."""
    match msg:
        case FetchRequest() | OffsetForLeaderEpochRequest():
            return _with_replica(state, msg.tp, lambda r, c: rep.on_send_failed(r, msg, c))
    return state, []


def _control_request_ok(
    state: BrokerState, controller_epoch: int, broker_epoch: int, cfg: ProtocolConfig
) -> bool:
    """T3 and KIP-380: ignore requests from an older controller, or addressed to an earlier
    incarnation of this broker."""
    if controller_epoch < state.controller_epoch and not cfg.bugs.no_controller_epoch_check:
        return False
    # Never registered yet: Kafka processes no control requests before that. After that, only
    # a request for an earlier incarnation (an older broker epoch) is stale.
    return state.broker_epoch != NO_BROKER_EPOCH and broker_epoch >= state.broker_epoch


def _on_message(
    state: BrokerState, src: int, msg: object, cfg: ProtocolConfig
) -> tuple[BrokerState, Effects]:
    match msg:  # disjoint classes: replication's messages first
        case FetchRequest():
            return _with_replica(state, msg.tp, lambda r, c: rep.on_fetch_request(r, msg, c))
        case FetchResponse():
            return _with_replica(state, msg.tp, lambda r, c: rep.on_fetch_response(r, msg, c))
        case LeaderAndIsrRequest():
            if not _control_request_ok(state, msg.controller_epoch, msg.broker_epoch, cfg):
                return state, []
            state = state._replace(controller_epoch=max(state.controller_epoch,
                                                        msg.controller_epoch))
            out: Effects = []
            for info in msg.partitions:
                hosted = replica(state, info.tp) or rep.new_replica(
                    info.tp, state.broker_id, info.replicas
                )
                hosted, e = rep.on_leader_and_isr(
                    hosted, info, msg.controller_epoch, partition_config(state, info.tp)
                )
                state = _put(state, hosted)
                out += e
            return state, out
        case UpdateMetadataRequest():
            if not _control_request_ok(state, msg.controller_epoch, msg.broker_epoch, cfg):
                return state, []
            return state._replace(

                controller_epoch=max(state.controller_epoch, msg.controller_epoch),
                controller_id=msg.controller_id,
                metadata=msg.partitions,
                live_brokers=msg.live_brokers,
            ), []
        case StopReplicaRequest():
            if not _control_request_ok(state, msg.controller_epoch, msg.broker_epoch, cfg):
                return state, []
            state = state._replace(controller_epoch=max(state.controller_epoch,
                                                        msg.controller_epoch))
            out = []
            for tp in msg.partitions:
                found = replica(state, tp)
                if found is None:
                    continue
                hosted, e = rep.on_stop_replica(found)
                out += e
                if msg.delete:
                    state = state._replace(replicas=tuple(x for x in state.replicas if x.tp != tp))
                    out.append(fx.DeletePartition(tp))
                else:
                    state = _put(state, hosted)
            return state, out
        case ControlledShutdownRequest():
            if state.controller is None:
                return state, []
            c, out = ctl.on_controlled_shutdown(state.controller, msg, cfg)
            return state._replace(controller=ctl.note_writes(c, out)), out
        case ControlledShutdownResponse():
            return state, []
        case OffsetForLeaderEpochRequest():
            return _with_replica(
                state, msg.tp, lambda r, c: rep.on_offset_for_leader_epoch_request(r, msg, c)
            )
        case OffsetForLeaderEpochResponse():
            return _with_replica(
                state, msg.tp, lambda r, c: rep.on_offset_for_leader_epoch_response(r, msg, c)
            )
    return state, []


def _with_replica(
    state: BrokerState,
    tp: TopicPartition,
    handler: Callable[[rep.ReplicaState, ProtocolConfig], tuple[rep.ReplicaState, Effects]],
) -> tuple[BrokerState, Effects]:
    """Run a replica handler with the partition's config; a message for a partition we do not
    host is ignored."""
    r = replica(state, tp)
    if r is None:
        return state, []
    r, out = handler(r, partition_config(state, tp))
    return _put(state, r), out
