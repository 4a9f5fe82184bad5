"""Plugs the group coordinator (`broker.groups`) into the broker.

- Storage: `__consumer_offsets-<p>` through the replication core, like any produce with
  acks=all (`OffsetsTopicLog.append` steps the core synchronously, so appends land in call
  order), and loading reads the partition's own log.
- Leadership: after every control request the broker tells `sync()`, which compares the
  roles of the `__consumer_offsets` replicas with what the coordinator was told last, and
  calls `on_became_leader` / `on_resigned` (Kafka's onLeadershipChange callbacks).
- FindCoordinator: the leader of the group's partition from the metadata cache; the topic is
  created on first use, as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from broker.groups import GroupConfig, GroupCoordinator, find_coordinator_response, handle
from broker.groups import partition_for as group_partition
from broker.store.batch import Record, build_batch, decode_records, iter_headers
from broker.wire import Request, encode_response
from core import events as ev
from core.types import NO_LEADER, Role, TopicPartition

if TYPE_CHECKING:
    from broker.runtime.server import Broker

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
LOAD_CHUNK_BYTES = 1 << 20
COORDINATOR_NOT_AVAILABLE = 15


class OffsetsTopicLog:
    """`broker.groups.ports.OffsetsLog` over this broker's core and store."""

    def __init__(self, broker: Broker) -> None:
        self.b = broker

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> int:
        node = self.b.node
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        now = int(time.time() * 1000)
        batch = build_batch(
            [Record(i, now, k, v) for i, (k, v) in enumerate(records)], base_offset=0)
        rid = node.new_request_id()
        fut = node.replies.expect(rid)
        timeout_ms = self.b.config.offsets_commit_timeout_ms
        node.handle(ev.ProduceReceived(rid, tp, -1, len(records), batch, timeout_ms=timeout_ms))
        try:
            reply = await asyncio.wait_for(fut, timeout_ms / 1000.0 + 5.0)
        except TimeoutError:
            node.replies.forget(rid, fut)
            return 7  # REQUEST_TIMED_OUT
        return int(reply.error)

    def read(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        lg = self.b.node.logs.get_log(OFFSETS_TOPIC, partition)
        if lg is None:
            return
        offset = lg.log_start_offset
        end = lg.log_end_offset
        while offset < end:
            data = lg.read_bytes(offset, LOAD_CHUNK_BYTES, max_offset=end)
            if not data:
                break
            for pos, h in iter_headers(data, validate=True):
                if not h.is_control:
                    for r in decode_records(memoryview(data)[pos:pos + h.size], h):
                        if r.offset >= offset and r.key is not None:
                            yield r.key, r.value
                offset = max(offset, h.next_offset)


class GroupsGlue:
    def __init__(self, broker: Broker) -> None:
        self.b = broker
        cfg = broker.config
        self.n = cfg.offsets_topic_num_partitions
        self.coordinator = GroupCoordinator(
            OffsetsTopicLog(broker),
            config=GroupConfig(
                offsets_topic_num_partitions=self.n,
                group_min_session_timeout_ms=cfg.group_min_session_timeout_ms,
                group_max_session_timeout_ms=cfg.group_max_session_timeout_ms,
                group_initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
                group_max_size=min(cfg.group_max_size, 100_000),
                offset_metadata_max_bytes=cfg.offset_metadata_max_bytes,
            ),
            is_partition_leader=self._leads,
            partition_exists=self._exists,
        )
        self._told: dict[int, int] = {}  # partition -> leader epoch we reported as leader
        self._creating: asyncio.Task[int] | None = None

    def _leads(self, partition: int) -> bool:
        r = self.b.node.replica(TopicPartition(OFFSETS_TOPIC, partition))
        return r is not None and r.role == Role.LEADER

    def _exists(self, topic: str, partition: int) -> bool:
        return any(i.tp == (topic, partition) for i in self.b.node.state.metadata)

    def on_partition_changed(self, partition: int) -> None:
        pass  # data changes need nothing; leadership goes through sync()

    def sync(self) -> None:
        """Report leadership changes of `__consumer_offsets` partitions to the coordinator."""
        now: dict[int, int] = {}
        for r in self.b.node.state.replicas:
            if r.tp.topic == OFFSETS_TOPIC and r.role == Role.LEADER:
                now[r.tp.partition] = r.leader_epoch
        for p, epoch in sorted(self._told.items()):
            if now.get(p) != epoch:
                self.coordinator.on_resigned(p, epoch)
                del self._told[p]
        for p, epoch in sorted(now.items()):
            if p not in self._told:
                self.coordinator.on_became_leader(p, epoch)
                self._told[p] = epoch

    def _coordinator_for(self, group: str) -> tuple[int, str, int] | int:
        p = group_partition(group, self.n)
        tp = TopicPartition(OFFSETS_TOPIC, p)
        info = next((i for i in self.b.node.state.metadata if i.tp == tp), None)
        if info is None:
            if self._creating is None or self._creating.done():
                self._creating = asyncio.get_running_loop().create_task(
                    self.b.auto_create(OFFSETS_TOPIC))
            return COORDINATOR_NOT_AVAILABLE
        if info.leader == NO_LEADER:
            return COORDINATOR_NOT_AVAILABLE
        ep = self.b.endpoints.get(info.leader)
        if ep is None:
            return COORDINATOR_NOT_AVAILABLE
        return info.leader, ep.host, ep.port

    async def handle(self, req: Request, client_host: str) -> bytes:
        if req.api_key == 10:
            body: Any = find_coordinator_response(req.api_version, req.body,
                                                  self._coordinator_for)
        else:
            body = await handle(self.coordinator, req.api_key, req.api_version, req.body,
                                req.header.client_id or "", "/" + client_host)
        return encode_response(req.correlation_id, body)

    async def close(self) -> None:
        await self.coordinator.close()


def make_group_coordinator(broker: Broker) -> GroupsGlue:
    return GroupsGlue(broker)
