"""Exceptions raised by the segment store.

Every error says what was wrong, where (file, position, offset) and, when it helps, what to do.
"""

from __future__ import annotations

from typing import Any


class StoreError(Exception):
    """Base class of every segment-store error."""


class InvalidConfigError(StoreError, ValueError):
    """A LogConfig value is out of range or of the wrong type."""


class InvalidRecordError(StoreError):
    """A batch is well formed and intact but not acceptable (wrong magic, bad offsets, too big).

    Kafka answers INVALID_RECORD (or MESSAGE_TOO_LARGE / UNSUPPORTED_FOR_MESSAGE_FORMAT)."""


class RecordTooLargeError(InvalidRecordError):
    """A batch is larger than max.message.bytes."""


class CorruptRecordError(StoreError):
    """Bytes that fail validation: truncated batch, impossible length, CRC mismatch.

    Kafka answers CORRUPT_MESSAGE."""


class CorruptIndexError(StoreError):
    """An index file is inconsistent with its segment. Deleting index files is always safe."""


class OffsetOutOfRangeError(StoreError):
    """A read or truncation offset lies outside [log_start_offset, log_end_offset]."""

    def __init__(self, message: str, *, offset: int, log_start_offset: int, log_end_offset: int):
        super().__init__(message)
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset

    def __reduce__(self) -> tuple[Any, ...]:
        # pickle (a process pool's results) calls cls(*args): the keyword-only fields
        # must come back through a function that passes them
        return (_offset_out_of_range, (str(self), self.offset, self.log_start_offset,
                                       self.log_end_offset))


def _offset_out_of_range(message: str, offset: int, log_start_offset: int,
                         log_end_offset: int) -> OffsetOutOfRangeError:
    return OffsetOutOfRangeError(message, offset=offset, log_start_offset=log_start_offset,
                                 log_end_offset=log_end_offset)


class NonContiguousOffsetError(InvalidRecordError):
    """A follower append whose offsets do not follow the log end offset."""


class LogClosedError(StoreError):
    """The log (or its file system, after a simulated crash) is closed."""
