"""``__consumer_offsets`` records: Kafka's exact key/value binary schemas, and the partitioner.

Every record of the compacted topic ``__consumer_offsets`` is a version-prefixed key and a
version-prefixed value (``MessageUtil.toVersionPrefixedBytes``: an int16 schema version, then the
struct).  The schemas are Kafka's message JSON files
(``group-coordinator/src/main/resources/common/message/``, formerly ``core/src/main/resources``):

=================  ========  ====================================================================
key                version   value
=================  ========  ====================================================================
OffsetCommitKey    0, 1      OffsetCommitValue v0-v4: offset int64, [v3+ leaderEpoch int32],
 group, topic,               metadata string, commitTimestamp int64, [v1 expireTimestamp int64]
 partition                   (v4 is flexible: compact strings + tagged fields)
GroupMetadataKey   2         GroupMetadataValue v0-v4: protocolType, generation, protocol?,
 group                       leader?, [v2+ currentStateTimestamp], members[memberId,
                             [v3+ groupInstanceId?], clientId, clientHost, [v1+ rebalanceTimeout],
                             sessionTimeout, subscription bytes, assignment bytes] (v4 flexible)
=================  ========  ====================================================================

A ``None`` value is a tombstone: it deletes the key (offset or group) when the log is loaded and,
eventually, by compaction.

What this module writes is what Kafka 2.1+ writes (``GroupMetadataManager.offsetCommitValue`` /
``groupMetadataValue``): OffsetCommitKey v1, OffsetCommitValue v3 (v1 when the commit carries an
expire timestamp, i.e. an OffsetCommit v2-v4 with an explicit ``retention_time``),
GroupMetadataKey v2, GroupMetadataValue v3.  It reads every version Kafka defines.  As Kafka's
generated readers do, decoding ignores bytes after the struct; a truncated or malformed struct
raises ``RecordError``.

The partition of a group is Kafka's ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``
with Java's ``String.hashCode`` over UTF-16 code units (``partition_for``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSETS_TOPIC",
    "OFFSET_COMMIT_KEY_VERSION",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadataValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "RecordError",
    "UnknownKey",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_key",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
    "java_string_hashcode",
    "kafka_abs",
    "offset_commit_value_version",
    "partition_for",
]

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_COMMIT_KEY_VERSION = 1  # OffsetCommitKey.HIGHEST_SUPPORTED_VERSION
GROUP_METADATA_KEY_VERSION = 2  # GroupMetadataKey's only version
GROUP_METADATA_VALUE_VERSION = 3  # highest non-flexible: what Kafka 2.3+ writes
_OFFSET_COMMIT_VALUE_VERSIONS = range(0, 5)
_GROUP_METADATA_VALUE_VERSIONS = range(0, 5)
_FLEXIBLE_FROM = 4  # both value schemas: "flexibleVersions": "4+"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordError(ValueError):
    """A ``__consumer_offsets`` key or value that does not parse (or cannot be encoded)."""


# --------------------------------------------------------------------------- partitioner


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units,
    in int32 arithmetic (so a result in [-2**31, 2**31))."""
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``n & 0x7fffffff`` (maps Integer.MIN_VALUE to 0, unlike Math.abs)."""
    return n & 0x7FFFFFFF


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` (Kafka's ``partitionFor``)."""
    if num_partitions <= 0:
        raise ValueError(f"offsets.topic.num.partitions must be positive, got {num_partitions}")
    return kafka_abs(java_string_hashcode(group_id)) % num_partitions


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key whose version is neither an offset key (0-1) nor a group key (2): skipped on load."""

    version: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """Schema field names; timestamps are milliseconds since the epoch, -1 when absent."""

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    """``GroupMetadataValue.MemberMetadata``; timeouts in milliseconds."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadataValue, ...] = ()
    current_state_timestamp: int = -1


# --------------------------------------------------------------------------- writer


class _Writer:
    __slots__ = ("buf", "flexible")

    def __init__(self, version: int, flexible: bool) -> None:
        self.buf = bytearray(_I16.pack(version))
        self.flexible = flexible

    def i32(self, v: int) -> None:
        try:
            self.buf += _I32.pack(v)
        except struct.error:
            raise RecordError(f"{v} does not fit int32") from None

    def i64(self, v: int) -> None:
        try:
            self.buf += _I64.pack(v)
        except struct.error:
            raise RecordError(f"{v} does not fit int64") from None

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def string(self, s: str | None) -> None:
        if s is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.buf += _I16.pack(-1)
            return
        raw = s.encode("utf-8")
        if self.flexible:
            self.uvarint(len(raw) + 1)
        else:
            if len(raw) > 0x7FFF:
                raise RecordError(f"string of {len(raw)} bytes is longer than 32767")
            self.buf += _I16.pack(len(raw))
        self.buf += raw

    def bytes_(self, b: bytes) -> None:
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.i32(len(b))
        self.buf += b

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.i32(n)

    def tags(self) -> None:
        if self.flexible:
            self.uvarint(0)  # no tagged fields


# --------------------------------------------------------------------------- reader


class _Reader:
    __slots__ = ("data", "flexible", "pos")

    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos
        self.flexible = False

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise RecordError(f"truncated: need {n} bytes at {self.pos}, have {len(self.data)}")
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def i16(self) -> int:
        v: int = _I16.unpack(self._take(2))[0]
        return v

    def i32(self) -> int:
        v: int = _I32.unpack(self._take(4))[0]
        return v

    def i64(self) -> int:
        v: int = _I64.unpack(self._take(8))[0]
        return v

    def uvarint(self) -> int:
        shift = 0
        v = 0
        for _ in range(5):
            (b,) = self._take(1)
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7
        raise RecordError("unsigned varint longer than 5 bytes")

    def _length(self, nullable: bool, what: str) -> int:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < -1 or (n == -1 and not nullable):
            raise RecordError(f"bad {what} length {n}")
        return n

    def nullable_string(self) -> str | None:
        n = self._length(True, "string")
        if n == -1:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordError(f"string is not UTF-8: {e}") from None

    def string(self) -> str:
        n = self._length(False, "string")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordError(f"string is not UTF-8: {e}") from None

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            raise RecordError(f"bad bytes length {n}")
        return bytes(self._take(n))

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            raise RecordError(f"bad array length {n}")
        if n > len(self.data) - self.pos:  # every element takes at least one byte
            raise RecordError(f"array of {n} elements cannot fit in the remaining bytes")
        return n

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())


def _reader(data: bytes | None, what: str) -> tuple[_Reader, int]:
    if data is None:
        raise RecordError(f"{what}: a tombstone has no value to decode")
    r = _Reader(bytes(data), 0)
    return r, r.i16()


# --------------------------------------------------------------------------- keys


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """OffsetCommitKey v1 (group, topic, partition), version-prefixed."""
    w = _Writer(OFFSET_COMMIT_KEY_VERSION, flexible=False)
    w.string(group)
    w.string(topic)
    w.i32(partition)
    return bytes(w.buf)


def encode_group_metadata_key(group: str) -> bytes:
    """GroupMetadataKey v2 (group), version-prefixed."""
    w = _Writer(GROUP_METADATA_KEY_VERSION, flexible=False)
    w.string(group)
    return bytes(w.buf)


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return encode_offset_commit_key(key.group, key.topic, key.partition)
    return encode_group_metadata_key(key.group)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    """``GroupMetadataManager.readMessageKey``: the key's version says which schema it is."""
    r, version = _reader(data, "key")
    if version in (0, 1):
        group = r.string()
        topic = r.string()
        return OffsetCommitKey(group, topic, r.i32())
    if version == 2:
        return GroupMetadataKey(r.string())
    return UnknownKey(version)


# --------------------------------------------------------------------------- offset values


def offset_commit_value_version(value: OffsetCommitValue) -> int:
    """Kafka 2.1+: v1 when an expire timestamp is present, else v3."""
    return 1 if value.expire_timestamp != -1 else 3


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    """OffsetCommitValue at ``version`` (default: what Kafka writes), version-prefixed.

    Fields a version lacks are dropped (leader epoch below v3, expire timestamp outside v1).
    """
    v = offset_commit_value_version(value) if version is None else version
    if v not in _OFFSET_COMMIT_VALUE_VERSIONS:
        raise RecordError(f"unknown OffsetCommitValue version {v}")
    w = _Writer(v, flexible=v >= _FLEXIBLE_FROM)
    w.i64(value.offset)
    if v >= 3:
        w.i32(value.leader_epoch)
    w.string(value.metadata)
    w.i64(value.commit_timestamp)
    if v == 1:
        w.i64(value.expire_timestamp)
    w.tags()
    return bytes(w.buf)


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r, v = _reader(data, "OffsetCommitValue")
    if v not in _OFFSET_COMMIT_VALUE_VERSIONS:
        raise RecordError(f"unknown offset message version {v}")
    r.flexible = v >= _FLEXIBLE_FROM
    offset = r.i64()
    leader_epoch = r.i32() if v >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.i64()
    expire_timestamp = r.i64() if v == 1 else -1
    r.skip_tags()
    return OffsetCommitValue(
        offset=offset,
        metadata=metadata,
        commit_timestamp=commit_timestamp,
        leader_epoch=leader_epoch,
        expire_timestamp=expire_timestamp,
    )


# --------------------------------------------------------------------------- group values


def encode_group_metadata_value(
    value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    """GroupMetadataValue at ``version`` (default v3, what Kafka writes), version-prefixed."""
    if version not in _GROUP_METADATA_VALUE_VERSIONS:
        raise RecordError(f"unknown GroupMetadataValue version {version}")
    w = _Writer(version, flexible=version >= _FLEXIBLE_FROM)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    if version >= 2:
        w.i64(value.current_state_timestamp)
    w.array_len(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return bytes(w.buf)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    """``readGroupMessageValue``'s parsing; v0 members take the session timeout as their
    rebalance timeout (v0 had none), as Kafka does when it loads them."""
    r, v = _reader(data, "GroupMetadataValue")
    if v not in _GROUP_METADATA_VALUE_VERSIONS:
        raise RecordError(f"unknown group metadata message version {v}")
    r.flexible = v >= _FLEXIBLE_FROM
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    current_state_timestamp = r.i64() if v >= 2 else -1
    members: list[MemberMetadataValue] = []
    for _ in range(r.array_len()):
        member_id = r.string()
        group_instance_id = r.nullable_string() if v >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if v >= 1 else None
        session_timeout = r.i32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tags()
        members.append(
            MemberMetadataValue(
                member_id=member_id,
                client_id=client_id,
                client_host=client_host,
                session_timeout=session_timeout,
                subscription=subscription,
                assignment=assignment,
                rebalance_timeout=session_timeout
                if rebalance_timeout is None
                else rebalance_timeout,
                group_instance_id=group_instance_id,
            )
        )
    r.skip_tags()
    return GroupMetadataValue(
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        members=tuple(members),
        current_state_timestamp=current_state_timestamp,
    )
