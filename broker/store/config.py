"""`LogConfig`: Kafka's per-topic log configuration keys, validated.

Field names are Kafka's keys with dots turned into underscores; `from_properties` accepts the dotted
keys (as in `server.properties` / topic configs, with `log.` prefixes for broker defaults).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from broker.store.errors import InvalidConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

CLEANUP_POLICIES = frozenset({"delete", "compact", "compact,delete", "delete,compact"})


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Per-log configuration with Kafka's defaults."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1024 * 1024 + 12
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    min_cleanable_dirty_ratio: float = 0.5
    delete_retention_ms: int = 24 * 60 * 60 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX

    def __post_init__(self) -> None:
        _at_least("segment.bytes", self.segment_bytes, 14, INT_MAX)
        _at_least("segment.ms", self.segment_ms, 1, LONG_MAX)
        _at_least("segment.index.bytes", self.segment_index_bytes, 8, INT_MAX)
        _at_least("index.interval.bytes", self.index_interval_bytes, 0, INT_MAX)
        _at_least("max.message.bytes", self.max_message_bytes, 0, INT_MAX)
        _at_least("retention.ms", self.retention_ms, -1, LONG_MAX)
        _at_least("retention.bytes", self.retention_bytes, -1, LONG_MAX)
        _at_least("delete.retention.ms", self.delete_retention_ms, 0, LONG_MAX)
        _at_least("min.compaction.lag.ms", self.min_compaction_lag_ms, 0, LONG_MAX)
        _at_least("max.compaction.lag.ms", self.max_compaction_lag_ms, 1, LONG_MAX)
        _at_least("flush.messages", self.flush_messages, 1, LONG_MAX)
        _at_least("flush.ms", self.flush_ms, 0, LONG_MAX)
        if self.cleanup_policy not in CLEANUP_POLICIES:
            raise InvalidConfigError(
                f"cleanup.policy={self.cleanup_policy!r} is not one of "
                f"'delete', 'compact', 'compact,delete'"
            )
        ratio = self.min_cleanable_dirty_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0.0 <= ratio <= 1.0:
            raise InvalidConfigError(
                f"min.cleanable.dirty.ratio={ratio!r} must be a number in [0, 1]"
            )
        if self.max_compaction_lag_ms < self.min_compaction_lag_ms:
            raise InvalidConfigError(
                f"max.compaction.lag.ms={self.max_compaction_lag_ms} must be >= "
                f"min.compaction.lag.ms={self.min_compaction_lag_ms}"
            )

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def index_entries_max(self) -> int:
        return self.segment_index_bytes // 8

    def with_changes(self, **changes: object) -> LogConfig:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_properties(cls, props: Mapping[str, str | int | float]) -> LogConfig:
        """Build from Kafka keys: `segment.bytes`, or broker-style `log.segment.bytes`.

        Unknown keys are an error (a typo must not silently fall back to a default)."""
        names = {f.name: f for f in dataclasses.fields(cls)}
        aliases = {
            "log.roll.ms": "segment_ms",
            "log.cleaner.min.cleanable.ratio": "min_cleanable_dirty_ratio",
            "log.cleaner.delete.retention.ms": "delete_retention_ms",
            "log.cleaner.min.compaction.lag.ms": "min_compaction_lag_ms",
            "log.cleaner.max.compaction.lag.ms": "max_compaction_lag_ms",
            "log.flush.interval.messages": "flush_messages",
            "log.flush.interval.ms": "flush_ms",
            "log.index.size.max.bytes": "segment_index_bytes",
            "log.index.interval.bytes": "index_interval_bytes",
            "message.max.bytes": "max_message_bytes",
            "log.retention.bytes": "retention_bytes",
            "log.retention.ms": "retention_ms",
            "log.segment.bytes": "segment_bytes",
            "log.cleanup.policy": "cleanup_policy",
        }
        values: dict[str, object] = {}
        for key, raw in props.items():
            name = aliases.get(key) or key.replace(".", "_")
            if name not in names:
                raise InvalidConfigError(f"unknown log config key {key!r}")
            values[name] = _coerce(key, raw, names[name].type)
        return cls(**values)  # type: ignore[arg-type]


def _coerce(key: str, raw: str | int | float, type_name: object) -> object:
    kind = str(type_name)
    try:
        if kind == "int":
            if isinstance(raw, float):
                raise ValueError("not an integer")
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError as e:
        raise InvalidConfigError(f"{key}={raw!r} is not a valid {kind}: {e}") from None
    return str(raw).strip()


def _at_least(key: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfigError(f"{key}={value!r} must be an integer")
    if not low <= value <= high:
        raise InvalidConfigError(f"{key}={value} must be in [{low}, {high}]")
