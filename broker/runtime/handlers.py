"""Kafka API handlers: a decoded request in, the core stepped, a response (or none) out.

Each handler turns a Kafka request into core events (`ProduceReceived`,
`ConsumerFetchReceived`, `ListOffsetsReceived`, inter-broker `MessageReceived`), waits for the
core's reply effects, and encodes Kafka's response at the request's version. Anything the
replication protocol does not decide (topic creation, producer ids, groups) is answered here
with ZooKeeper and the store, as Kafka's `KafkaApis` does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import re
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.recordbatch import HEADER_SIZE, unpack_header
from broker.runtime.ports import running_loop
from broker.store.batch import validate_produced
from broker.store.errors import InvalidRecordError, RecordTooLargeError, StoreError
from broker.wire import (
    FetchPartitionResponse,
    FetchResponseBody,
    FetchTopicResponse,
    Request,
    ResponseFrame,
    api_versions_response,
    build,
    encode_fetch_response,
    encode_response,
    request_fields,
    response_class,
)
from broker.wire import FileRegion as WireRegion
from broker.wire.fast import ProducePartitionResult, encode_produce_response
from broker.wire.fetch import EpochEndOffset
from core import effects as fx
from core import events as ev
from core.messages import (
    FetchRequest,
    FetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from core.rules.assignment import assign_replicas
from core.types import NO_LEADER, UNDEFINED_EPOCH, Errors, Role, TopicPartition

if TYPE_CHECKING:
    from broker.runtime.server import Broker

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
TOPIC_NAMESPACE = uuid.UUID("6f1c1f3e-5b8a-4f57-9a7e-2c0f3a6d9b10")
MAX_PARTITIONS_PER_TOPIC = 10_000

# Kafka error codes used here beyond the core's
CORRUPT_MESSAGE = 2
LEADER_NOT_AVAILABLE = 5
MESSAGE_TOO_LARGE = 10
COORDINATOR_NOT_AVAILABLE = 15
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
TOPIC_DELETION_DISABLED = 73
INVALID_RECORD = 87
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


def topic_id(topic: str) -> uuid.UUID:
    """A stable topic id (Metadata v10+). Kafka keeps a random one in the topic znode; a
    name-derived id is enough here because ids are only reported, never looked up."""
    return uuid.uuid5(TOPIC_NAMESPACE, topic)


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def _code(e: int) -> ErrorCode:
    return ErrorCode(int(e))


class Response:
    """What a handler returns: a complete frame as bytes or chunks, or nothing (acks=0)."""

    __slots__ = ("frame", "throttle_ms")

    def __init__(self, frame: bytes | ResponseFrame | None, throttle_ms: int = 0) -> None:
        self.frame = frame
        self.throttle_ms = throttle_ms


class Apis:
    def __init__(self, broker: Broker) -> None:
        self.b = broker
        self._loop: list[asyncio.AbstractEventLoop] = []  # running_loop's cache

    @property
    def node(self) -> Any:
        return self.b.node

    def _encode(self, req: Request, data: dict[str, Any]) -> bytes:
        cls = response_class(req.api_key, req.api_version)
        return encode_response(req.correlation_id, build(cls, data))

    async def handle(self, req: Request, client_host: str) -> Response:
        match req.api_key:
            case 0:
                return await self.produce(req)
            case 1:
                return await self.fetch(req)
            case 2:
                return Response(await self.list_offsets(req))
            case 3:
                return Response(await self.metadata(req))
            case 18:
                return Response(encode_response(
                    req.correlation_id, api_versions_response(req.api_version)))
            case 19:
                return Response(await self.create_topics(req))
            case 20:
                return Response(await self.delete_topics(req))
            case 22:
                return Response(await self.init_producer_id(req))
            case 23:
                return Response(await self.offset_for_leader_epoch(req))
            case 8 | 9 | 10 | 11 | 12 | 13 | 14 | 15 | 16:
                return Response(await self.b.group_request(req, client_host))
            case 32:
                from broker.runtime.admin_handlers import describe_configs

                return Response(await describe_configs(self.b, req))
        raise ValueError(f"no handler for api key {req.api_key}")

    # -- Metadata ---------------------------------------------------------------------------

    def _brokers(self) -> list[dict[str, Any]]:
        out = []
        for lb in self.node.state.live_brokers:
            ep = self.b.endpoints.get(lb.broker_id)
            if ep is not None:
                out.append({"node_id": lb.broker_id, "host": ep.host, "port": ep.port,
                            "rack": ep.rack})
        return out

    def topics_view(self) -> dict[str, list[Any]]:
        view: dict[str, list[Any]] = {}
        for info in self.node.state.metadata:
            view.setdefault(info.tp.topic, []).append(info)
        return view

    def _topic_entry(self, name: str, infos: list[Any], live: set[int]) -> dict[str, Any]:
        parts = []
        for info in sorted(infos, key=lambda i: i.tp.partition):
            leader = info.leader if info.leader in live else NO_LEADER
            parts.append({
                "error_code": _code(0 if leader != NO_LEADER else LEADER_NOT_AVAILABLE),
                "partition_index": info.tp.partition,
                "leader_id": leader,
                "leader_epoch": info.leader_epoch,
                "replica_nodes": list(info.replicas),
                "isr_nodes": list(info.isr),
                "offline_replicas": [r for r in info.replicas if r not in live],
            })
        return {"error_code": _code(0), "name": name, "topic_id": topic_id(name),
                "is_internal": name == OFFSETS_TOPIC, "partitions": parts,
                "topic_authorized_operations": -2147483648}

    async def metadata(self, req: Request) -> bytes:
        body = request_fields(req)
        v = req.api_version
        view = self.topics_view()
        live = {lb.broker_id for lb in self.node.state.live_brokers}
        requested: list[str] | None
        if body.topics is None or (v == 0 and not body.topics):
            requested = None
        else:
            requested = [t.name for t in body.topics if t.name is not None]
        auto = bool(getattr(body, "allow_auto_topic_creation", True))
        topics = []
        for name in sorted(view) if requested is None else requested:
            if name in view and await self.b.topic_complete(name, len(view[name])):
                topics.append(self._topic_entry(name, view[name], live))
                continue
            code = 3  # UNKNOWN_TOPIC_OR_PARTITION
            if name in view:
                code = LEADER_NOT_AVAILABLE  # partly published yet (Broker.topic_complete)
            elif not TOPIC_NAME.fullmatch(name) or name in (".", ".."):
                code = INVALID_TOPIC_EXCEPTION
            elif auto and self.b.config.auto_create_topics_enable:
                code = await self.b.auto_create(name)
            topics.append({"error_code": _code(code), "name": name, "topic_id": topic_id(name),
                           "is_internal": False, "partitions": [],
                           "topic_authorized_operations": -2147483648})
        return self._encode(req, {
            "throttle_time": _ms(0), "brokers": self._brokers(),
            "cluster_id": self.b.cluster_id, "controller_id": self.node.state.controller_id,
            "topics": topics, "cluster_authorized_operations": -2147483648,
        })

    # -- Produce ----------------------------------------------------------------------------

    async def produce(self, req: Request) -> Response:
        started = self.produce_started(req)
        for fut in started.futures:
            await self._await_reply(fut, started.timeout_ms)
        return started.finish()

    def produce_started(self, req: Request) -> _ProduceStarted:
        """The synchronous part of a Produce: every partition's batch checked and handed to
        the core (appended, in request order) now; what is left is waiting for the replies
        (`futures`) and `finish`, which encodes the response (none for acks=0)."""
        body = request_fields(req)
        acks = int(body.acks)
        timeout_ms = max(0, int(body.timeout.total_seconds() * 1000))
        results: list[tuple[str, int, Any]] = []  # (topic, partition, future | (error, base))
        total_bytes = 0
        for t in body.topic_data:
            for p in t.partition_data:
                tp = TopicPartition(t.name, int(p.index))
                records = p.records
                total_bytes += len(records or b"")
                if acks not in (-1, 0, 1):
                    results.append((t.name, tp.partition, (INVALID_REQUIRED_ACKS, -1)))
                    continue
                if body.transactional_id is not None:
                    results.append((t.name, tp.partition,
                                    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)))
                    continue
                checked = self._check_batch(tp, records)
                if isinstance(checked, int):
                    results.append((t.name, tp.partition, (checked, -1)))
                    continue
                h = checked
                rid = self.node.new_request_id()
                fut = self.node.replies.expect(rid) if acks != 0 else None
                # records: a view of the request frame (broker/wire/fast.py), not a copy;
                # the frame's buffer is the request's own (runtime/frames.py), never reused
                self.node.handle(ev.ProduceReceived(
                    request_id=rid, tp=tp, acks=acks, record_count=h.last_offset_delta + 1,
                    records=records, producer_id=h.producer_id,
                    producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                    timeout_ms=timeout_ms))
                results.append((t.name, tp.partition, fut))
        throttle = self.b.throttle("produce", req, total_bytes)
        return _ProduceStarted(self, req, acks, results, throttle, timeout_ms)

    async def _await_reply(self, fut: asyncio.Future[Any], timeout_ms: int) -> Any:
        # The core's produce timeout answers first; this bound only covers a halted broker.
        # One timer on the future itself (asyncio.wait_for added a waiter future and two
        # callbacks to every acks=all produce).
        if fut.done():
            return fut.result()
        timer = asyncio.get_running_loop().call_later(
            timeout_ms / 1000.0 + 5.0, _produce_timed_out, fut)
        try:
            return await fut
        finally:
            timer.cancel()

    def _check_batch(self, tp: TopicPartition, records: bytes | None) -> Any:
        """The produced records as Kafka validates them before the append: one v2 batch
        (Produce v3+), CRC, size, keys for compacted topics. Returns the header or an error."""
        if not records or len(records) < HEADER_SIZE:
            return CORRUPT_MESSAGE if records else INVALID_RECORD
        try:
            magic = records[16]
            if magic != 2:
                return UNSUPPORTED_FOR_MESSAGE_FORMAT
            headers = validate_produced(records, self.b.config.message_max_bytes)
        except RecordTooLargeError:
            return MESSAGE_TOO_LARGE
        except InvalidRecordError:
            return CORRUPT_MESSAGE
        except StoreError:
            return CORRUPT_MESSAGE
        if len(headers) != 1:
            return INVALID_RECORD  # v3+ carries exactly one batch per partition
        h = headers[0]
        if h.is_transactional or h.is_control:
            return TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        lg = self.node.logs.get_log(tp.topic, tp.partition)
        if lg is not None and lg.config.compact:
            from broker.store.batch import decode_records

            for r in decode_records(memoryview(records), h):
                if r.key is None:
                    return INVALID_RECORD
        return unpack_header(records, 0)

    # -- Fetch ------------------------------------------------------------------------------

    async def fetch(self, req: Request) -> Response:
        body = request_fields(req)
        if int(body.replica_id) >= 0:
            return await self.replica_fetch(req)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, body.max_wait.total_seconds())
        min_bytes = int(body.min_bytes)
        wanted = [(TopicPartition(t.topic, int(p.partition)), p)
                  for t in body.topics for p in t.partitions]
        # Kafka caps a consumer fetch at what the quota window allows at most.
        max_bytes = min(int(body.max_bytes), self.b.fetch_quota_cap(req))
        while True:
            parts, size, errors = self._consumer_read(wanted, max_bytes)
            left = deadline - loop.time()
            if size >= min_bytes or errors or left <= 0 or not wanted:
                break
            await self.node.wait_for_change([tp for tp, _ in wanted], left)
        throttle = self.b.throttle("fetch", req, size)
        if throttle > 0:
            # KafkaApis: a throttled fetch is not served. Its bytes are taken back and the
            # client gets the partitions without records, the throttle time, and a muted
            # channel for that long (KIP-219).
            self.b.unthrottle("fetch", req, size)
            parts = [(tp, dataclasses.replace(p, records=())) for tp, p in parts]
        return Response(self._fetch_frame(req, parts, throttle), throttle)

    def _consumer_read(self, wanted: list[tuple[TopicPartition, Any]], max_bytes: int
                       ) -> tuple[list[tuple[TopicPartition, FetchPartitionResponse]], int, bool]:
        out = []
        size = 0
        errors = False
        for tp, p in wanted:
            rid = self.node.new_request_id()
            fut = self.node.replies.expect(rid)
            self.node.handle(ev.ConsumerFetchReceived(
                rid, tp, int(p.fetch_offset), int(getattr(p, "current_leader_epoch", -1))))
            reply = fut.result() if fut.done() else None
            if reply is None:
                self.node.replies.forget(rid, fut)
                out.append((tp, FetchPartitionResponse(tp.partition, -1, error_code=7)))
                errors = True
                continue
            lg = self.node.logs.get_log(tp.topic, tp.partition)
            records: tuple[Any, ...] = ()
            readable = reply.end_offset > reply.fetch_offset
            if reply.error == Errors.NONE and lg is not None and readable:
                budget = max(0, max_bytes - size)
                region = lg.read(reply.fetch_offset, min(int(p.partition_max_bytes), budget)
                                 if budget else 0, max_offset=reply.end_offset,
                                 min_one_message=size == 0)
                if region.length:
                    records = (WireRegion(region.fd if region.fd is not None else str(region.path),
                                          region.position, region.length),)
                    size += region.length
            elif reply.error != Errors.NONE:
                errors = True
            out.append((tp, FetchPartitionResponse(
                tp.partition, reply.high_watermark, error_code=int(reply.error),
                last_stable_offset=reply.high_watermark,
                log_start_offset=lg.log_start_offset if lg is not None else -1,
                records=records)))
        return out, size, errors

    def _fetch_frame(self, req: Request, parts: Iterable[tuple[TopicPartition, Any]],
                     throttle: int) -> ResponseFrame:
        by_topic: dict[str, list[FetchPartitionResponse]] = {}
        for tp, p in parts:
            by_topic.setdefault(tp.topic, []).append(p)
        body = FetchResponseBody(
            responses=tuple(FetchTopicResponse(t, tuple(ps)) for t, ps in by_topic.items()),
            throttle_time_ms=throttle, error_code=0, session_id=0)
        return encode_fetch_response(req.api_version, req.correlation_id, body)

    async def replica_fetch(self, req: Request) -> Response:
        """A follower's fetch: each partition through the core as a `FetchRequest` message,
        held (DelayedFetch) until new data or `max_wait` when nothing is there yet."""
        body = request_fields(req)
        follower = int(body.replica_id)
        loop = running_loop(self._loop)
        deadline = loop.time() + max(0, body.max_wait.total_seconds())
        wanted = [(TopicPartition(t.topic, int(p.partition)), p)
                  for t in body.topics for p in t.partitions]
        while True:
            parts = []
            size = 0
            errors = False
            for tp, p in wanted:
                # current_leader_epoch is in Fetch v9+, last_fetched_epoch in v12+: an older
                # replica fetch has neither (-1: no fencing, no divergence check, as Kafka)
                msg = FetchRequest(follower, tp, int(p.fetch_offset),
                                   int(getattr(p, "current_leader_epoch", -1)),
                                   int(getattr(p, "last_fetched_epoch", -1)),
                                   self.node.new_request_id())
                resp = self._ask_numbered(follower, msg)
                part, n = self._replica_part(tp, p, resp, size, int(body.max_bytes))
                parts.append((tp, part))
                size += n
                errors = errors or part.error_code != 0
            left = deadline - loop.time()
            if size >= max(1, int(body.min_bytes)) or errors or left <= 0:
                break
            await self._hold_replica_fetch(wanted, deadline)
        return Response(self._fetch_frame(req, parts, 0))

    async def _hold_replica_fetch(self, wanted: list[tuple[TopicPartition, Any]],
                                  deadline: float) -> None:
        """Kafka's DelayedFetch for a follower: until a partition has data past the fetch
        offset (or its log was truncated below it, or this broker no longer leads it at the
        same epoch), or the deadline. A change of the high watermark alone does not complete
        it (as in Kafka: the follower learns the HW with its next data, or when the wait
        expires); asking the core again for it was a wasted step per acks=all produce."""
        loop = running_loop(self._loop)
        tps = [tp for tp, _ in wanted]
        epochs = {}
        for tp in tps:
            r = self.node.replica(tp)
            epochs[tp] = (r.role, r.leader_epoch) if r is not None else None
        while True:
            left = deadline - loop.time()
            if left <= 0:
                return
            await self.node.wait_for_change(tps, left)
            for tp, p in wanted:
                r = self.node.replica(tp)
                if r is None or (r.role, r.leader_epoch) != epochs[tp]:
                    return
                lg = self.node.logs.get_log(tp.topic, tp.partition)
                if lg is None or lg.log_end_offset != int(p.fetch_offset):
                    return

    def _ask(self, src: int, msg: FetchRequest | OffsetForLeaderEpochRequest) -> Any:
        """The core's response to a follower's request, matched by the request id given
        here; None when the core sent none (a partition we do not host)."""
        return self._ask_numbered(
            src, dataclasses.replace(msg, request_id=self.node.new_request_id()))

    def _ask_numbered(self, src: int, msg: FetchRequest | OffsetForLeaderEpochRequest) -> Any:
        """`_ask` for a message that carries its new request id already."""
        fut = self.node.responses.expect(msg.request_id)
        self.node.handle(ev.MessageReceived(src, msg))
        if fut.done():
            return fut.result()
        self.node.responses.forget(msg.request_id, fut)
        return None

    def _replica_part(self, tp: TopicPartition, p: Any, resp: FetchResponse | None, size: int,
                      max_bytes: int) -> tuple[FetchPartitionResponse, int]:
        if resp is None:
            return FetchPartitionResponse(tp.partition, -1, error_code=3), 0
        lg = self.node.logs.get_log(tp.topic, tp.partition)
        records: tuple[Any, ...] = ()
        n = 0
        if resp.error == Errors.NONE and lg is not None and resp.end_offset > resp.fetch_offset:
            budget = max(0, max_bytes - size)
            region = lg.read(resp.fetch_offset, min(int(p.partition_max_bytes), budget),
                             max_offset=resp.end_offset, min_one_message=size == 0)
            if region.length:
                records = (WireRegion(region.fd if region.fd is not None else str(region.path),
                                      region.position, region.length),)
                n = region.length
        diverging = EpochEndOffset(epoch=-1, end_offset=resp.fetch_offset) \
            if resp.diverging else None
        return FetchPartitionResponse(
            tp.partition, resp.high_watermark, error_code=int(resp.error),
            last_stable_offset=resp.high_watermark, log_start_offset=resp.log_start_offset,
            records=records, diverging_epoch=diverging), n

    # -- ListOffsets, OffsetForLeaderEpoch ----------------------------------------------------

    async def list_offsets(self, req: Request) -> bytes:
        topics = []
        for t in request_fields(req).topics:
            parts = []
            for p in t.partitions:
                tp = TopicPartition(t.name, int(p.partition_index))
                parts.append(self._list_offset(tp, int(p.timestamp),
                                               int(getattr(p, "current_leader_epoch", -1))))
            topics.append({"name": t.name, "partitions": parts})
        return self._encode(req, {"throttle_time": _ms(0), "topics": topics})

    def _list_offset(self, tp: TopicPartition, timestamp: int, epoch: int) -> dict[str, Any]:
        rid = self.node.new_request_id()
        fut = self.node.replies.expect(rid)
        core_ts = timestamp if timestamp in (-1, -2) else -2  # fencing and leadership check
        self.node.handle(ev.ListOffsetsReceived(rid, tp, core_ts, epoch))
        reply = fut.result() if fut.done() else None
        r = self.node.replica(tp)
        leader_epoch = r.leader_epoch if r is not None else -1
        if reply is None:
            return {"partition_index": tp.partition, "error_code": _code(7), "timestamp": -1,
                    "offset": -1, "leader_epoch": -1, "old_style_offsets": []}
        offset, ts = reply.offset, -1
        if reply.error == Errors.NONE and timestamp not in (-1, -2):
            lg = self.node.logs.get_log(tp.topic, tp.partition)
            found = None
            if lg is not None:
                target = lg.max_timestamp() if timestamp == -3 else timestamp
                found = lg.offset_for_timestamp(target)
            if found is not None and found[0] < r.high_watermark:
                offset, ts = found
            else:
                offset, ts = -1, -1
        return {"partition_index": tp.partition, "error_code": _code(int(reply.error)),
                "timestamp": ts, "offset": offset, "leader_epoch": leader_epoch,
                "old_style_offsets": []}

    async def offset_for_leader_epoch(self, req: Request) -> bytes:
        src = int(getattr(request_fields(req), "replica_id", -1))
        topics = []
        for t in request_fields(req).topics:
            parts = []
            for p in t.partitions:
                tp = TopicPartition(t.topic, int(p.partition))
                msg = OffsetForLeaderEpochRequest(
                    src, tp, int(getattr(p, "current_leader_epoch", UNDEFINED_EPOCH)),
                    int(p.leader_epoch))
                resp: OffsetForLeaderEpochResponse | None = self._ask(src, msg)
                if resp is None:
                    parts.append({"error_code": _code(3), "partition": tp.partition,
                                  "leader_epoch": -1, "end_offset": -1})
                else:
                    parts.append({"error_code": _code(int(resp.error)), "partition": tp.partition,
                                  "leader_epoch": resp.leader_epoch,
                                  "end_offset": resp.end_offset})
            topics.append({"topic": t.topic, "partitions": parts})
        return self._encode(req, {"throttle_time": _ms(0), "topics": topics})

    # -- topics -----------------------------------------------------------------------------

    async def create_topics(self, req: Request) -> bytes:
        body = request_fields(req)
        timeout_s = max(0.0, body.timeout.total_seconds())
        validate_only = bool(getattr(body, "validate_only", False))
        results = []
        created: dict[str, int] = {}  # name -> partitions
        if self.b.zkd is None or self.b.zk is None or not self.b.cluster_id:
            # still starting (ZooKeeper not reached yet): retriable, as Kafka's answer from a
            # broker that cannot act for the controller
            return self._encode(req, {"throttle_time": _ms(0), "topics": [
                {"name": t.name, "topic_id": topic_id(t.name), "error_code": _code(NOT_CONTROLLER),
                 "error_message": "The broker is starting: try again.",
                 "topic_config_error_code": _code(0), "num_partitions": -1,
                 "replication_factor": -1, "configs": []} for t in body.topics]})
        existing = set(self.topics_view()) | set(await self.b.zk_topics())
        for t in body.topics:
            code, msg, n, rf, assignment, cfg = self._plan_topic(t, existing)
            if code == 0 and not validate_only:
                try:
                    await self.b.create_topic(t.name, assignment, cfg)
                    created[t.name] = n
                    existing.add(t.name)
                except Exception as e:  # NodeExists (a race) or ZooKeeper unavailable
                    code, msg = (TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.") \
                        if "NodeExists" in type(e).__name__ else (7, str(e))
            results.append({"name": t.name, "topic_id": topic_id(t.name), "error_code": _code(code),
                            "error_message": msg, "topic_config_error_code": _code(0),
                            "num_partitions": n if code == 0 else -1,
                            "replication_factor": rf if code == 0 else -1, "configs": []})
        if created:
            await self.b.wait_for_topics(created, timeout_s)
        return self._encode(req, {"throttle_time": _ms(0), "topics": results})

    def _plan_topic(self, t: Any, existing: set[str]) -> tuple[Any, ...]:
        name = t.name
        if not TOPIC_NAME.fullmatch(name) or name in (".", ".."):
            return (INVALID_TOPIC_EXCEPTION, f"Topic name '{name}' is illegal", 0, 0, {}, {})
        if name in existing:
            return (TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.", 0, 0, {}, {})
        cfg = {c.name: c.value for c in t.configs if c.value is not None}
        try:
            self.b.config.topic_log_config(cfg)
        except Exception as e:
            return (INVALID_CONFIG, str(e), 0, 0, {}, {})
        live = sorted(lb.broker_id for lb in self.node.state.live_brokers)
        if t.assignments:
            assignment = {int(a.partition_index): tuple(int(b) for b in a.broker_ids)
                          for a in t.assignments}
            if sorted(assignment) != list(range(len(assignment))) or any(
                    not r or len(set(r)) != len(r) for r in assignment.values()):
                return (INVALID_REPLICA_ASSIGNMENT, "bad replica assignment", 0, 0, {}, {})
            n = len(assignment)
            rf = len(assignment[0])
            return (0, None, n, rf, assignment, cfg)
        n = int(t.num_partitions)
        rf = int(t.replication_factor)
        if n == -1:
            n = self.b.config.num_partitions
        if rf == -1:
            rf = self.b.config.default_replication_factor
        if not 0 < n <= MAX_PARTITIONS_PER_TOPIC:
            return (INVALID_PARTITIONS, f"Number of partitions must be in [1, "
                    f"{MAX_PARTITIONS_PER_TOPIC}], got {n}", 0, 0, {}, {})
        if rf <= 0 or rf > len(live):
            return (INVALID_REPLICATION_FACTOR, f"Replication factor: {rf} larger than "
                    f"available brokers: {len(live)}.", 0, 0, {}, {})
        replicas = assign_replicas(tuple(live), n, rf, *self.b.assignment_seed(len(live)))
        return (0, None, n, rf, dict(enumerate(replicas)), cfg)

    async def delete_topics(self, req: Request) -> bytes:
        body = request_fields(req)
        names = list(body.topic_names) if hasattr(body, "topic_names") and body.topic_names \
            else [t.name for t in getattr(body, "topics", ()) or ()]
        if self.b.zkd is None or self.b.zk is None or not self.b.cluster_id:  # still starting
            return self._encode(req, {"throttle_time": _ms(0), "responses": [
                {"name": name, "topic_id": topic_id(name), "error_code": _code(NOT_CONTROLLER),
                 "error_message": "The broker is starting: try again."} for name in names]})
        results = []
        existing = set(self.topics_view()) | set(await self.b.zk_topics())
        deleted = []
        for name in names:
            if not self.b.config.delete_topic_enable:
                code, msg = TOPIC_DELETION_DISABLED, "Topic deletion is disabled."
            elif name not in existing:
                code, msg = 3, "This server does not host this topic-partition."
            elif name == OFFSETS_TOPIC:
                code, msg = INVALID_TOPIC_EXCEPTION, "Cannot delete an internal topic"
            else:
                try:
                    await self.b.delete_topic(name)
                    code, msg = 0, None
                    deleted.append(name)
                except Exception as e:
                    code, msg = 7, str(e)
            results.append({"name": name, "topic_id": topic_id(name), "error_code": _code(code),
                            "error_message": msg})
        if deleted:
            await self.b.wait_for_topics_gone(deleted, max(0.0, body.timeout.total_seconds()))
        return self._encode(req, {"throttle_time": _ms(0), "responses": results})

    # -- producer ids -----------------------------------------------------------------------

    async def init_producer_id(self, req: Request) -> bytes:
        body = request_fields(req)
        if body.transactional_id is not None:
            code, pid, epoch = TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1
        else:
            old_pid = int(getattr(body, "producer_id", -1))
            old_epoch = int(getattr(body, "producer_epoch", -1))
            if old_pid >= 0 and 0 <= old_epoch < 32766:
                code, pid, epoch = 0, old_pid, old_epoch + 1  # KIP-360 epoch bump
            else:
                try:
                    code, pid, epoch = 0, await self.b.next_producer_id(), 0
                except Exception as e:
                    log.warning("producer id allocation failed: %s", e)
                    code, pid, epoch = COORDINATOR_NOT_AVAILABLE, -1, -1
        return self._encode(req, {"throttle_time": _ms(0), "error_code": _code(code),
                                  "producer_id": pid, "producer_epoch": epoch})


class _ProduceStarted:
    """A Produce handed to the core: its replies to wait for, and the response they make."""

    __slots__ = ("acks", "apis", "futures", "req", "results", "throttle", "timeout_ms")

    def __init__(self, apis: Apis, req: Request, acks: int,
                 results: list[tuple[str, int, Any]], throttle: int, timeout_ms: int) -> None:
        self.apis = apis
        self.req = req
        self.acks = acks
        self.results = results
        self.throttle = throttle
        self.timeout_ms = timeout_ms
        self.futures: list[asyncio.Future[Any]] = [
            r for _, _, r in results if r is not None and not isinstance(r, tuple)]

    def finish(self) -> Response:
        """The response, once every future is done (a reply, or the safety timeout's)."""
        if self.acks == 0:
            return Response(None, self.throttle)
        logs = self.apis.node.logs
        by_topic: dict[str, list[ProducePartitionResult]] = {}
        for topic, partition, r in self.results:
            if isinstance(r, tuple):
                code, base = r
            else:
                reply = r.result()
                code, base = int(reply.error), reply.base_offset
            lg = logs.get_log(topic, partition)
            by_topic.setdefault(topic, []).append(ProducePartitionResult(
                partition, code, base, lg.log_start_offset if lg is not None else -1))
        # by hand (one per produce request: kio's generic writer was a quarter of it)
        frame = encode_produce_response(self.req.api_version, self.req.correlation_id,
                                        list(by_topic.items()), self.throttle)
        return Response(frame, self.throttle)


def _produce_timed_out(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_result(fx.ProduceReply(-1, TopicPartition("", -1), Errors.REQUEST_TIMED_OUT, -1))


def leader_of(node: Any, tp: TopicPartition) -> int:
    for info in node.state.metadata:
        if info.tp == tp:
            return int(info.leader)
    return NO_LEADER


def is_leader(node: Any, tp: TopicPartition) -> bool:
    r = node.replica(tp)
    return r is not None and r.role == Role.LEADER
