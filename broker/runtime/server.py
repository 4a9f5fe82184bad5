"""The broker process: listener, connections, and the wiring of core, store, ZooKeeper, peers.

    broker = Broker(BrokerConfig.from_file("server.properties"))
    await broker.start()          # store recovered, listening, registered in ZooKeeper
    await broker.serve_until(stop_event)
    await broker.stop()

One task per client connection takes a frame (read by `frames.FrameProtocol`: no
StreamReader copies, a large frame received straight into a buffer of its own), handles it to
the end, writes the response, and only then takes the next frame (Kafka's per-connection
ordering; clients use a separate connection for their group coordinator, so a long-polling
Fetch never delays a heartbeat).
A throttled connection is muted for the throttle time after its response (KIP-219).
Malformed input closes the connection with a log line; it never stops the broker.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import errno
import functools
import json
import logging
import os
import random
import socket
import time
import types
import typing
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from broker.config import BrokerConfig, topic_replication_config
from broker.quotas import QuotaManager
from broker.runtime.frames import FrameProtocol
from broker.runtime.handlers import OFFSETS_TOPIC, Apis
from broker.runtime.node import Node
from broker.runtime.peers import Endpoint, Peers
from broker.runtime.pipeline import Pending, ResponsePipeline
from broker.runtime.zk import ZkAdapter
from broker.runtime.zkdriver import ZkDriver
from broker.store.fs import RealFS
from broker.store.log import RollFlush
from broker.store.manager import LogManager
from broker.store.meta import check_and_write, check_broker_id
from broker.wire import (
    Close,
    FileRegion,
    FrameError,
    Reply,
    Request,
    ResponseFrame,
    decode_request,
)
from broker.wire import interbroker as ib
from broker.wire.fast import decode_fast
from core import events as ev
from core.config import TopicConfig
from core.messages import (
    ControlledShutdownRequest,
    LeaderAndIsrRequest,
    Message,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from core.node import partition_config, topic_config
from core.types import NO_BROKER_EPOCH, NO_LEADER, Role, TopicPartition

log = logging.getLogger(__name__)


class ListenerUnavailable(Exception):
    """The listener address cannot be bound (in use, not an address of this host): bad
    input, one line."""


class TopicConfigUnavailable(ConnectionAbortedError):
    """ZooKeeper could not give a topic's config; the request that needs it is not applied and
    its connection is closed (a `ConnectionError`: closed quietly, the sender resends)."""

MAX_CONNECTIONS = 10_000
CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0
REGISTRATION_WAIT_S = 10.0
LOCAL_CONTROL_RETRY_S = 0.5  # own controller's LeaderAndIsr while ZooKeeper cannot answer
SHUTDOWN_CANCEL_S = 5.0
# How long a Metadata request waits for a topic's partition count from ZooKeeper. Kafka
# answers Metadata from its cache alone; ours reads the count once per topic, and a broker
# cut off from ZooKeeper (its one ZooKeeper thread busy retrying) must still answer in time.
TOPIC_COUNT_WAIT_S = 1.0
PRODUCER_ID_BLOCK = 1000
SENDFILE_FALLBACK_CHUNK = 256 * 1024  # pread size where the loop has no sendfile (uvloop)


@functools.cache
def _array_fields(cls: type) -> tuple[tuple[str, bool, bool], ...]:
    """(name, nullable, holds entities) of a kio entity's array and entity fields."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = typing.get_args(hint)
        nullable = typing.get_origin(hint) in (typing.Union, types.UnionType) \
            and type(None) in args
        inner = next((a for a in args if a is not type(None)), hint) if nullable else hint
        if typing.get_origin(inner) is tuple:
            item = typing.get_args(inner)[0]
            out.append((f.name, nullable, dataclasses.is_dataclass(item)))
        elif dataclasses.is_dataclass(inner):
            out.append((f.name, True, True))
    return tuple(out)


def null_array(entity: Any, path: str = "") -> str | None:
    """The path of an array that Kafka's schema does not make nullable but the request sent
    as null (length -1), or None. kio 0.6.5 reads such an array as None where Kafka's parser
    fails (the connection is then closed); the handlers iterate it and would crash."""
    cls: Any = type(entity)
    for name, nullable, nested in _array_fields(cls):
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                return path + name
            continue
        if not nested:
            continue
        for i, item in enumerate(value if isinstance(value, tuple) else (value,)):
            found = null_array(item, f"{path}{name}[{i}].")
            if found is not None:
                return found
    return None


class _ClientConnection(FrameProtocol):
    """A client's (or another broker's) connection to this broker."""

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker.config.socket_request_max_bytes)
        self.broker = broker

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.broker._accept(self)


def _write_produce_response(conn: FrameProtocol, resp: Any) -> Awaitable[None] | None:
    """A produce response (bytes, or none for acks=0) written at once; it only waits, as
    an awaitable, when the transport asks the writer to pause (flow control)."""
    frame = resp.frame
    if frame is None:
        return None
    assert isinstance(frame, bytes), "produce responses are encoded whole"
    conn.write(frame)
    return conn.drain() if conn.writing_paused else None


async def _sendfile(conn: FrameProtocol, region: FileRegion) -> None:
    """A file region onto the connection, zero-copy. When nothing is queued in the
    transport (the usual case: the response head was just sent at once), `os.sendfile` goes
    straight to the socket; only what the socket buffer cannot take then goes through
    `loop.sendfile` (which waits for the socket, pausing reading meanwhile)."""
    transport = conn.transport
    if transport is None or transport.is_closing():
        raise ConnectionError("client went away")
    source = region.source
    own = not isinstance(source, int)
    fd = source if isinstance(source, int) else os.open(source, os.O_RDONLY)
    try:
        position, left = region.position, region.length
        sock = transport.get_extra_info("socket")
        if sock is not None and transport.get_write_buffer_size() == 0:
            try:
                while left > 0:
                    sent = os.sendfile(sock.fileno(), fd, position, left)
                    if sent == 0:
                        raise OSError(f"file region {region} ends early")
                    position += sent
                    left -= sent
            except BlockingIOError:
                pass
        if left > 0:
            await conn.drain()
            loop = asyncio.get_running_loop()
            if not isinstance(loop, asyncio.BaseEventLoop):
                # uvloop has no loop.sendfile (asyncio's fallback lives in BaseEventLoop):
                # the rest goes as pread chunks through the transport, which queues what the
                # socket cannot take and pauses us (drain) past its high-water mark
                while left > 0:
                    data = os.pread(fd, min(left, SENDFILE_FALLBACK_CHUNK), position)
                    if not data:
                        raise OSError(f"file region {region} ends early")
                    conn.write(data)
                    position += len(data)
                    left -= len(data)
                    await conn.drain()
                return
            f = open(fd, "rb", buffering=0, closefd=False)  # noqa: SIM115
            try:
                await loop.sendfile(transport, f, position, left)
            except RuntimeError as e:  # "Transport is closing" (reference §3.3, 6)
                raise ConnectionError(str(e)) from e
            finally:
                f.close()
    finally:
        if own:
            os.close(fd)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.host, self.port = config.listeners.address
        self.adv_host, self.adv_port = config.advertised_listener_for(self.port).address
        self.node: Node = None  # type: ignore[assignment]
        self.logs: LogManager | None = None
        self.zk: ZkAdapter | None = None
        self.zkd: ZkDriver | None = None
        self.peers: Peers | None = None
        self.apis = Apis(self)
        self.quotas = QuotaManager(config.quota_config())
        self.groups: Any = None
        self.endpoints: dict[int, Endpoint] = {}
        self.cluster_id = ""
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._pids: list[int] = []
        self._housekeeping: asyncio.Task[None] | None = None
        self._rng = random.Random()
        self._partition_counts: dict[str, int] = {}  # topic_complete's cache (ZooKeeper)
        self._count_reads: dict[str, asyncio.Future[Any]] = {}  # one read in flight a topic
        self._replication_loaded: set[str] = set()  # topics whose config the core was given
        # The controller's requests to this broker itself, waiting for their topics' configs;
        # bounded by what one controller sends one broker (a request per control change).
        self._local_inbox: collections.deque[Message] = collections.deque()
        self._local_task: asyncio.Task[None] | None = None
        self.stopped = asyncio.Event()
        self.fatal: BaseException | None = None

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        cfg = self.config
        # a dir of another broker refuses before any of its logs is loaded (meta.properties)
        check_broker_id(RealFS(), [Path(d) for d in cfg.log_dirs], self.broker_id)
        self.logs = LogManager(
            [Path(d) for d in cfg.log_dirs], cfg.log_config(), now_ms=int(time.time() * 1000))
        self.logs.defer_roll_flushes()  # a rolled segment is fsynced by `_periodic`'s worker
        for topic in {t for t, _ in self.logs.logs}:
            self.logs.topic_configs.setdefault(topic, self._topic_log_config(topic, {}))
        self.node = Node(
            self.broker_id, cfg.protocol_config(), self.logs,
            send_to_peer=self._send_to_peer, zk_effect=self._zk_effect,
            topic_config=lambda t: self._topic_log_config(t, {}),
            inline_timers=True,
        )
        self.node.on_failure = self._on_fatal
        self.node.on_replica_changed = self._on_replica_changed
        self.node.local_control = self._local_control
        self.node.on_partition_deleted = self._on_partition_deleted
        try:
            self._server = await loop.create_server(
                lambda: _ClientConnection(self), self.host, self.port, reuse_address=True)
        except OSError as e:
            why = os.strerror(e.errno) if e.errno else str(e)
            if e.errno == errno.EADDRINUSE:
                why += ": another process holds the port; stop it or choose another port"
            raise ListenerUnavailable(
                f"listeners: cannot listen on {self.host}:{self.port}: {why}") from None
        sock = self._server.sockets[0]
        if self.port == 0:
            self.port = sock.getsockname()[1]
            self.adv_host, self.adv_port = cfg.advertised_listener_for(self.port).address
        self.zkd = ZkDriver(None, self.node.handle, self._on_fatal)  # type: ignore[arg-type]
        self.zk = ZkAdapter(
            str(cfg.zookeeper_connect), self.broker_id, sink=self.zkd.sink, host=self.adv_host,
            port=self.adv_port, rack=cfg.broker_rack,
            session_timeout_s=cfg.zookeeper_session_timeout_ms / 1000.0,
            connect_timeout_s=cfg.effective_zookeeper_connection_timeout_ms / 1000.0,
        )
        self.zkd.adapter = self.zk
        self.zkd.session_timeout_s = self.zk.session_timeout_s
        await loop.run_in_executor(None, self.zk.start)
        self.zkd.start()
        self.cluster_id = await self.zkd.call(self.zk.cluster_id)
        # before the broker registers: a dir of another cluster refuses the start
        check_and_write(self.logs.fs, self.logs.log_dirs, self.broker_id, self.cluster_id)
        self.peers = Peers(
            self.node, self._lookup, self.host, max_wait_ms=cfg.replica_fetch_wait_max_ms,
            min_bytes=cfg.replica_fetch_min_bytes, max_bytes=cfg.replica_fetch_response_max_bytes,
            partition_max_bytes=cfg.replica_fetch_max_bytes,
            timeout_s=cfg.replica_socket_timeout_ms / 1000.0, endpoints=lambda: self.endpoints)
        self.endpoints[self.broker_id] = Endpoint(self.adv_host, self.adv_port, cfg.broker_rack)
        self.groups = self._make_groups()
        self.node.on_roles_changed = self.groups.sync
        self._housekeeping = asyncio.create_task(self._periodic(), name="housekeeping")
        self.node.handle(ev.Started())
        log.info("broker %d listening on %s:%d", self.broker_id, self.host, self.port)

    def _make_groups(self) -> Any:
        from broker.runtime.groups_glue import make_group_coordinator

        return make_group_coordinator(self)

    async def stop(self, controlled: bool = True) -> None:
        if controlled and self.node is not None and self.node.failed is None:
            await self._controlled_shutdown()
        if self._server is not None:
            self._server.close()
        # Cancel until they are gone (bounded): Python 3.11's asyncio.wait_for swallows a
        # cancellation that races with its future completing (CPython gh-86296), and a
        # connection task that lost its cancel then idled in readexactly on a client's open
        # connection, holding the shutdown until the SIGKILL.
        pending = set(self._connections)
        deadline = time.monotonic() + SHUTDOWN_CANCEL_S
        while pending and time.monotonic() < deadline:
            for t in pending:
                t.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.5)
        if self._local_task is not None:
            self._local_task.cancel()
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._housekeeping
        if self.peers is not None:
            await self.peers.close()
        if self.groups is not None:
            with contextlib.suppress(Exception):
                await self.groups.close()
        if self.zkd is not None:
            await self.zkd.close()
        if self.zk is not None:
            with contextlib.suppress(Exception):
                await asyncio.get_running_loop().run_in_executor(None, self.zk.close)
        if self.node is not None:
            self.node.close()
        if self.logs is not None:
            with contextlib.suppress(Exception):
                self.logs.shutdown()
        self.stopped.set()

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move our leaderships away, bounded in time (Kafka's
        controlled.shutdown.enable with its retries)."""
        if not self.config.controlled_shutdown_enable:
            return
        deadline = time.monotonic() + CONTROLLED_SHUTDOWN_TIMEOUT_S
        self.node.handle(ev.ControlledShutdownRequested())
        while time.monotonic() < deadline:
            # Done when no partition we lead has another live in-sync replica to move to
            # (the last broker standing keeps its leaderships, as Kafka's controller does).
            live = {b.broker_id for b in self.node.state.live_brokers} - {self.broker_id}
            leading = [r for r in self.node.state.replicas
                       if r.role == Role.LEADER and live & set(r.isr)]
            if not leading:
                return
            await asyncio.sleep(0.1)

    def _on_fatal(self, err: BaseException) -> None:
        if self.fatal is None:
            self.fatal = err
            log.error("broker %d: fatal: %s", self.broker_id, err)
            asyncio.get_running_loop().create_task(self.stop(controlled=False))

    async def serve_until(self, stop: asyncio.Event) -> None:
        waiter = asyncio.create_task(stop.wait())
        done = asyncio.create_task(self.stopped.wait())
        await asyncio.wait({waiter, done}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        done.cancel()

    # -- core wiring ------------------------------------------------------------------------

    def _zk_effect(self, effect: Any) -> None:
        assert self.zkd is not None
        self.zkd.submit(effect)

    def _send_to_peer(self, dst: int, msg: Any) -> None:
        if self.peers is not None:
            self.peers.send(dst, msg)

    async def _lookup(self, broker_id: int, refresh: bool) -> Endpoint | None:
        ep = self.endpoints.get(broker_id)
        if ep is not None and not refresh:
            return ep
        assert self.zkd is not None and self.zk is not None
        zk = self.zk
        try:
            found = await self.zkd.call(lambda: zk.broker_endpoint(broker_id))
        except Exception as e:
            log.info("endpoint of broker %d: %s", broker_id, e)
            return ep
        if found is None:
            return None
        ep = Endpoint(*found)
        self.endpoints[broker_id] = ep
        return ep

    def _on_replica_changed(self, tp: TopicPartition) -> None:
        if self.groups is not None and tp.topic == OFFSETS_TOPIC:
            self.groups.on_partition_changed(tp.partition)

    def _on_partition_deleted(self, tp: TopicPartition) -> None:
        """Once a topic's last partition here is deleted, forget its config: a topic created
        again under the same name is read anew from ZooKeeper."""
        assert self.logs is not None
        if not any(t == tp.topic for t, _ in self.logs.logs):
            self._replication_loaded.discard(tp.topic)
            self.logs.topic_configs.pop(tp.topic, None)

    def _topic_log_config(self, topic: str, overrides: Mapping[str, str]) -> Any:
        if topic == OFFSETS_TOPIC:
            overrides = {**self.config.offsets_topic_overrides(), **overrides}
        return self.config.topic_log_config(overrides)

    async def _ensure_topic_configs(self, topics: Iterable[str]) -> None:
        """Load `/config/topics/<t>` the first time this process hosts topic `t` (a new topic,
        or existing logs after a restart), before the core acts on a LeaderAndIsr for it: the
        topic's log config (also replacing the broker defaults that logs found on disk were
        opened with) and its replication settings (`min.insync.replicas`,
        `unclean.leader.election.enable`) for the core.

        Raises `TopicConfigUnavailable` when ZooKeeper cannot say: acting on the topic with the
        broker defaults in place of its own values could acknowledge an acks=all write with
        fewer in-sync replicas than the topic demands (Kafka blocks on ZooKeeper here too)."""
        assert self.logs is not None and self.zkd is not None and self.zk is not None
        zk = self.zk
        for t in sorted(set(topics)):
            if t in self._replication_loaded:
                continue
            try:
                overrides = await self.zkd.call(lambda t=t: zk.topic_config(t))  # type: ignore[misc]
            except Exception as e:
                raise TopicConfigUnavailable(f"config of topic {t} unavailable: {e}") from None
            try:
                log_config = self._topic_log_config(t, overrides)
            except Exception as e:
                log.error("topic %s has an invalid log config %s: %s", t, overrides, e)
                log_config = self._topic_log_config(t, {})
            self._apply_log_config(t, log_config)
            try:
                replication = topic_replication_config(overrides)
            except ValueError as e:
                log.error("topic %s has an invalid config %s: %s", t, overrides, e)
                replication = TopicConfig()
            self._replication_loaded.add(t)
            self.node.handle(ev.TopicConfigChanged(t, replication))

    def _local_control(self, msg: Message) -> None:
        """A LeaderAndIsr (UpdateMetadata, StopReplica) from the controller in this process.

        It takes the way a peer's takes (`_interbroker`): the topic's config from ZooKeeper
        before the core acts on it. Handled at once, the controller's own replicas of a topic
        created with `segment.bytes`, `retention.ms` or `cleanup.policy` ran with the broker's
        defaults (their logs were created on the first append). Requests stay in order: once
        one waits for ZooKeeper, the ones after it wait behind it."""
        if not self._local_inbox and self._configs_known(msg):
            self.node.handle(ev.MessageReceived(self.broker_id, msg))
            return
        self._local_inbox.append(msg)
        if self._local_task is None or self._local_task.done():
            self._local_task = asyncio.get_running_loop().create_task(
                self._drain_local(), name="local-control")

    def _configs_known(self, msg: Message) -> bool:
        return not isinstance(msg, LeaderAndIsrRequest) or all(
            p.tp.topic in self._replication_loaded for p in msg.partitions)

    async def _drain_local(self) -> None:
        while self._local_inbox:
            msg = self._local_inbox[0]
            if isinstance(msg, LeaderAndIsrRequest):
                try:
                    await self._ensure_topic_configs(p.tp.topic for p in msg.partitions)
                except TopicConfigUnavailable as e:
                    # as a peer's connection closes and the controller resends: try again
                    log.warning("broker %d: own controller's LeaderAndIsr waits: %s",
                                self.broker_id, e)
                    await asyncio.sleep(LOCAL_CONTROL_RETRY_S)
                    continue
            self._local_inbox.popleft()
            self.node.handle(ev.MessageReceived(self.broker_id, msg))

    def _apply_log_config(self, topic: str, config: Any) -> None:
        """The topic's log config for logs created from now on and for those already open."""
        assert self.logs is not None
        self.logs.topic_configs[topic] = config
        for (t, _), lg in self.logs.logs.items():
            if t == topic and lg.config != config:
                lg.config = config
                for seg in lg.segments:
                    seg.config = config

    # -- topics -----------------------------------------------------------------------------

    async def zk_topics(self) -> list[str]:
        assert self.zkd is not None and self.zk is not None
        zk = self.zk
        try:
            return await self.zkd.call(zk.list_topics)
        except Exception:
            return []

    def assignment_seed(self, n: int) -> tuple[int, int]:
        return self._rng.randrange(n), self._rng.randrange(n)

    async def create_topic(self, topic: str, assignment: Mapping[int, Sequence[int]],
                           config: Mapping[str, str]) -> None:
        assert self.zkd is not None and self.zk is not None
        zk = self.zk
        await self.zkd.call(lambda: zk.create_topic(topic, assignment, config))

    async def auto_create(self, topic: str) -> int:
        """Metadata's auto topic creation: LEADER_NOT_AVAILABLE while it is being created (and
        while this broker is still starting, before ZooKeeper is reached)."""
        if self.zkd is None or self.zk is None or not self.cluster_id:
            return 5
        live = sorted(lb.broker_id for lb in self.node.state.live_brokers)
        if topic == OFFSETS_TOPIC:
            n, rf = self.config.offsets_topic_num_partitions, min(
                self.config.offsets_topic_replication_factor, len(live))
        else:
            n, rf = self.config.num_partitions, self.config.default_replication_factor
        if not live or rf > len(live):
            return 38 if live else 5  # INVALID_REPLICATION_FACTOR / LEADER_NOT_AVAILABLE
        from core.rules.assignment import assign_replicas

        replicas = assign_replicas(tuple(live), n, rf, *self.assignment_seed(len(live)))
        try:
            await self.create_topic(topic, dict(enumerate(replicas)), {})
        except Exception as e:
            if "NodeExists" not in type(e).__name__:
                log.warning("auto-creating %s failed: %s", topic, e)
        return 5

    async def topic_complete(self, topic: str, known: int) -> bool:
        """Whether this broker's metadata holds all partitions of `topic` (`known` of them).

        Kafka's controller publishes a new topic's partitions in one UpdateMetadata; ours
        publishes each as its ZooKeeper write completes, so for a moment a broker knows part of
        a new topic. Metadata must not show that: librdkafka takes the partition count as
        final and fails sends to the rest with UNKNOWN_PARTITION. The count comes from the
        topic's znode, read once per topic (again only while the topic looks incomplete)."""
        if self._partition_counts.get(topic) == known:
            return True
        read = self._count_reads.get(topic)
        if read is None:
            read = self._count_reads[topic] = self._read_partition_count(topic)
        try:
            # the read goes on if we stop waiting: a later Metadata request waits on it again
            assignment = await asyncio.wait_for(asyncio.shield(read), TOPIC_COUNT_WAIT_S)
        except TimeoutError:
            log.info("partition count of %s: no answer from ZooKeeper within %.1f s", topic,
                     TOPIC_COUNT_WAIT_S)
            return True  # as when ZooKeeper is unavailable: show what this broker knows
        except Exception as e:
            log.info("partition count of %s unavailable: %s", topic, e)
            return True
        if not assignment:
            self._partition_counts.pop(topic, None)
            return True  # being deleted: show what is left
        self._partition_counts[topic] = len(assignment)
        return known >= len(assignment)

    def _read_partition_count(self, topic: str) -> asyncio.Future[Any]:
        """The topic's assignment read on the ZooKeeper thread; forgotten once it ends."""
        assert self.zkd is not None and self.zk is not None
        zk = self.zk
        read = asyncio.ensure_future(self.zkd.call(lambda: zk.topic_assignment(topic)))

        def done(f: asyncio.Future[Any]) -> None:
            if self._count_reads.get(topic) is f:
                del self._count_reads[topic]
            if not f.cancelled():
                f.exception()  # retrieved: nobody may be waiting on it any more

        read.add_done_callback(done)
        return read

    def _topic_ready(self, topic: str, partitions: int) -> bool:
        # All `partitions` must be known: the controller publishes a new topic's partitions one
        # by one as their ZooKeeper writes complete, so "every known partition has a leader"
        # held after the first one, and CreateTopics answered while Metadata still showed part
        # of the topic (librdkafka then failed sends to the rest with UNKNOWN_PARTITION).
        infos = [i for i in self.node.state.metadata if i.tp.topic == topic]
        return len(infos) >= partitions > 0 and all(i.leader != NO_LEADER for i in infos)

    async def wait_for_topics(self, topics: Mapping[str, int], timeout_s: float) -> bool:
        """Until each topic has all its partitions (name -> count), each with a leader."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(self._topic_ready(t, n) for t, n in topics.items()):
                return True
            await asyncio.sleep(0.02)
        return all(self._topic_ready(t, n) for t, n in topics.items())

    async def delete_topic(self, topic: str) -> None:
        assert self.zkd is not None and self.zk is not None
        zk = self.zk
        await self.zkd.call(lambda: zk.mark_topic_for_deletion(topic))

    async def wait_for_topics_gone(self, topics: Sequence[str], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            present = {i.tp.topic for i in self.node.state.metadata}
            if not present & set(topics):
                return True
            await asyncio.sleep(0.02)
        return False

    async def next_producer_id(self) -> int:
        if not self._pids:
            assert self.zkd is not None and self.zk is not None
            zk = self.zk
            start, end = await self.zkd.call(lambda: zk.allocate_producer_ids(PRODUCER_ID_BLOCK))
            self._pids = list(range(end, start - 1, -1))
        return self._pids.pop()

    # -- quotas and groups --------------------------------------------------------------------

    def throttle(self, kind: Literal["produce", "fetch"], req: Request, nbytes: int) -> int:
        return int(self.quotas.record_and_get_throttle(
            kind, "ANONYMOUS", req.header.client_id or "", nbytes, int(time.time() * 1000)))

    def unthrottle(self, kind: str, req: Request, nbytes: int) -> None:
        self.quotas.unrecord(kind, "ANONYMOUS", req.header.client_id or "", nbytes,  # type: ignore[arg-type]
                             int(time.time() * 1000))

    def fetch_quota_cap(self, req: Request) -> int:
        return int(self.quotas.fetch_max_bytes_in_quota_window(
            "ANONYMOUS", req.header.client_id or ""))

    async def group_request(self, req: Request, client_host: str) -> bytes:
        if self.groups is None:
            # Still starting: the listener opens before ZooKeeper and the coordinator are up.
            # Kafka's answer while its coordinator is not active; clients retry on it.
            from broker.groups.handlers import not_available_response
            from broker.wire import encode_response

            return encode_response(req.correlation_id, not_available_response(
                req.api_key, req.api_version, req.body, 15))  # COORDINATOR_NOT_AVAILABLE
        return bytes(await self.groups.handle(req, client_host))

    # -- connections ------------------------------------------------------------------------

    def _accept(self, conn: FrameProtocol) -> None:
        if len(self._connections) >= MAX_CONNECTIONS:
            conn.close()
            return
        task = asyncio.get_running_loop().create_task(self._on_connection(conn))
        self._connections.add(task)

    async def _on_connection(self, conn: FrameProtocol) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = conn.get_extra_info("peername")
        client_host = peer[0] if peer else ""
        sock = conn.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await self._serve(conn, client_host)
        except (ConnectionError, TimeoutError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception as e:  # never let one connection take the broker down
            log.exception("connection from %s: %s", peer, e)
        finally:
            self._connections.discard(task)
            conn.close()

    async def _serve(self, conn: FrameProtocol, client_host: str) -> None:
        # Consecutive Produce requests wait for their acks concurrently, answered in order
        # (broker/runtime/pipeline.py); anything else runs alone once they are answered.
        pipe = ResponsePipeline(functools.partial(_write_produce_response, conn), conn.close)
        try:
            await self._serve_requests(conn, client_host, pipe)
        finally:
            await pipe.close()

    async def _serve_requests(self, conn: FrameProtocol, client_host: str,
                              pipe: ResponsePipeline) -> None:
        while True:
            payload = await conn.next_frame()
            if payload is None:
                return  # end of stream (a frame cut short included)
            if isinstance(payload, FrameError):
                log.info("closing connection from %s: %s", client_host, payload.reason)
                await pipe.flush()  # answer the produce requests read before it
                return
            api_key = int.from_bytes(payload[:2], "big", signed=True)
            pipelined = api_key == 0 and not self.quotas.quotas_enabled("produce")
            if not pipelined:
                await pipe.flush()
            if ib.is_interbroker(api_key):
                frame = await self._interbroker(bytes(payload))
                if frame is None:
                    return
                conn.write(frame)
                await conn.drain()
                continue
            # Produce and Fetch (most of the traffic) by hand, records left in the frame
            # buffer; anything else, or anything unusual about them, through kio
            decoded: Request | Reply | Close | None = decode_fast(payload)
            fast = decoded is not None
            if decoded is None:
                decoded = decode_request(payload)
            if isinstance(decoded, Close | Reply):
                await pipe.flush()  # a produce that is not decoded: answer the earlier first
            if isinstance(decoded, Close):
                log.info("closing connection from %s: %s", client_host, decoded.reason)
                return
            if isinstance(decoded, Reply):
                conn.write(decoded.frame)
                await conn.drain()
                continue
            null = None if fast else null_array(decoded.body)
            if null is not None:  # Kafka's parser throws: close, as for any malformed body
                log.info("closing connection from %s: api %d v%d: non-nullable array %s is null",
                         client_host, decoded.api_key, decoded.api_version, null)
                await pipe.flush()  # answer the produce requests read before it
                return
            if pipelined:
                # appended now, in request order, without a task or a loop turn; the response
                # is written in the step that acknowledged it last (pipeline.py). No
                # timer per request: the core's produce timeout answers, and a halted broker
                # stops, which cancels the connection and with it the waits.
                started = self.apis.produce_started(decoded)
                await pipe.submit_pending(Pending(started.futures, started.finish,
                                                  self.node.replies.watch))
                continue
            resp = await self.apis.handle(decoded, client_host)
            if resp.frame is not None:
                await self._write(conn, resp.frame)
            if resp.throttle_ms > 0:
                await asyncio.sleep(resp.throttle_ms / 1000.0)  # channel muted (KIP-219)

    async def _write(self, conn: FrameProtocol, frame: bytes | ResponseFrame) -> None:
        if isinstance(frame, bytes):
            conn.write(frame)
            await conn.drain()
            return
        for chunk in frame.chunks:
            if isinstance(chunk, FileRegion):
                await _sendfile(conn, chunk)
            else:
                conn.write(chunk)
        await conn.drain()

    async def _interbroker(self, payload: bytes) -> bytes | None:
        decoded = ib.decode_interbroker_request(payload)
        if isinstance(decoded, Close):
            log.info("closing inter-broker connection: %s", decoded.reason)
            return None
        msg = decoded.message
        cid = decoded.header.correlation_id
        # Kafka processes no request before its registration completes (the socket server
        # starts processing at the end of startup): a controller that saw our znode may be
        # faster than our own ZooKeeper completion. Hold the request rather than drop it.
        deadline = time.monotonic() + REGISTRATION_WAIT_S
        while self.node.state.broker_epoch == NO_BROKER_EPOCH and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        api_key = decoded.header.api_key
        if isinstance(msg, UpdateMetadataRequest):
            for b, e in decoded.endpoints.items():
                self.endpoints[b] = Endpoint(e.host, e.port, e.rack)
        if isinstance(msg, LeaderAndIsrRequest):
            for e in decoded.live_leaders:
                self.endpoints[e.broker_id] = Endpoint(e.host, e.port, e.rack)
            try:
                await self._ensure_topic_configs(p.tp.topic for p in msg.partitions)
            except TopicConfigUnavailable as e:
                # Not applied: closing the connection makes the controller resend it (peers.py)
                log.warning("broker %d: LeaderAndIsr from controller %d not applied: %s",
                            self.broker_id, msg.controller_id, e)
                raise
        if isinstance(msg, ControlledShutdownRequest):
            msg = dataclasses.replace(msg, request_id=self.node.new_request_id())
            fut = self.node.responses.expect(msg.request_id)
            self.node.handle(ev.MessageReceived(msg.broker_id, msg))
            try:
                resp = await asyncio.wait_for(fut, CONTROLLED_SHUTDOWN_TIMEOUT_S)
            except TimeoutError:
                self.node.responses.forget(msg.request_id, fut)
                return ib.encode_interbroker_response(cid, api_key, 15)  # not controller
            return ib.encode_controlled_shutdown_response(resp, cid)
        assert isinstance(msg, LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest)
        stale = msg.controller_epoch < self.node.state.controller_epoch
        log.info("broker %d: %s from controller %d (epoch %d, broker epoch %d, %d partitions)%s",
                 self.broker_id, type(msg).__name__, msg.controller_id, msg.controller_epoch,
                 msg.broker_epoch, len(msg.partitions), " stale" if stale else "")
        self.node.handle(ev.MessageReceived(msg.controller_id, msg))
        return ib.encode_interbroker_response(cid, api_key, 11 if stale else 0)

    # -- periodic work ----------------------------------------------------------------------

    async def _periodic(self) -> None:
        """Flushes, checkpoints, retention and compaction on Kafka's intervals."""
        assert self.logs is not None
        cfg = self.config
        last_hw = last_retention = last_flush = last_clean = time.monotonic()
        while True:
            await asyncio.sleep(0.1)
            now = time.monotonic()
            now_ms = int(time.time() * 1000)
            try:
                rolled = self.logs.take_roll_flushes()
                if rolled:
                    # the old segments of rolls, fsynced off the loop (Kafka's flush-log task
                    # on its scheduler; on the loop it stalled every request 170-580 ms)
                    synced, failed = await asyncio.get_running_loop().run_in_executor(
                        None, _run_roll_flushes, rolled)
                    for rf in synced:
                        rf.done()
                    if failed is not None:  # as when the roll's fsync failed in the append
                        self.node._fail(failed)
                if now - last_flush >= cfg.log_flush_scheduler_interval_ms / 1000.0:
                    last_flush = now
                    self.logs.flush_dirty_logs(now_ms)
                if now - last_hw >= cfg.replica_high_watermark_checkpoint_interval_ms / 1000.0:
                    last_hw = now
                    # Offsets snapshotted here, files written and fsynced on a worker thread
                    # (Kafka's scheduler thread): on the loop this stalled produce and fetch
                    # for 4-146 ms every interval under load (LogManager.checkpoint_job).
                    await asyncio.get_running_loop().run_in_executor(
                        None, self.logs.checkpoint_job())
                if now - last_retention >= cfg.log_retention_check_interval_ms / 1000.0:
                    last_retention = now
                    self.logs.cleanup_logs(now_ms)
                    self.logs.checkpoint_log_start_offsets()
                if cfg.log_cleaner_enable and now - last_clean >= 1.0:
                    last_clean = now
                    self.logs.clean_logs(now_ms)
            except Exception as e:
                log.error("periodic log work failed: %s", e)

    # -- admin view -------------------------------------------------------------------------

    def replica_states(self) -> dict[str, Any]:
        """The read-only view a harness samples: each replica's role, epoch, LEO, HW, ISR, and
        the replication settings the partition obeys here (the topic's, else the broker's)."""
        st = self.node.state
        out = []
        for r in st.replicas:
            lg = self.logs.get_log(r.tp.topic, r.tp.partition) if self.logs else None
            effective = partition_config(st, r.tp)
            out.append({
                "min_insync_replicas": effective.min_insync_replicas,
                "unclean_leader_election_enable": effective.unclean_leader_election_enable,
                "topic_config": {k: v for k, v in (
                    ("min.insync.replicas", topic_config(st, r.tp.topic).min_insync_replicas),
                    ("unclean.leader.election.enable",
                     topic_config(st, r.tp.topic).unclean_leader_election_enable),
                ) if v is not None},
                "topic": r.tp.topic, "partition": r.tp.partition, "role": r.role.name.lower(),
                "leader": r.leader, "leader_epoch": r.leader_epoch,
                "log_end_offset": r.log_end_offset, "high_watermark": r.high_watermark,
                "log_start_offset": r.log_start_offset, "isr": list(r.isr),
                "replicas": list(r.replicas), "zk_version": r.zk_version,
                "epochs": [list(e) for e in r.epochs],
                "store_log_end_offset": lg.log_end_offset if lg is not None else None,
            })
        return {
            "broker_id": self.broker_id, "broker_epoch": st.broker_epoch,
            "controller_id": st.controller_id, "controller_epoch": st.controller_epoch,
            "is_controller": st.controller is not None, "pid": os.getpid(),
            "replicas": out, "time_ms": int(time.time() * 1000),
        }

    def replica_states_json(self) -> bytes:
        return json.dumps(self.replica_states(), separators=(",", ":")).encode()


def _run_roll_flushes(rolled: list[RollFlush]) -> tuple[list[RollFlush], OSError | None]:
    """On a worker thread: those whose fsyncs succeeded, and the first failure. A failed one
    leaves its log's recovery point where it was (a restart's recovery rescans the segment);
    the broker then halts, as it did when the roll's fsync failed inside the append (after a
    failed fsync the kernel may have dropped the dirty pages: retrying proves nothing)."""
    synced, failed = [], None
    for rf in rolled:
        try:
            rf.run()
        except OSError as e:
            log.error("fsync of a rolled segment of %s failed: %s", rf.log.dir.name, e)
            failed = failed or e
            continue
        synced.append(rf)
    return synced, failed
