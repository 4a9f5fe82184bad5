"""``__consumer_offsets`` records: Kafka's schemas byte for byte, and the Java-hash partitioner."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.groups import records as rec

DATA = Path(__file__).parent / "data"


# --------------------------------------------------------------------------- Java hashCode


# Computed with OpenJDK 17: `s.hashCode()` and `(s.hashCode() & 0x7fffffff) % 50`.
JAVA_HASHES = [
    ("", 0, 0),
    ("a", 97, 47),
    ("hiwater", 930066614, 14),
    ("hello", 99162322, 22),
    ("polygenelubricants", -2147483648, 0),
    ("console-consumer-12345", 158455506, 6),
    ("my-group", -1906497762, 36),
    ("Aa", 2112, 12),
    ("BB", 2112, 12),
    ("grüppe", -1233264812, 36),
    ("😀group", -1231696132, 16),  # a surrogate pair: two UTF-16 code units
    ("jepsen-group-0", 1248805436, 36),
    ("\u0000x", 120, 20),
]


@pytest.mark.parametrize(("s", "java_hash", "partition"), JAVA_HASHES)
def test_java_string_hashcode_golden(s: str, java_hash: int, partition: int) -> None:
    assert rec.java_string_hashcode(s) == java_hash
    assert rec.partition_for(s, 50) == partition


def _definition(s: str) -> int:
    """s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, then wrapped to int32."""
    units = [
        int.from_bytes(s.encode("utf-16-be", "surrogatepass")[i : i + 2], "big")
        for i in range(0, len(s.encode("utf-16-be", "surrogatepass")), 2)
    ]
    n = len(units)
    total = sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units))
    total %= 2**32
    return total - 2**32 if total >= 2**31 else total


@given(st.text(max_size=40))
@settings(max_examples=300)
def test_java_string_hashcode_matches_definition(s: str) -> None:
    h = rec.java_string_hashcode(s)
    assert h == _definition(s)
    assert -(2**31) <= h < 2**31
    p = rec.partition_for(s, 7)
    assert p == (h & 0x7FFFFFFF) % 7 and 0 <= p < 7


def test_kafka_abs_is_not_math_abs() -> None:
    assert rec.kafka_abs(-(2**31)) == 0  # Math.abs would stay negative
    assert rec.kafka_abs(-1) == 2**31 - 1
    assert rec.kafka_abs(5) == 5
    with pytest.raises(ValueError):
        rec.partition_for("g", 0)


# --------------------------------------------------------------------------- golden bytes


def test_offset_commit_key_golden_bytes() -> None:
    raw = rec.encode_offset_commit_key("grp", "topic", 7)
    assert raw == bytes.fromhex("000100036772700005746f70696300000007")
    assert rec.decode_key(raw) == rec.OffsetCommitKey("grp", "topic", 7)
    # v0 keys (Kafka < 0.10.1) have the same fields
    assert rec.decode_key(b"\x00\x00" + raw[2:]) == rec.OffsetCommitKey("grp", "topic", 7)


def test_offset_commit_value_v3_golden_bytes() -> None:
    value = rec.OffsetCommitValue(
        offset=1800, metadata="m", commit_timestamp=1_700_000_000_123, leader_epoch=5
    )
    raw = rec.encode_offset_commit_value(value)
    assert raw == bytes.fromhex(
        "0003"  # version
        "0000000000000708"  # offset 1800
        "00000005"  # leaderEpoch
        "0001" "6d"  # metadata "m"
        "0000018bcfe5687b"  # commitTimestamp
    )  # fmt: skip
    assert rec.decode_offset_commit_value(raw) == value


def test_offset_commit_value_v1_golden_bytes_when_expiring() -> None:
    value = rec.OffsetCommitValue(
        offset=3, metadata="", commit_timestamp=10, leader_epoch=-1, expire_timestamp=20
    )
    raw = rec.encode_offset_commit_value(value)
    assert raw == bytes.fromhex(
        "0001" "0000000000000003" "0000" "000000000000000a" "0000000000000014"
    )  # fmt: skip
    assert rec.decode_offset_commit_value(raw) == value


def test_group_metadata_key_and_value_golden_bytes() -> None:
    assert rec.encode_group_metadata_key("g") == bytes.fromhex("0002000167")
    value = rec.GroupMetadataValue(
        protocol_type="consumer",
        generation=2,
        protocol="range",
        leader="c-1",
        current_state_timestamp=1,
        members=(
            rec.MemberMetadataValue(
                member_id="c-1",
                client_id="c",
                client_host="/127.0.0.1",
                session_timeout=10_000,
                rebalance_timeout=30_000,
                subscription=b"\x01",
                assignment=b"",
            ),
        ),
    )
    raw = rec.encode_group_metadata_value(value)
    assert raw == bytes.fromhex(
        "0003"
        "0008" + b"consumer".hex() + "00000002"
        "0005" + b"range".hex() + "0003" + b"c-1".hex() + "0000000000000001"
        "00000001"  # one member
        "0003" + b"c-1".hex() + "ffff"  # groupInstanceId null
        "0001" + b"c".hex() + "000a" + b"/127.0.0.1".hex()
        + "00007530" "00002710"  # rebalanceTimeout, sessionTimeout
        "00000001" "01" "00000000"  # subscription, assignment
    )  # fmt: skip
    assert rec.decode_group_metadata_value(raw) == value
    assert rec.decode_key(rec.encode_group_metadata_key("g")) == rec.GroupMetadataKey("g")


# --------------------------------------------------------------------------- Kafka's JSON schemas


def _schema(name: str) -> dict[str, Any]:
    text = (DATA / f"{name}.json").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))  # type: ignore[no-any-return]


def _in(spec: str | None, v: int) -> bool:
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return v >= int(spec[:-1])
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo) <= v <= int(hi)
    return v == int(spec)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _encode_struct(fields: list[dict[str, Any]], data: dict[str, Any], v: int, flex: bool) -> bytes:
    """A generic writer of Kafka's message JSON (the subset these four schemas use)."""
    out = b""
    for f in fields:
        if not _in(f["versions"], v) or "taggedVersions" in f:
            continue
        value = data[f["name"]]
        t = f["type"]
        nullable = _in(f.get("nullableVersions"), v)
        if t == "int16":
            out += struct.pack(">h", value)
        elif t == "int32":
            out += struct.pack(">i", value)
        elif t == "int64":
            out += struct.pack(">q", value)
        elif t in ("string", "bytes"):
            if value is None:
                assert nullable, f["name"]
                out += _uvarint(0) if flex else (b"\xff\xff" if t == "string" else b"\xff" * 4)
                continue
            raw = value.encode() if t == "string" else value
            if flex:
                out += _uvarint(len(raw) + 1)
            else:
                out += struct.pack(">h" if t == "string" else ">i", len(raw))
            out += raw
        elif t.startswith("[]"):
            items = value
            out += _uvarint(len(items) + 1) if flex else struct.pack(">i", len(items))
            for item in items:
                out += _encode_struct(f["fields"], item, v, flex)
        else:  # pragma: no cover - not in these schemas
            raise AssertionError(t)
    if flex:
        out += _uvarint(0)
    return out


def _encode_with_schema(name: str, data: dict[str, Any], v: int) -> bytes:
    schema = _schema(name)
    assert _in(schema["validVersions"], v)
    fields = schema["fields"]
    for f in fields:  # resolve commonStructs
        if f["type"].startswith("[]") and "fields" not in f:
            common = {s["name"]: s for s in schema.get("commonStructs", [])}
            f["fields"] = common[f["type"][2:]]["fields"]
    flex = _in(schema["flexibleVersions"], v)
    return struct.pack(">h", v) + _encode_struct(fields, data, v, flex)


SAMPLE_MEMBERS = (
    rec.MemberMetadataValue(
        member_id="rdkafka-1f2e",
        client_id="rdkafka",
        client_host="/10.0.0.1",
        session_timeout=45_000,
        rebalance_timeout=300_000,
        subscription=b"\x00\x01sub",
        assignment=b"\x00\x02asg",
        group_instance_id=None,
    ),
    rec.MemberMetadataValue(
        member_id="kp-2",
        client_id="kafka-python",
        client_host="/127.0.0.1",
        session_timeout=10_000,
        rebalance_timeout=10_000,
        subscription=b"",
        assignment=b"",
        group_instance_id="inst-2",
    ),
)


def _member_json(m: rec.MemberMetadataValue) -> dict[str, Any]:
    return {
        "memberId": m.member_id,
        "groupInstanceId": m.group_instance_id,
        "clientId": m.client_id,
        "clientHost": m.client_host,
        "rebalanceTimeout": m.rebalance_timeout,
        "sessionTimeout": m.session_timeout,
        "subscription": m.subscription,
        "assignment": m.assignment,
    }


def test_keys_match_kafka_schema() -> None:
    for v in (0, 1):
        want = _encode_with_schema(
            "OffsetCommitKey", {"group": "grp", "topic": "tópico", "partition": 2**31 - 1}, v
        )
        if v == rec.OFFSET_COMMIT_KEY_VERSION:
            assert rec.encode_offset_commit_key("grp", "tópico", 2**31 - 1) == want
        assert rec.decode_key(want) == rec.OffsetCommitKey("grp", "tópico", 2**31 - 1)
    want = _encode_with_schema("GroupMetadataKey", {"group": "grüppe"}, 2)
    assert rec.encode_group_metadata_key("grüppe") == want
    assert rec.decode_key(want) == rec.GroupMetadataKey("grüppe")


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_commit_value_matches_kafka_schema(version: int) -> None:
    value = rec.OffsetCommitValue(
        offset=123456789012,
        metadata="ünïcode meta",
        commit_timestamp=1_700_000_000_000,
        leader_epoch=7 if version >= 3 else -1,
        expire_timestamp=1_700_086_400_000 if version == 1 else -1,
    )
    want = _encode_with_schema(
        "OffsetCommitValue",
        {
            "offset": value.offset,
            "leaderEpoch": value.leader_epoch,
            "metadata": value.metadata,
            "commitTimestamp": value.commit_timestamp,
            "expireTimestamp": value.expire_timestamp,
        },
        version,
    )
    assert rec.encode_offset_commit_value(value, version) == want
    assert rec.decode_offset_commit_value(want) == value
    if version in (1, 3):  # what the broker writes by default
        assert rec.encode_offset_commit_value(value) == want


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("empty", [False, True])
def test_group_metadata_value_matches_kafka_schema(version: int, empty: bool) -> None:
    members = () if empty else SAMPLE_MEMBERS
    value = rec.GroupMetadataValue(
        protocol_type="consumer",
        generation=42,
        protocol=None if empty else "range",
        leader=None if empty else "rdkafka-1f2e",
        members=members,
        current_state_timestamp=1_700_000_000_000 if version >= 2 else -1,
    )
    want = _encode_with_schema(
        "GroupMetadataValue",
        {
            "protocolType": value.protocol_type,
            "generation": value.generation,
            "protocol": value.protocol,
            "leader": value.leader,
            "currentStateTimestamp": value.current_state_timestamp,
            "members": [_member_json(m) for m in members],
        },
        version,
    )
    assert rec.encode_group_metadata_value(value, version) == want
    decoded = rec.decode_group_metadata_value(want)
    # Fields a version lacks come back as their defaults (v0: rebalance = session timeout).
    expected_members = tuple(
        rec.MemberMetadataValue(
            member_id=m.member_id,
            client_id=m.client_id,
            client_host=m.client_host,
            session_timeout=m.session_timeout,
            subscription=m.subscription,
            assignment=m.assignment,
            rebalance_timeout=m.rebalance_timeout if version >= 1 else m.session_timeout,
            group_instance_id=m.group_instance_id if version >= 3 else None,
        )
        for m in members
    )
    assert decoded == rec.GroupMetadataValue(
        protocol_type=value.protocol_type,
        generation=value.generation,
        protocol=value.protocol,
        leader=value.leader,
        members=expected_members,
        current_state_timestamp=value.current_state_timestamp,
    )


# --------------------------------------------------------------------------- round trips


_text = st.text(max_size=30)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)


@given(_text, _text, _i32)
def test_offset_key_round_trip(group: str, topic: str, partition: int) -> None:
    key = rec.OffsetCommitKey(group, topic, partition)
    assert rec.decode_key(rec.encode_key(key)) == key


@given(
    st.builds(
        rec.OffsetCommitValue,
        offset=_i64,
        metadata=_text,
        commit_timestamp=_i64,
        leader_epoch=_i32,
        expire_timestamp=_i64,
    ),
    st.sampled_from([0, 1, 2, 3, 4]),
)
def test_offset_value_round_trip(value: rec.OffsetCommitValue, version: int) -> None:
    got = rec.decode_offset_commit_value(rec.encode_offset_commit_value(value, version))
    assert got.offset == value.offset and got.metadata == value.metadata
    assert got.commit_timestamp == value.commit_timestamp
    assert got.leader_epoch == (value.leader_epoch if version >= 3 else -1)
    assert got.expire_timestamp == (value.expire_timestamp if version == 1 else -1)


_members = st.lists(
    st.builds(
        rec.MemberMetadataValue,
        member_id=_text,
        client_id=_text,
        client_host=_text,
        session_timeout=_i32,
        subscription=st.binary(max_size=40),
        assignment=st.binary(max_size=40),
        rebalance_timeout=_i32,
        group_instance_id=st.none() | _text,
    ),
    max_size=4,
).map(tuple)


@given(
    st.builds(
        rec.GroupMetadataValue,
        protocol_type=_text,
        generation=_i32,
        protocol=st.none() | _text,
        leader=st.none() | _text,
        members=_members,
        current_state_timestamp=_i64,
    )
)
@settings(max_examples=200)
def test_group_value_round_trip_v3_and_v4(value: rec.GroupMetadataValue) -> None:
    for version in (3, 4):
        assert rec.decode_group_metadata_value(rec.encode_group_metadata_value(value, version)) == (
            value
        )


# --------------------------------------------------------------------------- malformed


def test_unknown_and_malformed() -> None:
    assert rec.decode_key(b"\x00\x07anything") == rec.UnknownKey(7)
    with pytest.raises(rec.RecordError):
        rec.decode_key(b"\x00")
    with pytest.raises(rec.RecordError):
        rec.decode_key(b"\x00\x01\x00\x05ab")  # string longer than the buffer
    with pytest.raises(rec.RecordError):
        rec.decode_offset_commit_value(b"\x00\x09" + b"\x00" * 30)  # unknown version
    with pytest.raises(rec.RecordError):
        rec.decode_offset_commit_value(None)  # type: ignore[arg-type]
    with pytest.raises(rec.RecordError):
        rec.decode_group_metadata_value(b"\x00\x03\x00\x01c\x00\x00\x00\x01\xff\xff\xff\xff")
    raw = rec.encode_group_metadata_value(
        rec.GroupMetadataValue(protocol_type="c", generation=1, protocol=None, leader=None)
    )
    with pytest.raises(rec.RecordError):
        rec.decode_group_metadata_value(raw[:-1])
    # A huge array count is refused before any allocation.
    with pytest.raises(rec.RecordError):
        rec.decode_group_metadata_value(raw[:-4] + b"\x7f\xff\xff\xff")
    # Trailing bytes are ignored, as Kafka's generated readers do.
    assert rec.decode_group_metadata_value(raw + b"junk").generation == 1
    with pytest.raises(rec.RecordError):
        rec.encode_offset_commit_key("g", "t" * 40_000, 0)
