"""Helpers shared by the store tests: batch builders and whole-log readers."""

from __future__ import annotations

from broker.store.batch import Record, build_batch, iter_headers
from broker.store.log import PREFIX, PREFIX_END, Log


def make_batch(
    values: list[bytes],
    *,
    keys: list[bytes | None] | None = None,
    timestamp: int = 1_000,
    base_offset: int = 0,
    epoch: int = -1,
    attributes: int = 0,
) -> bytes:
    """A v2 batch as a producer sends it (base offset 0, epoch -1 unless given)."""
    keys = keys if keys is not None else [None] * len(values)
    records = [
        Record(offset=base_offset + i, timestamp=timestamp + i, key=k, value=v)
        for i, (k, v) in enumerate(zip(keys, values, strict=True))
    ]
    return build_batch(
        records, base_offset=base_offset, partition_leader_epoch=epoch, attributes=attributes
    )


def as_stored(produced: bytes, base_offset: int, epoch: int) -> bytes:
    """The bytes a leader stores for a produced batch: only base offset and epoch differ."""
    length = len(produced) - 12
    return PREFIX.pack(base_offset, length, epoch) + produced[PREFIX_END:]


def read_all(log: Log, max_bytes: int = 1 << 20) -> bytes:
    """Every batch from log_start_offset to log_end_offset, CRC-verified, across segments."""
    out = []
    offset = log.log_start_offset
    for _ in range(100_000):
        if offset >= log.log_end_offset:
            break
        data = log.read_bytes(offset, max_bytes)
        if not data:
            break
        last = None
        for _, h in iter_headers(data):
            last = h
        assert last is not None
        out.append(data)
        offset = last.next_offset
    return b"".join(out)
