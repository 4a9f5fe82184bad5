"""FrameDecoder: split points, many frames per chunk, oversized/negative/undersized/truncated."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.wire import (
    DEFAULT_MAX_REQUEST_BYTES,
    Frame,
    FrameDecoder,
    FrameError,
    FrameErrorKind,
    check_frame_size,
    frame,
)

PAYLOADS = [b"\x00\x12\x00\x03" + bytes([i]) * (8 + i * 7) for i in range(6)]
STREAM = b"".join(frame(p) for p in PAYLOADS)


def frames_of(items: list[Frame | FrameError]) -> list[bytes]:
    assert all(isinstance(i, Frame) for i in items), items
    return [i.payload for i in items if isinstance(i, Frame)]


def test_every_single_split_point() -> None:
    for cut in range(len(STREAM) + 1):
        d = FrameDecoder()
        got = frames_of(d.feed(STREAM[:cut])) + frames_of(d.feed(STREAM[cut:]))
        assert got == PAYLOADS, cut
        assert d.buffered == 0 and d.eof() is None


def test_byte_at_a_time() -> None:
    d = FrameDecoder()
    got: list[bytes] = []
    for i in range(len(STREAM)):
        got += frames_of(d.feed(STREAM[i : i + 1]))
        assert d.buffered <= 4 + max(len(p) for p in PAYLOADS)
    assert got == PAYLOADS


def test_many_frames_in_one_chunk() -> None:
    payload = b"\x00\x03\x00\x01\x00\x00\x00\x01"
    d = FrameDecoder()
    got = frames_of(d.feed(frame(payload) * 10_000))
    assert len(got) == 10_000 and all(g == payload for g in got)
    assert d.buffered == 0


def test_accepts_bytearray_and_memoryview() -> None:
    d = FrameDecoder()
    assert frames_of(d.feed(bytearray(STREAM[:10])) + d.feed(memoryview(STREAM)[10:])) == PAYLOADS
    assert all(type(p) is bytes for p in PAYLOADS)


@pytest.mark.parametrize(
    ("prefix", "kind"),
    [
        (struct.pack(">i", -1), FrameErrorKind.NEGATIVE_SIZE),
        (struct.pack(">i", -(2**31)), FrameErrorKind.NEGATIVE_SIZE),
        (struct.pack(">i", DEFAULT_MAX_REQUEST_BYTES + 1), FrameErrorKind.OVERSIZED),
        (struct.pack(">i", 2**31 - 1), FrameErrorKind.OVERSIZED),
        (struct.pack(">i", 0), FrameErrorKind.UNDERSIZED),
        (struct.pack(">i", 7), FrameErrorKind.UNDERSIZED),
        (b"GET / HTTP/1.1\r\n", FrameErrorKind.OVERSIZED),
        (b"\x16\x03\x01\x02\x00\x01", FrameErrorKind.OVERSIZED),
    ],
)
def test_bad_size_prefix_is_final(prefix: bytes, kind: FrameErrorKind) -> None:
    d = FrameDecoder()
    items = d.feed(frame(PAYLOADS[0]) + prefix + b"\x00" * 64)
    assert isinstance(items[0], Frame)
    assert len(items) == 2 and isinstance(items[1], FrameError)
    assert items[1].kind is kind and d.error == items[1]
    assert d.buffered == 0
    assert d.feed(STREAM) == []  # dead after an error
    assert d.eof() is None


def test_garbage_hints() -> None:
    err = check_frame_size(b"GET ")
    assert isinstance(err, FrameError) and "HTTP" in err.reason
    err = check_frame_size(b"\x16\x03\x01\x00")
    assert isinstance(err, FrameError) and "TLS" in err.reason
    err = check_frame_size(b"\x00\x00")
    assert isinstance(err, FrameError) and err.kind is FrameErrorKind.TRUNCATED
    assert check_frame_size(struct.pack(">i", 100)) == 100


def test_oversized_rejected_before_body_is_buffered() -> None:
    d = FrameDecoder(max_frame_bytes=1024)
    items = d.feed(struct.pack(">i", 1025))
    assert [type(i) for i in items] == [FrameError]
    assert d.buffered == 0
    ok = FrameDecoder(max_frame_bytes=1024)
    assert ok.feed(struct.pack(">i", 1024) + b"\x00" * 100) == []
    assert ok.pending_frame_size == 1024 and ok.buffered == 104


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 15])
def test_truncated_at_eof(cut: int) -> None:
    d = FrameDecoder()
    assert d.feed(STREAM[:cut]) == []
    err = d.eof()
    assert isinstance(err, FrameError) and err.kind is FrameErrorKind.TRUNCATED
    assert d.eof() is None and d.feed(b"more") == []


def test_clean_eof_and_empty_feed() -> None:
    d = FrameDecoder()
    assert d.feed(b"") == []
    assert d.eof() is None


def test_constructor_bounds() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_bytes=2**31)
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_bytes=4, min_frame_bytes=8)


@settings(max_examples=300, deadline=None)
@given(
    payloads=st.lists(st.binary(min_size=8, max_size=300), max_size=8),
    cuts=st.lists(st.integers(0, 4000), max_size=10),
)
def test_any_chunking_yields_the_frames(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    points = sorted({min(c, len(stream)) for c in cuts})
    d = FrameDecoder(max_frame_bytes=300)
    got: list[bytes] = []
    prev = 0
    for c in [*points, len(stream)]:
        got += frames_of(d.feed(stream[prev:c]))
        prev = c
    assert got == payloads and d.eof() is None


@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=2000), chunk=st.integers(1, 64))
def test_random_bytes_never_raise_and_stay_bounded(data: bytes, chunk: int) -> None:
    d = FrameDecoder(max_frame_bytes=512)
    errors = 0
    for i in range(0, len(data), chunk):
        for item in d.feed(data[i : i + chunk]):
            errors += isinstance(item, FrameError)
        assert d.buffered <= 4 + 512
    assert errors <= 1
    end = d.eof()
    assert end is None or end.kind is FrameErrorKind.TRUNCATED
