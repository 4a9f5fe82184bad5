"""Corrupted bytes anywhere (batch header, payload, index files) are detected with a clear error;
recovery truncates torn tails and rebuilds bad indexes; nothing corrupt is served."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from store_testlib import make_batch, read_all

from broker.store.batch import HEADER_SIZE, validate_batch
from broker.store.config import LogConfig
from broker.store.dump import dump_log
from broker.store.errors import CorruptRecordError, InvalidRecordError
from broker.store.fs import RealFS, SimFS
from broker.store.log import Log

DIR = Path("/data/t-0")
SEG = DIR / "00000000000000000000.log"
INDEX = DIR / "00000000000000000000.index"
CONFIG = LogConfig(index_interval_bytes=100)


def filled(fs: SimFS, batches: int = 20) -> tuple[Log, list[int]]:
    """A log whose first segment holds `batches` batches, followed by an active segment (the
    active segment is always rescanned on open, as in Kafka after an unclean shutdown)."""
    log = Log.open(DIR, CONFIG, fs)
    positions = []
    for i in range(batches):
        positions.append(log.active_segment.size)
        log.append_as_leader(make_batch([b"value-%d" % i] * 3), 0)
    log.roll(0)
    log.append_as_leader(make_batch([b"in the active segment"]), 0)
    log.flush()
    return log, positions


@pytest.mark.parametrize(
    ("where", "message"),
    [
        (16, "magic"),  # the magic byte
        (8, "batchLength"),  # the length field (made too small by flipping its top bit)
        (30, "CRC mismatch"),  # lastOffsetDelta, covered by the CRC
        (HEADER_SIZE + 5, "CRC mismatch"),  # the records payload
        (17, "CRC mismatch"),  # the stored CRC itself
    ],
)
def test_corrupt_batch_is_detected_on_read(where: int, message: str) -> None:
    fs = SimFS(1)
    log, positions = filled(fs)
    position = positions[7]
    fs.flip_bit(SEG, position + where, 7 if where == 8 else 0)
    with pytest.raises(CorruptRecordError, match=message):
        log.read_bytes(0, 1 << 20)
    # the region API never reads: the bytes it would hand to sendfile are whole batches; the
    # pair check on the in-memory path catches it
    with pytest.raises(CorruptRecordError):
        read_all(log)


def test_recovery_truncates_a_corrupt_tail_and_later_segments() -> None:
    fs = SimFS(2)
    config = LogConfig(segment_bytes=800, index_interval_bytes=100)
    log = Log.open(DIR, config, fs)
    for i in range(30):
        log.append_as_leader(make_batch([b"value-%d" % i] * 3), 0)
    log.flush()
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3
    victim = log.segments[1]
    fs.flip_bit(victim.log_path, victim.size - 3)
    log.abandon()
    reopened = Log.open(DIR, config, fs, recovery_point=0)
    assert any("truncated" in line for line in reopened.recovery_report)
    assert reopened.log_end_offset < bases[2]
    assert [s.base_offset for s in reopened.segments] == bases[:2]
    data = read_all(reopened)  # CRC-checked
    assert len(data) > 0


def test_corruption_below_the_recovery_point_is_found_by_reads_not_served() -> None:
    fs = SimFS(3)
    log, positions = filled(fs)
    fs.flip_bit(SEG, positions[3] + HEADER_SIZE + 2)
    log.abandon()
    reopened = Log.open(DIR, CONFIG, fs, recovery_point=log.log_end_offset)
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        reopened.read_bytes(3, 1 << 20)


def test_missing_or_garbage_index_is_rebuilt() -> None:
    fs = SimFS(4)
    log, _ = filled(fs)
    first = log.segments[0]
    entries = list(zip(first.index.keys, first.index.values, strict=True))
    assert len(entries) > 3
    leo = log.log_end_offset
    log.close()
    fs.remove(INDEX)
    reopened = Log.open(DIR, CONFIG, fs, recovery_point=leo)
    assert any("rebuilt index" in r for r in reopened.recovery_report)
    seg = reopened.segments[0]
    assert list(zip(seg.index.keys, seg.index.values, strict=True)) == entries
    reopened.close()
    # a torn index (not a whole number of entries)
    handle = fs.open(INDEX)
    handle.truncate(handle.size() - 3)
    again = Log.open(DIR, CONFIG, fs, recovery_point=leo)
    assert any("not a multiple" in r for r in again.recovery_report)
    seg = again.segments[0]
    assert list(zip(seg.index.keys, seg.index.values, strict=True)) == entries
    assert len(read_all(again)) > 0


def test_index_entry_pointing_into_a_batch_is_rebuilt_on_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fs = SimFS(5)
    log, _ = filled(fs)
    leo = log.log_end_offset
    log.close()
    # make the 3rd entry's position point 4 bytes into a batch; entries stay ascending
    fs.flip_bit(INDEX, 2 * 8 + 7, 2)
    reopened = Log.open(DIR, CONFIG, fs, recovery_point=leo)
    seg = reopened.segments[0]
    key = seg.index.keys[2]
    expected = read_all(reopened)
    assert reopened.read_bytes(key, 1000)  # served: the indexes were rebuilt on the way
    assert seg.rebuilt_index_reason is not None and "holds no batch" in seg.rebuilt_index_reason
    assert any("00000000000000000000.index" in r.getMessage() for r in caplog.records)
    assert read_all(reopened) == expected


def test_invalid_produce_requests_are_rejected_clearly() -> None:
    log = Log.open(DIR, CONFIG, SimFS(6))
    good = make_batch([b"a", b"b"])
    with pytest.raises(InvalidRecordError, match="empty records"):
        log.append_as_leader(b"", 0)
    with pytest.raises(CorruptRecordError, match="truncated"):
        log.append_as_leader(good[:-1], 0)
    bad_magic = bytearray(good)
    bad_magic[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1"):
        log.append_as_leader(bytes(bad_magic), 0)
    too_big = Log.open(Path("/data/u-0"), LogConfig(max_message_bytes=50), SimFS(7))
    with pytest.raises(InvalidRecordError, match=r"max\.message\.bytes"):
        too_big.append_as_leader(good, 0)
    assert log.log_end_offset == 0
    assert validate_batch(good).records_count == 2


def test_torn_tail_on_a_real_file_system(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG, RealFS())
    for i in range(10):
        log.append_as_leader(make_batch([b"v%d" % i]), 0)
    log.close()
    seg = d / "00000000000000000000.log"
    data = seg.read_bytes()
    seg.write_bytes(data + data[:40])  # a torn write: a partial batch at the end
    (d / "00000000000000000000.index").write_bytes(b"\xff" * 13)
    out = io.StringIO()
    assert dump_log(seg, deep_iteration=True, out=out) == 1
    assert "partial batch header" in out.getvalue()
    reopened = Log.open(d, CONFIG, RealFS())
    assert reopened.log_end_offset == 10
    assert seg.stat().st_size == len(data)
    assert any("truncated 40" in r for r in reopened.recovery_report)


def test_dump_reports_crc_mismatch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG, RealFS())
    log.append_as_leader(make_batch([b"hello"]), 0)
    log.close()
    seg = d / "00000000000000000000.log"
    raw = bytearray(seg.read_bytes())
    raw[-1] ^= 1
    seg.write_bytes(bytes(raw))
    out = io.StringIO()
    assert dump_log(seg, deep_iteration=True, out=out) == 1
    assert "isvalid: false" in out.getvalue()
    assert "CRC mismatch" in out.getvalue()
