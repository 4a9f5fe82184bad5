"""Batches built by a real client library (kafka-python's record builder) round-trip byte for
byte through the store with every codec, and dump-log prints them."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from store_testlib import as_stored

from broker.store import codec
from broker.store.batch import decode_records, validate_batch
from broker.store.config import LogConfig
from broker.store.dump import dump_log
from broker.store.fs import RealFS
from broker.store.log import Log

CODECS = {
    "none": codec.NONE,
    "gzip": codec.GZIP,
    "snappy": codec.SNAPPY,
    "lz4": codec.LZ4,
    "zstd": codec.ZSTD,
}


def client_batch(codec_id: int, n: int, *, producer_id: int = -1, seq: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec_id,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=seq,
        batch_size=1 << 20,
    )
    for i in range(n):
        builder.append(
            i,
            timestamp=1_700_000_000_000 + i,
            key=b"key-%d" % i,
            value=b"value-%d " % i + b"payload " * (i % 7),
            headers=[("h", b"v%d" % i)],
        )
    return bytes(builder.build())


@pytest.mark.parametrize("name", sorted(CODECS))
def test_client_batches_round_trip_byte_for_byte(tmp_path: Path, name: str) -> None:
    codec_id = CODECS[name]
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=4096), RealFS())
    produced = [client_batch(codec_id, n, producer_id=7, seq=10 * n) for n in (1, 5, 40, 3)]
    offsets = [log.append_as_leader(b, leader_epoch=3) for b in produced]
    assert offsets == [(0, 0), (1, 5), (6, 45), (46, 48)]
    for (first, last), raw in zip(offsets, produced, strict=True):
        assert log.read(first, 1 << 20, max_offset=last).length == 0  # only whole batches
        region = log.read(first, 1 << 20, max_offset=last + 1)
        stored = region.read_bytes()
        assert stored == as_stored(raw, first, 3)
        assert stored[16:] == raw[16:]  # everything but base offset and epoch, verbatim
        # and a client reads it back: CRC valid, records intact, offsets assigned
        batch = DefaultRecordBatch(stored)
        assert batch.validate_crc()
        assert batch.base_offset == first and batch.leader_epoch == 3
        # (the client leaves a batch uncompressed when compression would not shrink it)
        assert batch.compression_type == DefaultRecordBatch(raw).compression_type
        if first == 6:
            assert batch.compression_type == codec_id
        ours = decode_records(stored)
        theirs = list(batch)
        assert [(r.offset, r.key, r.value) for r in ours] == [
            (r.offset, r.key, r.value) for r in theirs
        ]
        assert [r.headers for r in ours] == [tuple(r.headers) for r in theirs]
    log.close()

    seg = tmp_path / "t-0" / "00000000000000000000.log"
    out = io.StringIO()
    assert dump_log(seg, deep_iteration=True, out=out) == 0
    text = out.getvalue()
    assert f"compresscodec: {name}" in text
    assert "baseOffset: 1 lastOffset: 5 count: 5 baseSequence: 50 lastSequence: 54" in text
    assert "producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 3" in text
    assert "isvalid: true" in text
    assert "| offset: 3 CreateTime: 1700000000002 keySize: 5" in text  # 3rd record of batch 2
    assert "key: key-2 payload: value-2 payload payload" in text
    assert "headerKeys: [h]" in text
    shallow = io.StringIO()
    assert dump_log(seg, deep_iteration=False, out=shallow) == 0
    assert "| offset" not in shallow.getvalue()


def test_our_builder_is_readable_by_the_client() -> None:
    from broker.store.batch import Record, build_batch

    for codec_id in CODECS.values():
        raw = build_batch(
            [Record(offset=5 + i, timestamp=100 + i, key=None, value=b"v%d" % i) for i in range(4)],
            base_offset=5,
            attributes=codec_id,
        )
        validate_batch(raw)
        batch = DefaultRecordBatch(raw)
        assert batch.validate_crc()
        assert [(r.offset, r.value) for r in batch] == [(5 + i, b"v%d" % i) for i in range(4)]


def test_dump_index_files(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(index_interval_bytes=10), RealFS())
    for _ in range(5):
        log.append_as_leader(client_batch(codec.NONE, 3), 0)
    log.close()
    out = io.StringIO()
    assert dump_log(tmp_path / "t-0" / "00000000000000000000.index", False, out) == 0
    lines = out.getvalue().splitlines()[1:]
    assert lines[0].startswith("offset: 5 position: ")
    assert len(lines) == 4
    out = io.StringIO()
    assert dump_log(tmp_path / "t-0" / "00000000000000000000.timeindex", False, out) == 0
    assert out.getvalue().splitlines()[1] == "timestamp: 1700000000002 offset: 2"
    assert dump_log(tmp_path / "missing.log", False, io.StringIO()) == 2
