"""The hand-written ZooKeeper-era inter-broker codec (LeaderAndIsr v2, StopReplica v1,
UpdateMetadata v5, ControlledShutdown v2): golden bytes laid out from Kafka's message JSON
field order, Hypothesis round trips, and garbage that must give ``Close``, never an exception.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.wire import API_TABLE, FrameDecoder
from broker.wire.interbroker import (
    INTERBROKER_APIS,
    Endpoint,
    InterbrokerApiKey,
    InterbrokerRequest,
    InterbrokerResponse,
    PartitionError,
    decode_interbroker_request,
    decode_interbroker_response,
    encode_controlled_shutdown,
    encode_controlled_shutdown_response,
    encode_interbroker_response,
    encode_leader_and_isr,
    encode_stop_replica,
    encode_update_metadata,
    is_interbroker,
)
from broker.wire.request import Close, CloseCode, decode_request
from broker.wire.response import EncodeError, ResponseDecodeError
from core.messages import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from core.types import NO_BROKER_EPOCH, Errors, LiveBroker, PartitionInfo, TopicPartition

pytestmark = pytest.mark.timeout(120)

LAI = InterbrokerApiKey.LEADER_AND_ISR
SR = InterbrokerApiKey.STOP_REPLICA
UM = InterbrokerApiKey.UPDATE_METADATA
CS = InterbrokerApiKey.CONTROLLED_SHUTDOWN

FUZZ = settings(
    max_examples=300,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ---------------------------------------------------------------------------------------
# hand layout helpers (independent of the module under test)


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s(v: str | None) -> bytes:
    if v is None:
        return i16(-1)
    raw = v.encode()
    return i16(len(raw)) + raw


def arr(*xs: int) -> bytes:
    return i32(len(xs)) + b"".join(i32(x) for x in xs)


def framed(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


def header(api_key: int, version: int, correlation_id: int, client_id: str | None) -> bytes:
    return i16(api_key) + i16(version) + i32(correlation_id) + s(client_id)


def decode_ok(frame: bytes) -> InterbrokerRequest:
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    got = decode_interbroker_request(frame[4:])
    assert isinstance(got, InterbrokerRequest), got
    return got


# ---------------------------------------------------------------------------------------
# the table


def test_served_versions() -> None:
    assert dict(INTERBROKER_APIS) == {4: 2, 5: 1, 6: 5, 7: 2}
    for key in (4, 5, 6, 7):
        assert is_interbroker(key)
        assert API_TABLE.get(key) is None  # never advertised to clients
    for key in (0, 1, 3, 8, 18, -1, 1000):
        assert not is_interbroker(key)


def test_the_client_decoder_refuses_them() -> None:
    msg = ControlledShutdownRequest(1, 5)
    got = decode_request(encode_controlled_shutdown(msg, 1)[4:])
    assert isinstance(got, Close)
    assert got.code == CloseCode.UNKNOWN_API_KEY


# ---------------------------------------------------------------------------------------
# golden bytes, laid out field by field from the JSON schemas


GOLDEN_LAI = LeaderAndIsrRequest(
    controller_id=1,
    controller_epoch=3,
    broker_epoch=0x1_0000_0002,
    partitions=(
        PartitionInfo(TopicPartition("t", 0), 1, 5, (1, 2), 7, (1, 2, 3)),
        PartitionInfo(TopicPartition("t", 1), 2, 4, (2,), 6, (2, 3)),
        PartitionInfo(TopicPartition("uu", 0), 3, 0, (3,), 0, (3,)),
    ),
)
GOLDEN_LEADERS = (Endpoint(1, "h1", 9092), Endpoint(2, "host-2", 9093), Endpoint(3, "h3", 1))


def lai_partition(
    index: int, ce: int, leader: int, le: int, isr: Sequence[int], zkv: int, reps: Sequence[int]
) -> bytes:
    # LeaderAndIsrPartitionState v2: PartitionIndex, ControllerEpoch, Leader, LeaderEpoch, Isr,
    # PartitionEpoch (zkVersion), Replicas, IsNew (v1+); no TopicName (v0-1), no Adding/Removing
    # (v3+).
    return (
        i32(index) + i32(ce) + i32(leader) + i32(le) + arr(*isr) + i32(zkv) + arr(*reps) + i8(0)
    )


def test_golden_leader_and_isr_v2() -> None:
    expected = framed(
        header(4, 2, 42, "ctl")
        + i32(1)  # ControllerId
        + i32(3)  # ControllerEpoch
        + i64(0x1_0000_0002)  # BrokerEpoch
        + i32(2)  # TopicStates
        + s("t")
        + i32(2)
        + lai_partition(0, 3, 1, 5, (1, 2), 7, (1, 2, 3))
        + lai_partition(1, 3, 2, 4, (2,), 6, (2, 3))
        + s("uu")
        + i32(1)
        + lai_partition(0, 3, 3, 0, (3,), 0, (3,))
        + i32(3)  # LiveLeaders: BrokerId, HostName, Port
        + i32(1) + s("h1") + i32(9092)
        + i32(2) + s("host-2") + i32(9093)
        + i32(3) + s("h3") + i32(1)
    )
    got = encode_leader_and_isr(GOLDEN_LAI, GOLDEN_LEADERS, 42, "ctl")
    assert got == expected
    req = decode_ok(expected)
    assert req.message == GOLDEN_LAI
    assert req.live_leaders == GOLDEN_LEADERS
    assert (req.api_key, req.api_version, req.correlation_id) == (4, 2, 42)
    assert req.header.client_id == "ctl"
    assert req.trailing_bytes == 0


GOLDEN_UM = UpdateMetadataRequest(
    controller_id=2,
    controller_epoch=9,
    broker_epoch=77,
    partitions=(
        PartitionInfo(TopicPartition("a", 0), 2, 1, (2, 3), 4, (2, 3, 5)),
        PartitionInfo(TopicPartition("b.c", 7), -1, 2, (), 8, (5,)),
    ),
    live_brokers=(LiveBroker(2, 100), LiveBroker(3, 101)),
)
GOLDEN_ENDPOINTS = {
    2: Endpoint(2, "127.0.0.2", 9092, None),
    3: Endpoint(3, "127.0.0.3", 9093, "rack-b"),
    5: Endpoint(5, "127.0.0.5", 9095, None),  # not live: not sent
}


def um_partition(
    index: int, ce: int, leader: int, le: int, isr: Sequence[int], zkv: int,
    reps: Sequence[int], offline: Sequence[int],
) -> bytes:
    # UpdateMetadataPartitionState v5: PartitionIndex, ControllerEpoch, Leader, LeaderEpoch, Isr,
    # ZkVersion, Replicas, OfflineReplicas (v4+); no TopicName (v0-4).
    return (
        i32(index) + i32(ce) + i32(leader) + i32(le) + arr(*isr) + i32(zkv) + arr(*reps)
        + arr(*offline)
    )


def um_broker(broker_id: int, host: str, port: int, rack: str | None) -> bytes:
    # UpdateMetadataBroker v5: Id, Endpoints[Port, Host, Listener (v3+), SecurityProtocol],
    # Rack (v2+, nullable).
    return i32(broker_id) + i32(1) + i32(port) + s(host) + s("PLAINTEXT") + i16(0) + s(rack)


def test_golden_update_metadata_v5() -> None:
    expected = framed(
        header(6, 5, 7, None)
        + i32(2)  # ControllerId
        + i32(9)  # ControllerEpoch
        + i64(77)  # BrokerEpoch
        + i32(2)  # TopicStates
        + s("a") + i32(1) + um_partition(0, 9, 2, 1, (2, 3), 4, (2, 3, 5), (5,))
        + s("b.c") + i32(1) + um_partition(7, 9, -1, 2, (), 8, (5,), (5,))
        + i32(2)  # LiveBrokers
        + um_broker(2, "127.0.0.2", 9092, None)
        + um_broker(3, "127.0.0.3", 9093, "rack-b")
    )
    got = encode_update_metadata(GOLDEN_UM, GOLDEN_ENDPOINTS, 7, None)
    assert got == expected
    req = decode_ok(expected)
    assert req.message == UpdateMetadataRequest(
        2, 9, 77, GOLDEN_UM.partitions, (LiveBroker(2, NO_BROKER_EPOCH), LiveBroker(3, -1))
    )
    assert dict(req.endpoints) == {2: GOLDEN_ENDPOINTS[2], 3: GOLDEN_ENDPOINTS[3]}
    assert req.header.client_id is None


def test_golden_stop_replica_v1() -> None:
    msg = StopReplicaRequest(
        1, 4, 12, (TopicPartition("x", 0), TopicPartition("x", 3), TopicPartition("y", 1)), True
    )
    expected = framed(
        header(5, 1, 3, "hiwater")
        + i32(1) + i32(4) + i64(12)  # ControllerId, ControllerEpoch, BrokerEpoch
        + i8(1)  # DeletePartitions
        + i32(2) + s("x") + arr(0, 3) + s("y") + arr(1)  # Topics[Name, PartitionIndexes]
    )
    assert encode_stop_replica(msg, 3) == expected
    assert decode_ok(expected).message == msg


def test_golden_controlled_shutdown_v2() -> None:
    msg = ControlledShutdownRequest(broker_id=4, broker_epoch=2**40 + 1)
    expected = framed(header(7, 2, -5, "b4") + i32(4) + i64(2**40 + 1))
    assert encode_controlled_shutdown(msg, -5, "b4") == expected
    assert decode_ok(expected).message == msg


def test_golden_responses() -> None:
    pe = (
        PartitionError(TopicPartition("t", 0), 0),
        PartitionError(TopicPartition("t", 1), 56),
    )
    lai = i32(9) + i16(0) + i32(2) + s("t") + i32(0) + i16(0) + s("t") + i32(1) + i16(56)
    assert encode_interbroker_response(9, LAI, Errors.NONE, pe) == framed(lai)
    sr = i32(9) + i16(11) + i32(0)
    assert encode_interbroker_response(9, SR, Errors.STALE_CONTROLLER_EPOCH) == framed(sr)
    um = i32(1) + i16(77)
    assert encode_interbroker_response(1, UM, Errors.STALE_BROKER_EPOCH) == framed(um)
    cs = i32(2) + i16(0) + i32(2) + s("a") + i32(0) + s("b") + i32(3)
    msg = ControlledShutdownResponse(Errors.NONE, (TopicPartition("a", 0), TopicPartition("b", 3)))
    assert encode_controlled_shutdown_response(msg, 2) == framed(cs)

    assert decode_interbroker_response(lai, LAI) == InterbrokerResponse(9, LAI, 0, pe)
    assert decode_interbroker_response(sr, SR) == InterbrokerResponse(9, SR, 11)
    assert decode_interbroker_response(um, UM) == InterbrokerResponse(1, UM, 77)
    got = decode_interbroker_response(cs, CS)
    assert isinstance(got, InterbrokerResponse)
    assert got.controlled_shutdown() == msg


# ---------------------------------------------------------------------------------------
# Hypothesis round trips

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
BROKER = st.one_of(st.integers(0, 10), I32)
TOPIC = st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True)
PARTITION = st.integers(0, 2**31 - 1)
HOST = st.text(max_size=40)
CLIENT_ID = st.one_of(st.none(), st.text(max_size=20))


@st.composite
def partition_infos(draw: st.DrawFn) -> tuple[PartitionInfo, ...]:
    topics = draw(st.lists(TOPIC, min_size=1, max_size=4, unique=True))
    tps = draw(
        st.lists(st.tuples(st.sampled_from(topics), PARTITION), max_size=8, unique=True)
    )
    out = []
    for topic, partition in tps:  # topics interleave: the codec groups them
        replicas = draw(st.lists(BROKER, max_size=5, unique=True))
        isr = draw(st.lists(st.sampled_from(replicas), unique=True)) if replicas else []
        leader = draw(st.sampled_from([*isr, -1]))
        out.append(
            PartitionInfo(
                TopicPartition(topic, partition), leader, draw(I32), tuple(isr), draw(I32),
                tuple(replicas),
            )
        )
    return tuple(out)


_T = TypeVar("_T")


def grouped(items: Sequence[_T], topic_of: Callable[[_T], str]) -> tuple[_T, ...]:
    """What decode gives back: topics in order of first appearance, stable within a topic."""
    first: dict[str, int] = {}
    for x in items:
        first.setdefault(topic_of(x), len(first))
    return tuple(sorted(items, key=lambda x: first[topic_of(x)]))


@FUZZ
@given(
    partition_infos(),
    st.lists(st.builds(Endpoint, BROKER, HOST, I32, st.none()), max_size=4),
    I32, I32, I64, I32, CLIENT_ID,
)
def test_leader_and_isr_round_trip(
    parts: tuple[PartitionInfo, ...], leaders: list[Endpoint], cid: int, ce: int, be: int,
    corr: int, client_id: str | None,
) -> None:
    msg = LeaderAndIsrRequest(cid, ce, be, parts)
    req = decode_ok(encode_leader_and_isr(msg, leaders, corr, client_id))
    assert req.message == LeaderAndIsrRequest(cid, ce, be, grouped(parts, lambda p: p.tp.topic))
    assert req.live_leaders == tuple(leaders)
    assert (req.api_key, req.api_version, req.correlation_id) == (4, 2, corr)
    assert req.header.client_id == client_id
    if parts == tuple(sorted(parts)):  # what the controller sends: exact round trip
        assert req.message == msg


@st.composite
def live_with_endpoints(draw: st.DrawFn) -> tuple[tuple[LiveBroker, ...], dict[int, Endpoint]]:
    ids = draw(st.lists(BROKER, max_size=5, unique=True))
    live = tuple(LiveBroker(b, draw(I64)) for b in ids)
    rack = st.one_of(st.none(), st.text(max_size=10))
    endpoints = {b: Endpoint(b, draw(HOST), draw(I32), draw(rack)) for b in ids}
    for b in draw(st.lists(BROKER, max_size=2)):  # extra, non-live entries are not sent
        endpoints.setdefault(b, Endpoint(b, "dead", 1))
    return live, endpoints


@FUZZ
@given(partition_infos(), live_with_endpoints(), I32, I32, I64, I32)
def test_update_metadata_round_trip(
    parts: tuple[PartitionInfo, ...],
    live_eps: tuple[tuple[LiveBroker, ...], dict[int, Endpoint]],
    cid: int, ce: int, be: int, corr: int,
) -> None:
    live, endpoints = live_eps
    msg = UpdateMetadataRequest(cid, ce, be, parts, live)
    req = decode_ok(encode_update_metadata(msg, endpoints, corr))
    assert req.message == UpdateMetadataRequest(
        cid, ce, be, grouped(parts, lambda p: p.tp.topic),
        tuple(LiveBroker(b.broker_id, NO_BROKER_EPOCH) for b in live),
    )
    assert dict(req.endpoints) == {b.broker_id: endpoints[b.broker_id] for b in live}
    assert req.live_leaders == ()


@FUZZ
@given(
    st.lists(st.tuples(TOPIC, PARTITION), max_size=10, unique=True),
    I32, I32, I64, st.booleans(), I32,
)
def test_stop_replica_round_trip(
    tps: list[tuple[str, int]], cid: int, ce: int, be: int, delete: bool, corr: int
) -> None:
    parts = tuple(TopicPartition(*tp) for tp in tps)
    msg = StopReplicaRequest(cid, ce, be, parts, delete)
    req = decode_ok(encode_stop_replica(msg, corr))
    assert req.message == StopReplicaRequest(
        cid, ce, be, grouped(parts, lambda tp: tp.topic), delete
    )
    assert req.correlation_id == corr


@FUZZ
@given(BROKER, I64, I32, CLIENT_ID)
def test_controlled_shutdown_round_trip(
    broker_id: int, be: int, corr: int, client_id: str | None
) -> None:
    msg = ControlledShutdownRequest(broker_id, be)
    req = decode_ok(encode_controlled_shutdown(msg, corr, client_id))
    assert req.message == msg
    assert req.header.client_id == client_id


I16 = st.integers(-(2**15), 2**15 - 1)
TPS = st.lists(st.builds(TopicPartition, TOPIC, PARTITION), max_size=6)


@FUZZ
@given(st.sampled_from([LAI, SR]), I32, I16, st.lists(st.builds(PartitionError, st.builds(
    TopicPartition, TOPIC, PARTITION), I16), max_size=6))
def test_partition_error_responses_round_trip(
    key: InterbrokerApiKey, corr: int, error: int, pes: list[PartitionError]
) -> None:
    raw = encode_interbroker_response(corr, key, error, pes)
    assert decode_interbroker_response(raw[4:], key) == InterbrokerResponse(
        corr, key, error, tuple(pes)
    )


@FUZZ
@given(I32, I16)
def test_update_metadata_response_round_trip(corr: int, error: int) -> None:
    raw = encode_interbroker_response(corr, UM, error)
    assert decode_interbroker_response(raw[4:], UM) == InterbrokerResponse(corr, UM, error)


@FUZZ
@given(I32, st.sampled_from(list(Errors)), TPS)
def test_controlled_shutdown_response_round_trip(
    corr: int, error: Errors, remaining: list[TopicPartition]
) -> None:
    msg = ControlledShutdownResponse(error, tuple(remaining))
    got = decode_interbroker_response(encode_controlled_shutdown_response(msg, corr)[4:], CS)
    assert isinstance(got, InterbrokerResponse)
    assert got == InterbrokerResponse(corr, CS, error, (), tuple(remaining))
    assert got.controlled_shutdown() == msg


def test_controlled_shutdown_conversion_refuses() -> None:
    unknown = InterbrokerResponse(3, CS, 56)  # KAFKA_STORAGE_ERROR: not a core error
    assert isinstance(unknown.controlled_shutdown(), ResponseDecodeError)
    assert isinstance(InterbrokerResponse(3, UM, 0).controlled_shutdown(), ResponseDecodeError)


# ---------------------------------------------------------------------------------------
# garbage in: Close, never an exception

VALID_FRAMES = {
    LAI: encode_leader_and_isr(GOLDEN_LAI, GOLDEN_LEADERS, 42, "ctl"),
    UM: encode_update_metadata(GOLDEN_UM, GOLDEN_ENDPOINTS, 7),
    SR: encode_stop_replica(StopReplicaRequest(1, 4, 12, (TopicPartition("x", 0),), False), 3),
    CS: encode_controlled_shutdown(ControlledShutdownRequest(4, 5), 9),
}
VALID_RESPONSES = {
    LAI: encode_interbroker_response(1, LAI, 0, [PartitionError(TopicPartition("t", 0), 0)]),
    SR: encode_interbroker_response(1, SR, 0, [PartitionError(TopicPartition("t", 0), 6)]),
    UM: encode_interbroker_response(1, UM, 0),
    CS: encode_interbroker_response(1, CS, 0, remaining=[TopicPartition("t", 2)]),
}
HUGE = [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x7f\xff", b"\xff\xfe", b"\x00\x10\x00\x00"]


def check(result: object) -> None:
    assert isinstance(result, InterbrokerRequest | Close), result


@pytest.mark.parametrize("key", list(InterbrokerApiKey), ids=lambda k: k.name)
def test_every_prefix_closes(key: InterbrokerApiKey) -> None:
    payload = VALID_FRAMES[key][4:]
    whole = decode_interbroker_request(payload)
    assert isinstance(whole, InterbrokerRequest)
    for n in range(len(payload)):
        got = decode_interbroker_request(payload[:n])
        assert isinstance(got, Close), (n, got)
        if n < 8:
            assert got.code == CloseCode.MALFORMED_HEADER
            continue
        assert (got.api_key, got.api_version, got.correlation_id) == (
            whole.api_key, whole.api_version, whole.correlation_id
        )
        if n < whole.header.size:
            assert got.code == CloseCode.MALFORMED_HEADER
        else:
            assert got.code == CloseCode.MALFORMED_BODY


@pytest.mark.parametrize("key", list(InterbrokerApiKey), ids=lambda k: k.name)
def test_every_response_prefix_is_an_error(key: InterbrokerApiKey) -> None:
    payload = VALID_RESPONSES[key][4:]
    for n in range(len(payload)):
        got = decode_interbroker_response(payload[:n], key)
        assert isinstance(got, ResponseDecodeError), (n, got)
        assert got.correlation_id == (1 if n >= 4 else None)
    assert isinstance(decode_interbroker_response(payload, key), InterbrokerResponse)


@pytest.mark.parametrize("key", list(InterbrokerApiKey), ids=lambda k: k.name)
def test_other_versions_are_unsupported(key: InterbrokerApiKey) -> None:
    payload = VALID_FRAMES[key][4:]
    for version in (-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0x7FFF):
        got = decode_interbroker_request(payload[:2] + i16(version) + payload[4:])
        if version == INTERBROKER_APIS[key]:
            assert isinstance(got, InterbrokerRequest)
            continue
        assert isinstance(got, Close)
        assert got.code == CloseCode.UNSUPPORTED_VERSION
        assert (got.api_key, got.api_version, got.correlation_id) == (
            key, version, struct.unpack(">i", payload[4:8])[0]
        )


@pytest.mark.parametrize("api_key", [0, 1, 3, 8, 18, -1, 0x7FFF])
def test_other_api_keys_are_unknown(api_key: int) -> None:
    payload = VALID_FRAMES[CS][4:]
    got = decode_interbroker_request(i16(api_key) + payload[2:])
    assert isinstance(got, Close)
    assert got.code == CloseCode.UNKNOWN_API_KEY
    assert isinstance(decode_interbroker_response(b"\0" * 8, api_key), ResponseDecodeError)


def test_trailing_bytes_are_counted_and_ignored() -> None:
    payload = VALID_FRAMES[LAI][4:]
    got = decode_interbroker_request(payload + b"xyz")
    assert isinstance(got, InterbrokerRequest)
    assert got.trailing_bytes == 3
    assert got.message == GOLDEN_LAI
    assert got.live_leaders == GOLDEN_LEADERS


def test_body_errors_are_malformed_body() -> None:
    cs_head = header(7, 2, 1, "c")
    lai_head = header(4, 2, 1, "c") + i32(1) + i32(1) + i64(1)
    for body in (
        lai_head + i32(1) + s(None) + i32(0) + i32(0),  # null topic name
        lai_head + i32(-1) + i32(0),  # null topic_states
        lai_head + i32(1) + i16(2) + b"\xff\xfe" + i32(0) + i32(0),  # name not UTF-8
        lai_head + i32(0x7FFFFFFF),  # huge count
        lai_head + i32(1) + s("t") + i32(1) + i32(0) * 4 + i32(0x10000000),  # huge isr
        cs_head + i32(1) + b"\0" * 7,  # short broker epoch
    ):
        got = decode_interbroker_request(body)
        assert isinstance(got, Close)
        assert got.code == CloseCode.MALFORMED_BODY, got
    bad_client_id = i16(7) + i16(2) + i32(1) + i16(5) + b"ab"
    got = decode_interbroker_request(bad_client_id)
    assert isinstance(got, Close)
    assert got.code == CloseCode.MALFORMED_HEADER


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes(data: bytes) -> None:
    check(decode_interbroker_request(data))
    for key in InterbrokerApiKey:
        got = decode_interbroker_response(data, key)
        assert isinstance(got, InterbrokerResponse | ResponseDecodeError)


@FUZZ
@given(st.sampled_from(list(InterbrokerApiKey)), CLIENT_ID, st.binary(max_size=400))
def test_valid_header_random_body(
    key: InterbrokerApiKey, client_id: str | None, body: bytes
) -> None:
    got = decode_interbroker_request(header(key, INTERBROKER_APIS[key], 1, client_id) + body)
    check(got)
    if isinstance(got, Close):
        assert got.code == CloseCode.MALFORMED_BODY


@st.composite
def mutated(draw: st.DrawFn, frames: dict[InterbrokerApiKey, bytes]) -> tuple[int, bytes]:
    key = draw(st.sampled_from(list(InterbrokerApiKey)))
    data = bytearray(frames[key][4:])
    for _ in range(draw(st.integers(1, 6))):
        if not data:
            break
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "huge"]))
        i = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[i] = draw(st.integers(0, 255))
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[i : i + draw(st.integers(1, 8))]
        elif op == "truncate":
            del data[i:]
        else:
            word = draw(st.sampled_from(HUGE))
            data[i : i + len(word)] = word
    return key, bytes(data)


@FUZZ
@given(mutated(VALID_FRAMES))
def test_mutated_requests(kd: tuple[int, bytes]) -> None:
    check(decode_interbroker_request(kd[1]))


@FUZZ
@given(mutated(VALID_RESPONSES))
def test_mutated_responses(kd: tuple[int, bytes]) -> None:
    key, data = kd
    got = decode_interbroker_response(data, key)
    assert isinstance(got, InterbrokerResponse | ResponseDecodeError)


@pytest.mark.parametrize("key", list(InterbrokerApiKey), ids=lambda k: k.name)
def test_every_word_set_to_huge(key: InterbrokerApiKey) -> None:
    payload = VALID_FRAMES[key][4:]
    for i in range(8, len(payload)):
        for word in HUGE:
            check(decode_interbroker_request(payload[:i] + word + payload[i + len(word) :]))
    response = VALID_RESPONSES[key][4:]
    for i in range(4, len(response)):
        for word in HUGE:
            got = decode_interbroker_response(response[:i] + word + response[i + len(word) :], key)
            assert isinstance(got, InterbrokerResponse | ResponseDecodeError)


# ---------------------------------------------------------------------------------------
# encoding refuses what does not fit


def test_encode_errors() -> None:
    info = PartitionInfo(TopicPartition("t", 0), 1, 0, (1,), 0, (1,))
    with pytest.raises(EncodeError, match="controller_epoch"):
        encode_leader_and_isr(LeaderAndIsrRequest(1, 2**31, 0, (info,)), (), 1)
    with pytest.raises(EncodeError, match="broker_epoch"):
        encode_controlled_shutdown(ControlledShutdownRequest(1, 2**63), 1)
    with pytest.raises(EncodeError, match="no endpoint"):
        encode_update_metadata(UpdateMetadataRequest(1, 1, 1, (), (LiveBroker(9, 1),)), {}, 1)
    with pytest.raises(EncodeError, match="filed under"):
        encode_update_metadata(
            UpdateMetadataRequest(1, 1, 1, (), (LiveBroker(9, 1),)), {9: Endpoint(8, "h", 1)}, 1
        )
    with pytest.raises(EncodeError, match="longer"):
        encode_leader_and_isr(LeaderAndIsrRequest(1, 1, 1, ()), (Endpoint(1, "h" * 40000, 1),), 1)
    with pytest.raises(EncodeError, match="no partition errors"):
        encode_interbroker_response(1, UM, 0, [PartitionError(TopicPartition("t", 0), 0)])
    with pytest.raises(EncodeError, match="no remaining"):
        encode_interbroker_response(1, LAI, 0, remaining=[TopicPartition("t", 0)])
    with pytest.raises(EncodeError, match="not an inter-broker"):
        encode_interbroker_response(1, 3, 0)


def test_frames_split_by_the_frame_decoder() -> None:
    stream = b"".join(VALID_FRAMES[k] for k in InterbrokerApiKey)
    decoder = FrameDecoder()
    frames = [f for i in range(0, len(stream), 7) for f in decoder.feed(stream[i : i + 7])]
    got = [decode_interbroker_request(f.payload) for f in frames]  # type: ignore[union-attr]
    assert [type(g.message) for g in got if isinstance(g, InterbrokerRequest)] == [
        LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest, ControlledShutdownRequest
    ]
