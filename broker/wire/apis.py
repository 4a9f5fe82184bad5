"""The ApiVersions table as data, and the header-version rules derived from it.

The table is the one validated end-to-end against kafka-python 3.0.12, aiokafka 0.14.0,
confluent-kafka 2.16.1 and kcat 1.7.1 (reference/kafka-protocol.md §2.4), plus DeleteTopics and
the admin APIs DescribeGroups, ListGroups and DescribeConfigs.

* ``min_version``/``max_version`` are what the broker *advertises*.
* ``min_served`` is the lowest version it actually decodes.  Produce is advertised from v0
  (librdkafka < 2.11.1 only compresses when Produce v0 is in the range, KAFKA-18659) but only
  v3+ is served; a request below ``min_served`` closes the connection, as Kafka 4 does.
* ``flexible_from`` is the first flexible (compact + tagged fields) version of the API, taken
  from Kafka's message JSON files.  Flexible requests use request header v2, flexible responses
  response header v1 — except ApiVersions, whose response header is always v0 (KIP-511).

The inter-broker APIs of the ZooKeeper era (LeaderAndIsr 4, StopReplica 5, UpdateMetadata 6,
ControlledShutdown 7) are absent: kio 0.6.5 is generated from Kafka 4.x, which removed them, so
there is no codec for them here.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "API_TABLE",
    "ApiKey",
    "ApiSupport",
    "ApiTable",
    "request_header_version",
    "response_header_version",
]


class ApiKey(enum.IntEnum):
    """Kafka API keys the broker speaks (Kafka's names, from ``ApiKeys.java``)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_CONFIGS = 32


@dataclass(frozen=True, slots=True)
class ApiSupport:
    """One row of the ApiVersions table."""

    api_key: ApiKey
    min_version: int
    max_version: int
    flexible_from: int
    min_served: int = -1  # -1: same as min_version

    def __post_init__(self) -> None:
        if self.min_served == -1:
            object.__setattr__(self, "min_served", self.min_version)
        if not 0 <= self.min_version <= self.min_served <= self.max_version:
            raise ValueError(f"inconsistent version range {self!r}")

    @property
    def name(self) -> str:
        return self.api_key.name

    def advertises(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def serves(self, version: int) -> bool:
        return self.min_served <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return version >= self.flexible_from


@dataclass(frozen=True, slots=True)
class ApiTable:
    """An immutable ApiVersions table, keyed by API key."""

    entries: tuple[ApiSupport, ...]
    _by_key: Mapping[int, ApiSupport] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_key = {int(e.api_key): e for e in self.entries}
        if len(by_key) != len(self.entries):
            raise ValueError("duplicate API key in table")
        if int(ApiKey.API_VERSIONS) not in by_key:
            raise ValueError("an ApiVersions table must contain ApiVersions")
        object.__setattr__(self, "_by_key", MappingProxyType(by_key))

    def get(self, api_key: int) -> ApiSupport | None:
        return self._by_key.get(api_key)

    def __getitem__(self, api_key: int) -> ApiSupport:
        return self._by_key[api_key]

    def __contains__(self, api_key: object) -> bool:
        return api_key in self._by_key

    def __iter__(self) -> Iterator[ApiSupport]:
        return iter(sorted(self.entries, key=lambda e: int(e.api_key)))

    def __len__(self) -> int:
        return len(self.entries)

    def with_range(self, api_key: int, min_version: int, max_version: int) -> ApiTable:
        """A copy with one API's advertised range replaced (e.g. to cap ApiVersions at 2)."""
        old = self._by_key[api_key]
        new = ApiSupport(
            api_key=old.api_key,
            min_version=min_version,
            max_version=max_version,
            flexible_from=old.flexible_from,
            min_served=max(min_version, min(old.min_served, max_version)),
        )
        return ApiTable(tuple(new if e.api_key == old.api_key else e for e in self.entries))


API_TABLE = ApiTable(
    (
        ApiSupport(ApiKey.PRODUCE, 0, 9, flexible_from=9, min_served=3),
        ApiSupport(ApiKey.FETCH, 4, 12, flexible_from=12),
        ApiSupport(ApiKey.LIST_OFFSETS, 1, 7, flexible_from=6),
        ApiSupport(ApiKey.METADATA, 0, 12, flexible_from=9),
        ApiSupport(ApiKey.OFFSET_COMMIT, 2, 8, flexible_from=8),
        ApiSupport(ApiKey.OFFSET_FETCH, 1, 7, flexible_from=6),
        ApiSupport(ApiKey.FIND_COORDINATOR, 0, 3, flexible_from=3),
        ApiSupport(ApiKey.JOIN_GROUP, 0, 7, flexible_from=6),
        ApiSupport(ApiKey.HEARTBEAT, 0, 4, flexible_from=4),
        ApiSupport(ApiKey.LEAVE_GROUP, 0, 4, flexible_from=4),
        ApiSupport(ApiKey.SYNC_GROUP, 0, 5, flexible_from=4),
        ApiSupport(ApiKey.DESCRIBE_GROUPS, 0, 6, flexible_from=5),
        ApiSupport(ApiKey.LIST_GROUPS, 0, 5, flexible_from=3),
        ApiSupport(ApiKey.API_VERSIONS, 0, 4, flexible_from=3),
        ApiSupport(ApiKey.CREATE_TOPICS, 2, 7, flexible_from=5),
        ApiSupport(ApiKey.DELETE_TOPICS, 1, 5, flexible_from=4),
        ApiSupport(ApiKey.INIT_PRODUCER_ID, 0, 4, flexible_from=2),
        ApiSupport(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, flexible_from=4),
        ApiSupport(ApiKey.DESCRIBE_CONFIGS, 1, 4, flexible_from=4),
    )
)
"""The table the broker advertises (reference/kafka-protocol.md §2.4, plus DeleteTopics 1–5 and
the admin APIs DescribeGroups 0–6, ListGroups 0–5 and DescribeConfigs 1–4: kio 0.6.5's full
ranges, which are also Kafka 4's; kafka-python 3 sends their maxima, librdkafka lower ones).

Maxima stop before shape changes the broker does not implement: Produce 13 / Fetch 13+ (topic
IDs), FindCoordinator 4+ (batched keys), OffsetFetch 8+ (multi-group), JoinGroup 8+ and
OffsetCommit 9+ (KIP-848), DeleteTopics 6+ (topic IDs)."""


def request_header_version(support: ApiSupport, version: int) -> int:
    """Request header version for ``version`` of an API (v2 if flexible, else v1).

    Header v0 (no client id) only ever applied to ControlledShutdown v0, which is not served.
    """
    return 2 if support.is_flexible(version) else 1


def response_header_version(support: ApiSupport, version: int) -> int:
    """Response header version: v1 if flexible, else v0; ApiVersions is always v0 (KIP-511)."""
    if support.api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if support.is_flexible(version) else 0
