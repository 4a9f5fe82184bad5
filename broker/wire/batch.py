"""Record batch v2 headers, for the wire layer's own needs: split a ``records`` field into batches.

``broker/store`` owns full batch validation (CRC-32C, sequences); the header struct and the
``BatchHeader`` type come from ``broker/recordbatch.py``, shared with the store, so wire-level
code can report what a ``records`` field holds without depending on the store.  The checks here
are lenient and return a ``BatchError`` instead of raising.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.recordbatch import HEADER_SIZE, MAGIC_V2, BatchHeader, Buf, unpack_header

__all__ = [
    "BATCH_HEADER_SIZE",
    "BatchError",
    "BatchHeader",
    "BatchScan",
    "parse_batch_header",
    "scan_batches",
]

BATCH_HEADER_SIZE = HEADER_SIZE  # 61


@dataclass(frozen=True, slots=True)
class BatchError:
    position: int
    reason: str


def parse_batch_header(buf: Buf, position: int = 0) -> BatchHeader | BatchError:
    """Read the batch header at ``position``; checks magic and that the length is plausible.

    It does not check that the whole batch is present (``scan_batches`` does) nor the CRC.
    """
    available = len(buf) - position
    if position < 0 or available < BATCH_HEADER_SIZE:
        return BatchError(
            position, f"batch header needs {BATCH_HEADER_SIZE} bytes, {available} left"
        )
    h = unpack_header(buf, position)
    if h.magic != MAGIC_V2:
        return BatchError(position, f"magic {h.magic}, only magic 2 is supported")
    if h.size < BATCH_HEADER_SIZE:
        return BatchError(position, f"batchLength {h.batch_length} is shorter than the header")
    if h.last_offset_delta < 0 or h.records_count < 0:
        return BatchError(
            position, f"negative lastOffsetDelta {h.last_offset_delta} or count {h.records_count}"
        )
    return h


@dataclass(frozen=True, slots=True)
class BatchScan:
    """The whole batches at the start of a record set, and why scanning stopped (if not at end)."""

    batches: tuple[tuple[int, BatchHeader], ...]
    """(position, header) of each complete batch, in order."""
    valid_bytes: int
    """Length of the prefix made of complete batches."""
    error: BatchError | None
    """Why the remaining bytes are not a complete batch; ``None`` if everything was consumed."""


def scan_batches(buf: Buf, max_batches: int | None = None) -> BatchScan:
    """Split a ``records`` field into batches by their headers (at most ``max_batches``)."""
    pos = 0
    end = len(buf)
    out: list[tuple[int, BatchHeader]] = []
    while pos < end:
        if max_batches is not None and len(out) >= max_batches:
            return BatchScan(tuple(out), pos, BatchError(pos, f"more than {max_batches} batches"))
        h = parse_batch_header(buf, pos)
        if isinstance(h, BatchError):
            return BatchScan(tuple(out), pos, h)
        if pos + h.size > end:
            return BatchScan(
                tuple(out),
                pos,
                BatchError(pos, f"truncated batch: {h.size} bytes declared, {end - pos} present"),
            )
        out.append((pos, h))
        pos += h.size
    return BatchScan(tuple(out), pos, None)
