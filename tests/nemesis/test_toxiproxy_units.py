"""Pure pieces of the Toxiproxy implementation: slicing, jitter, JSON decoding, channels."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemesis.toxiproxy import gojson
from nemesis.toxiproxy.channel import Channel, Chunk
from nemesis.toxiproxy.errors import ApiError
from nemesis.toxiproxy.proxy import join_host_port, split_host_port
from nemesis.toxiproxy.toxics import LatencyToxic, SlicerToxic, TimeoutToxic


@st.composite
def slicers(draw: st.DrawFn) -> SlicerToxic:
    average = draw(st.integers(min_value=1, max_value=64))
    variation = draw(st.integers(min_value=0, max_value=average - 1))
    return SlicerToxic(average_size=average, size_variation=variation, delay=0)


@given(slicers(), st.integers(min_value=0, max_value=5000), st.integers(min_value=0))
def test_slices_cover_the_chunk_in_order(slicer: SlicerToxic, size: int, seed: int) -> None:
    bounds = slicer.slice_bounds(0, size, random.Random(seed))
    assert len(bounds) % 2 == 0 and bounds[0] == 0 and bounds[-1] == size
    starts, ends = bounds[0::2], bounds[1::2]
    assert starts[1:] == ends[:-1]  # contiguous, no overlap
    limit = slicer.average_size + slicer.size_variation
    for start, end in zip(starts, ends, strict=True):
        assert end - start <= limit
        if size > 0:
            assert end > start


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=1000))
def test_latency_jitter_range(latency: int, jitter: int) -> None:
    toxic = LatencyToxic(latency=latency, jitter=jitter)
    rng = random.Random(latency * 7919 + jitter)
    for _ in range(20):
        delay_ms = toxic.delay_s(rng) * 1000
        assert latency - jitter - 1e-6 <= delay_ms < latency + jitter + 1e-6


def test_attribute_decoding_follows_go() -> None:
    base = LatencyToxic(latency=10, jitter=3)
    updated = LatencyToxic.from_attributes({"LATENCY": 20, "unknown": "x"}, base)
    assert updated == LatencyToxic(latency=20, jitter=3)
    assert LatencyToxic.from_attributes(None, base) == base
    assert LatencyToxic.from_attributes({"latency": None}, base) == base
    for bad in ({"latency": 1.5}, {"latency": "1"}, {"latency": False}, {"latency": 2**63}):
        with pytest.raises(ApiError) as info:
            LatencyToxic.from_attributes(bad, None)
        assert info.value.status == 400
    assert TimeoutToxic.from_attributes({"timeout": -5}, None) == TimeoutToxic(timeout=-5)
    for bad_slicer in (
        {"average_size": 0},
        {"average_size": 4, "size_variation": 4},
        {"average_size": 4, "size_variation": -1},
    ):
        with pytest.raises(ApiError):
            SlicerToxic.from_attributes(bad_slicer, None)


def test_body_decoding() -> None:
    assert gojson.decode(b' {"a": 1} trailing') == {"a": 1}
    for bad in (b"", b"   ", b"{", b"NaN", b'{"a": Infinity}', b"\xff"):
        with pytest.raises(ApiError) as info:
            gojson.decode(bad)
        assert info.value.status == 400
        assert info.value.message.startswith("bad request body: ")
    assert gojson.as_object(None, "T") == {}
    with pytest.raises(ApiError):
        gojson.as_object([1], "T")
    assert gojson.lookup({"Name": "a", "name": "b"}, "name") == (True, "b")


def test_encoding_matches_go_marshal() -> None:
    assert gojson.encode({"t": 1.0, "u": 0.25, "s": "<&>"}) == (
        b'{"t":1,"u":0.25,"s":"\\u003c\\u0026\\u003e"}'
    )


def test_host_port_parsing() -> None:
    assert split_host_port("127.0.0.1:80") == ("127.0.0.1", "80")
    assert split_host_port("[::1]:9") == ("::1", "9")
    assert split_host_port(":0") == ("", "0")
    assert split_host_port("") == ("", "0")
    for bad in ("nocolon", "::1:9", "[::1]9", "[::1"):
        with pytest.raises(ValueError):
            split_host_port(bad)
    assert join_host_port("::1", 9) == "[::1]:9"
    assert join_host_port("127.0.0.2", 9) == "127.0.0.2:9"


def test_channel_is_bounded_fifo_with_go_close() -> None:
    async def scenario() -> None:
        channel = Channel(2)
        assert await channel.put(Chunk(b"a", 0.0))
        assert await channel.put(Chunk(b"b", 0.0))
        blocked = asyncio.create_task(channel.put(Chunk(b"c", 0.0)))
        await asyncio.sleep(0.01)
        assert not blocked.done() and len(channel) == 2  # full: the writer waits
        first = await channel.get()
        assert first is not None and first.data == b"a"
        assert await asyncio.wait_for(blocked, 1.0)
        channel.close()
        assert not await channel.put(Chunk(b"dropped", 0.0))
        rest = [await channel.get(), await channel.get(), await channel.get()]
        assert [c.data if c else None for c in rest] == [b"b", b"c", None]
        getter = asyncio.create_task(Channel(1).get())
        await asyncio.sleep(0.01)
        getter.cancel()  # a cancelled get takes nothing
        with pytest.raises(asyncio.CancelledError):
            await getter
        with pytest.raises(ValueError):
            Channel(0)

    asyncio.run(scenario())
