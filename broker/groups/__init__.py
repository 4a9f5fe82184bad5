"""Consumer groups: Kafka's classic group coordinator and ``__consumer_offsets`` records.

* ``coordinator.GroupCoordinator``: JoinGroup/SyncGroup/Heartbeat/LeaveGroup and
  OffsetCommit/OffsetFetch semantics, on one asyncio loop; leadership hooks
  ``on_became_leader(p)`` / ``on_resigned(p)`` for ``__consumer_offsets`` partitions.
* ``handlers.handle`` / ``handlers.find_coordinator_response``: the APIs on the wire (kio).
* ``records``: Kafka's exact OffsetCommit/GroupMetadata key and value schemas, the partitioner.
* ``ports``: the ``OffsetsLog`` and ``Clock`` ports (and in-memory/manual implementations).
"""

from __future__ import annotations

from .coordinator import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    GroupView,
    JoinResult,
    LeaveResult,
    OffsetAndMetadata,
    SyncResult,
)
from .handlers import GROUP_APIS, find_coordinator_response, handle
from .ports import Clock, MemoryOffsetsLog, OffsetsLog, RealClock, SimClock
from .records import OFFSETS_TOPIC, partition_for

__all__ = [
    "GROUP_APIS",
    "OFFSETS_TOPIC",
    "Clock",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "GroupView",
    "JoinResult",
    "LeaveResult",
    "MemoryOffsetsLog",
    "OffsetAndMetadata",
    "OffsetsLog",
    "RealClock",
    "SimClock",
    "SyncResult",
    "find_coordinator_response",
    "handle",
    "partition_for",
]
