"""Connections from this broker to the others: replica fetchers and the controller channel.

- `Fetcher` (one per leader this broker follows, Kafka's ReplicaFetcherThread): the core's
  `FetchRequest`s and `OffsetForLeaderEpochRequest`s for partitions led by that broker are
  coalesced into one Kafka Fetch (v12, with `replica_id`) or OffsetForLeaderEpoch (v4)
  request per round, as Kafka's fetcher batches its partitions. The leader holds the fetch up
  to `replica.fetch.wait.max.ms` when it has nothing new. Responses become
  `MessageReceived` events carrying the request's id; a request that fails on the network is
  reported to the core as `SendFailed` (the core then backs off `replica.fetch.backoff.ms`).
- `ControlChannel` (one per destination, Kafka's ControllerChannelManager): LeaderAndIsr,
  UpdateMetadata, StopReplica and ControlledShutdown in order, each retried until it is
  answered or its destination leaves the cluster (then it is reported as `SendFailed`).

Outgoing connections bind to this broker's own address, so a nemesis can cut a pair of
127.0.0.x hosts with source/destination rules. Every queue is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.offset_for_leader_epoch.v4 import request as ofle_req
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from broker.recordbatch import HEADER_SIZE, unpack_header
from broker.runtime.frames import FrameProtocol
from broker.runtime.node import Node
from broker.store.batch import validate_batch
from broker.wire import (
    DecodedResponse,
    FrameError,
    decode_response,
    encode_request,
    response_fields,
)
from broker.wire import interbroker as ib
from broker.wire._walk import Malformed
from broker.wire.fast import (
    FetchedPartition,
    FetchPartitionRequest,
    decode_fetch_response,
    encode_replica_fetch,
)
from broker.wire.framing import MIN_RESPONSE_FRAME_BYTES
from core import events as ev
from core.messages import (
    BatchInfo,
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
from core.types import Errors, TopicPartition

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
CONTROL_QUEUE_MAX = 10_000
CONTROL_RETRIES_UNREGISTERED = 5
FETCH_VERSION = 12
OFLE_VERSION = 4
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
COALESCE_YIELDS = 2  # Fetcher._run: loop iterations that let due zero-delay fetch timers fire
CLOSE_CANCEL_S = 5.0  # Peers.close: bound on cancelling fetchers and control channels
# ControlChannel: one attempt of a control request (connect, send, answer) is bounded by this,
# not by replica.socket.timeout.ms (30 s): a control request is answered at once (no long
# poll), so an attempt that takes longer has met a dead connection (a network partition that
# healed while the request, or its answer, sat in a retransmission backoff). The request stays
# at the head of the queue and is resent on a new connection (Kafka's ControllerChannelManager),
# after a bounded backoff. Resending is safe: control requests carry the controller and leader
# epochs, and a duplicate or a late copy is ignored as stale.
CONTROL_ATTEMPT_TIMEOUT_S = 5.0
CONTROL_BACKOFF_S = (0.05, 1.0)  # first and largest pause between attempts
# Unacknowledged bytes on a control connection for this long mean it is dead (TCP_USER_TIMEOUT):
# the kernel fails it instead of backing off retransmissions for minutes.
CONTROL_TCP_USER_TIMEOUT_MS = 3_000
CLIENT_ID = "hiwater"  # the client id of this broker's requests to the others


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int
    rack: str | None = None


EndpointLookup = Callable[[int, bool], Awaitable[Endpoint | None]]


class PeerError(ConnectionError):
    pass


class Connection:
    """One TCP connection to a broker; one request at a time (Kafka brokers answer in order
    per connection anyway). Reconnects lazily. Responses are read by `FrameProtocol`: a
    fetched record set is received into a buffer of its own and never copied after."""

    def __init__(self, source_host: str, timeout_s: float, user_timeout_ms: int = 0) -> None:
        self.source_host = source_host
        self.timeout_s = timeout_s  # bounds the connect
        self.user_timeout_ms = user_timeout_ms
        self._conn: FrameProtocol | None = None
        self._target: Endpoint | None = None
        self._correlation = 0

    def next_correlation_id(self) -> int:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        return self._correlation

    async def _connect(self, target: Endpoint) -> FrameProtocol:
        conn = self._conn
        if conn is not None and self._target == target and not conn.is_closing():
            return conn
        self.close()
        local = (self.source_host, 0) if self.source_host else None
        loop = asyncio.get_running_loop()
        _, fresh = await asyncio.wait_for(
            loop.create_connection(
                lambda: FrameProtocol(MAX_RESPONSE_BYTES, MIN_RESPONSE_FRAME_BYTES),
                target.host, target.port, local_addr=local),
            self.timeout_s,
        )
        self._conn, self._target = fresh, target
        sock = fresh.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.user_timeout_ms > 0 and hasattr(socket, "TCP_USER_TIMEOUT"):
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT,
                                    self.user_timeout_ms)
        return fresh

    async def request(self, target: Endpoint, frame: bytes, timeout_s: float
                      ) -> bytes | bytearray:
        """Send one request frame, return the response payload (without size prefix)."""
        try:
            conn = await self._connect(target)
            conn.write(frame)
            await conn.drain()
            payload = await conn.next_frame(timeout_s)
            if payload is None:
                raise PeerError("connection closed")
            if isinstance(payload, FrameError):
                raise PeerError(f"response frame: {payload.reason}")
            return payload
        except (OSError, TimeoutError, PeerError) as e:
            self.close()
            raise PeerError(f"{target.host}:{target.port}: {type(e).__name__}: {e}") from e

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._target = None


class Fetcher:
    """Kafka's ReplicaFetcherThread towards one leader."""

    def __init__(
        self, node: Node, leader: int, lookup: EndpointLookup, source_host: str,
        max_wait_ms: int, min_bytes: int, max_bytes: int, partition_max_bytes: int,
        timeout_s: float,
    ) -> None:
        self.node = node
        self.leader = leader
        self.lookup = lookup
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.timeout_s = timeout_s
        self.conn = Connection(source_host, timeout_s)
        self.fetches: dict[TopicPartition, FetchRequest] = {}
        self.truncations: dict[TopicPartition, OffsetForLeaderEpochRequest] = {}
        self._wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def add(self, msg: FetchRequest | OffsetForLeaderEpochRequest) -> None:
        if isinstance(msg, FetchRequest):
            self.fetches[msg.tp] = msg
        else:
            self.truncations[msg.tp] = msg
        self._wake.set()
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._run(), name=f"fetcher-{self.leader}")

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            # Handling the last round's responses set a zero-delay fetch timer per partition
            # (node.py: loop.call_soon, queued before this task's next step); yielding lets
            # them fire first, so every partition that is ready to fetch goes into this round,
            # as in Kafka's fetcher. Without it, partitions added while a round was in flight
            # were sent alone next, the answered ones missed that round, and the two sets
            # alternated for good: each waited out the other's long poll
            # (replica.fetch.wait.max.ms), so an acks=all produce took ~500 ms once a broker
            # followed a second partition of that leader. The yield is not a timed sleep: a
            # 1 ms sleep here cost 4 to 10 ms per replication hop on a loaded machine (the
            # process slept and waited for a CPU again), twice per acks=all produce.
            # A node with inline timers (the live broker) has already run those timers inside
            # the responses' `handle` calls: the round is complete without a loop turn.
            for _ in range(0 if getattr(self.node, "inline_timers", False) else COALESCE_YIELDS):
                await asyncio.sleep(0)
            self._wake.clear()
            if self.truncations:
                batch_t, self.truncations = self.truncations, {}
                await self._round(batch_t, self._offsets_for_leader_epoch)
            if self.fetches:
                batch_f, self.fetches = self.fetches, {}
                await self._round(batch_f, self._fetch)
            if self.fetches or self.truncations:
                self._wake.set()

    async def _round(self, batch: dict[TopicPartition, Any], fn: Callable[..., Awaitable[None]]
                     ) -> None:
        try:
            target = await self.lookup(self.leader, False)
            if target is None:
                raise PeerError(f"broker {self.leader} is not registered")
            await fn(target, batch)
        except PeerError as e:
            log.info("broker %d: fetch from %d failed: %s", self.node.broker_id, self.leader, e)
            with contextlib.suppress(PeerError):
                await self.lookup(self.leader, True)  # refresh the endpoint next time
            for m in batch.values():
                self.node.handle(ev.SendFailed(self.leader, m))

    async def _offsets_for_leader_epoch(
        self, target: Endpoint, batch: dict[TopicPartition, OffsetForLeaderEpochRequest]
    ) -> None:
        by_topic: dict[str, list[Any]] = {}
        for tp, m in sorted(batch.items()):
            by_topic.setdefault(tp.topic, []).append(ofle_req.OffsetForLeaderPartition(
                partition=i32(tp.partition), current_leader_epoch=i32(m.current_leader_epoch),
                leader_epoch=i32(m.leader_epoch)))
        body = ofle_req.OffsetForLeaderEpochRequest(
            replica_id=BrokerId(self.node.broker_id),
            topics=tuple(ofle_req.OffsetForLeaderTopic(topic=TopicName(t), partitions=tuple(ps))
                         for t, ps in by_topic.items()),
        )
        cid = self.conn.next_correlation_id()
        payload = await self.conn.request(target, encode_request(body, cid), self.timeout_s)
        resp = decode_response(payload, 23, OFLE_VERSION)
        if not isinstance(resp, DecodedResponse):
            raise PeerError(f"bad OffsetForLeaderEpoch response: {resp}")
        for t in response_fields(resp).topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic, int(p.partition))
                asked = batch.get(tp)
                if asked is None:
                    continue
                m = asked
                self.node.handle(ev.MessageReceived(self.leader, OffsetForLeaderEpochResponse(
                    tp=tp, error=_error(int(p.error_code.value)),
                    current_leader_epoch=m.current_leader_epoch, requested_epoch=m.leader_epoch,
                    leader_epoch=int(p.leader_epoch), end_offset=int(p.end_offset),
                    request_id=m.request_id)))

    async def _fetch(self, target: Endpoint, batch: dict[TopicPartition, FetchRequest]) -> None:
        by_topic: dict[str, list[FetchPartitionRequest]] = {}
        for tp, m in sorted(batch.items()):
            by_topic.setdefault(tp.topic, []).append(FetchPartitionRequest(
                tp.partition, m.current_leader_epoch, m.fetch_offset, m.last_fetched_epoch,
                self.partition_max_bytes))
        cid = self.conn.next_correlation_id()
        frame = encode_replica_fetch(cid, CLIENT_ID, self.node.broker_id, self.max_wait_ms,
                                     self.min_bytes, self.max_bytes, list(by_topic.items()))
        timeout = self.timeout_s + self.max_wait_ms / 1000.0
        payload = await self.conn.request(target, frame, timeout)
        try:
            _, _, topics = decode_fetch_response(payload)
        except Malformed as e:
            self.conn.close()
            raise PeerError(f"bad Fetch response: {e}") from None
        for t in topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                wanted = batch.get(tp)
                if wanted is None:
                    continue
                self.node.handle(ev.MessageReceived(self.leader, _fetch_response(wanted, p)))


def _error(code: int) -> Errors:
    try:
        return Errors(code)
    except ValueError:
        return Errors.NOT_LEADER_OR_FOLLOWER  # any other error: back off and retry


def _fetch_response(m: FetchRequest, p: FetchedPartition) -> FetchResponse:
    """The core's FetchResponse from a Kafka partition response: the complete, valid batches
    from the fetch offset on (a trailing partial batch is dropped, as Kafka's follower does).
    Each batch's header is read and its CRC checked here (Kafka's follower checks the CRC, not
    every record), so a corrupt response is an error reply, never a store failure; the
    records stay a view of the response frame."""
    error = _error(p.error_code)
    records = p.records if p.records is not None else memoryview(b"")
    batches: list[BatchInfo] = []
    pos = 0
    if error == Errors.NONE:
        try:
            n = len(records)
            while pos + HEADER_SIZE <= n:
                h = unpack_header(records, pos)
                if pos + h.size > n:
                    break
                validate_batch(records, pos)
                if not batches and h.base_offset != m.fetch_offset:
                    raise ValueError(
                        f"first batch at {h.base_offset}, fetched from {m.fetch_offset}")
                batches.append(BatchInfo(h.base_offset, h.last_offset, h.partition_leader_epoch,
                                         h.producer_id, h.producer_epoch, h.base_sequence))
                pos += h.size
        except Exception as e:  # a corrupt or misaligned response: treat as an error
            log.warning("%s: bad fetched records: %s", m.tp, e)
            error, batches, pos = Errors.NOT_LEADER_OR_FOLLOWER, [], 0
    return FetchResponse(
        tp=m.tp, error=error, fetch_offset=m.fetch_offset,
        current_leader_epoch=m.current_leader_epoch, high_watermark=p.high_watermark,
        log_start_offset=p.log_start_offset,
        end_offset=batches[-1].last_offset + 1 if batches else m.fetch_offset,
        diverging=p.diverging_end_offset != -1, batches=tuple(batches),
        records=records[:pos] if batches else None, request_id=m.request_id,
    )


class ControlChannel:
    """Kafka's ControllerChannelManager queue towards one broker."""

    def __init__(self, node: Node, dst: int, lookup: EndpointLookup, source_host: str,
                 timeout_s: float, endpoints: Callable[[], dict[int, Endpoint]]) -> None:
        self.node = node
        self.dst = dst
        self.lookup = lookup
        self.timeout_s = timeout_s
        self.endpoints = endpoints
        self.attempt_timeout_s = min(timeout_s, CONTROL_ATTEMPT_TIMEOUT_S)
        self.conn = Connection(source_host, self.attempt_timeout_s, CONTROL_TCP_USER_TIMEOUT_MS)
        self.queue: asyncio.Queue[Message] = asyncio.Queue(CONTROL_QUEUE_MAX)
        self.attempts = 0  # requests sent, resends included (tests)
        self.task: asyncio.Task[None] | None = None

    def add(self, msg: Message) -> None:
        try:
            self.queue.put_nowait(msg)
        except asyncio.QueueFull:
            log.error("control queue to broker %d full: dropping %s", self.dst,
                      type(msg).__name__)
            return
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._run(), name=f"control-{self.dst}")

    async def _run(self) -> None:
        while True:
            msg = await self.queue.get()
            try:
                await self._deliver(msg)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a bug: say so, keep the channel alive
                log.exception("control request %s to broker %d failed: %s",
                              type(msg).__name__, self.dst, e)

    async def _endpoints_for(self, msg: Message) -> None:
        """UpdateMetadata names every live broker's endpoint: learn the ones we miss."""
        if isinstance(msg, UpdateMetadataRequest):
            known = self.endpoints()
            for b in msg.live_brokers:
                if b.broker_id not in known:
                    await self.lookup(b.broker_id, True)

    def _frame(self, msg: Message, cid: int) -> tuple[int, bytes]:
        client = f"broker-{self.node.broker_id}"
        eps = {b: ib.Endpoint(b, e.host, e.port, e.rack) for b, e in self.endpoints().items()}
        known = self.endpoints()
        match msg:
            case LeaderAndIsrRequest():
                leaders = sorted({p.leader for p in msg.partitions if p.leader in eps})
                return 4, ib.encode_leader_and_isr(msg, [eps[b] for b in leaders], cid, client)
            case UpdateMetadataRequest():
                # A broker that left meanwhile has no endpoint: it is not live for this
                # request either (its successor UpdateMetadata will say so).
                live = tuple(b for b in msg.live_brokers if b.broker_id in known)
                msg = dataclasses.replace(msg, live_brokers=live)
                return 6, ib.encode_update_metadata(msg, eps, cid, client)
            case StopReplicaRequest():
                return 5, ib.encode_stop_replica(msg, cid, client)
            case ControlledShutdownRequest():
                return 7, ib.encode_controlled_shutdown(msg, cid, client)
        raise TypeError(f"not a control request: {msg!r}")

    async def _deliver(self, msg: Message) -> None:
        await self._endpoints_for(msg)
        misses = 0
        delay = CONTROL_BACKOFF_S[0]
        # ControlledShutdown is answered only once the controller moved our leaderships: it
        # may take long, and the broker bounds its own wait for it.
        timeout = (self.timeout_s if isinstance(msg, ControlledShutdownRequest)
                   else self.attempt_timeout_s)
        while True:
            target = await self.lookup(self.dst, misses > 0)
            if target is None:
                misses += 1
                if misses > CONTROL_RETRIES_UNREGISTERED:
                    log.info("broker %d left: dropping %s", self.dst, type(msg).__name__)
                    self.node.handle(ev.SendFailed(self.dst, msg))
                    return
            else:
                try:
                    cid = self.conn.next_correlation_id()
                    api_key, frame = self._frame(msg, cid)
                    self.attempts += 1
                    payload = await self.conn.request(target, frame, timeout)
                    self._answered(msg, api_key, payload)
                    return
                except PeerError as e:  # the connection is closed: resend on a new one
                    misses += 1
                    log.info("control request %s to %d failed (attempt %d), resending: %s",
                             type(msg).__name__, self.dst, misses, e)
            await asyncio.sleep(delay)
            delay = min(delay * 2, CONTROL_BACKOFF_S[1])

    def _answered(self, request: Message, api_key: int, payload: bytes | bytearray) -> None:
        if api_key != 7:
            return  # the core does not wait for LeaderAndIsr/UpdateMetadata/StopReplica acks
        resp = ib.decode_interbroker_response(payload, api_key)
        if isinstance(resp, ib.InterbrokerResponse):
            msg = resp.controlled_shutdown()
            if isinstance(msg, ControlledShutdownResponse):
                answer = dataclasses.replace(msg, request_id=request.request_id)
                self.node.handle(ev.MessageReceived(self.dst, answer))


class Peers:
    """Routes the core's outgoing requests to fetchers and control channels."""

    def __init__(self, node: Node, lookup: EndpointLookup, source_host: str, *,
                 max_wait_ms: int, min_bytes: int, max_bytes: int, partition_max_bytes: int,
                 timeout_s: float, endpoints: Callable[[], dict[int, Endpoint]]) -> None:
        self.node = node
        self.lookup = lookup
        self.source_host = source_host
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.timeout_s = timeout_s
        self.endpoints = endpoints
        self.fetchers: dict[int, Fetcher] = {}
        self.channels: dict[int, ControlChannel] = {}

    def send(self, dst: int, msg: Message) -> None:
        if isinstance(msg, FetchRequest | OffsetForLeaderEpochRequest):
            f = self.fetchers.get(dst)
            if f is None:
                f = self.fetchers[dst] = Fetcher(
                    self.node, dst, self.lookup, self.source_host, self.max_wait_ms,
                    self.min_bytes, self.max_bytes, self.partition_max_bytes, self.timeout_s)
            f.add(msg)
        else:
            c = self.channels.get(dst)
            if c is None:
                c = self.channels[dst] = ControlChannel(
                    self.node, dst, self.lookup, self.source_host, self.timeout_s,
                    self.endpoints)
            c.add(msg)

    async def close(self) -> None:
        every: list[Fetcher | ControlChannel] = [*self.fetchers.values(),
                                                 *self.channels.values()]
        pending = {x.task for x in every if x.task is not None}
        # Cancel until they are gone (bounded): Python 3.11's asyncio.wait_for swallows a
        # cancellation that races with its future completing (CPython gh-86296); a fetcher
        # that lost its cancel went on fetching and held the broker's shutdown until SIGKILL.
        deadline = time.monotonic() + CLOSE_CANCEL_S
        while pending and time.monotonic() < deadline:
            for t in pending:
                t.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.5)
        for x in every:
            x.conn.close()
