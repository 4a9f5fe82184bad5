"""A structural pre-check of a kio entity's encoding, run before kio's native reader.

kio 0.6.5's Rust reader pre-allocates arrays from the declared element count, so one garbage
count (e.g. ``0x7fffffff``) makes it request ~256 GiB and *abort the process* ("memory
allocation of 274877906928 bytes failed").  A remote peer must never be able to do that, so
every body is first walked here, in pure Python, following the same schema kio uses (the
dataclass fields and their ``kafka_type``/``tag`` metadata): every length, count and tagged
field size is checked against the bytes actually present.  Only a buffer that walks cleanly to
its end is handed to kio, which then never sees a count larger than the frame.

The walk checks structure only; kio still checks content (UTF-8, null in non-nullable fields).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import Field, fields
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

__all__ = ["Malformed", "read_uvarint", "skip_tagged_fields", "walk_entity"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

_FIXED_SIZES: dict[str, int] = {
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float64": 8,
    "uuid": 16,
    "bool": 1,
    "error_code": 2,
    "timedelta_i32": 4,
    "timedelta_i64": 8,
    "datetime_i64": 8,
}


class Malformed(Exception):
    """Raised inside the wire package only; always converted to an explicit result."""


# A step reads one field starting at ``pos`` and returns the position after it; ``end`` is the
# exclusive bound it must stay within.
Step = Callable[[bytes, int, int], int]


def read_uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Unsigned varint (at most 5 bytes, 32 bits), as Kafka's ``ByteUtils.readUnsignedVarint``."""
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise Malformed("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 28:
            raise Malformed("varint longer than 5 bytes")
    if value > 0xFFFFFFFF:
        raise Malformed("varint does not fit 32 bits")
    return value, pos


def _need(pos: int, n: int, end: int, what: str) -> int:
    if n < 0 or pos + n > end:
        raise Malformed(f"{what}: needs {n} bytes at {pos}, only {end - pos} left")
    return pos + n


def _fixed(size: int, what: str) -> Step:
    def step(buf: bytes, pos: int, end: int) -> int:
        return _need(pos, size, end, what)

    return step


def _legacy_string(what: str) -> Step:
    def step(buf: bytes, pos: int, end: int) -> int:
        _need(pos, 2, end, what)
        (n,) = _I16.unpack_from(buf, pos)
        if n < -1:
            raise Malformed(f"{what}: negative string length {n}")
        return pos + 2 if n == -1 else _need(pos + 2, n, end, what)

    return step


def _legacy_bytes(what: str) -> Step:
    def step(buf: bytes, pos: int, end: int) -> int:
        _need(pos, 4, end, what)
        (n,) = _I32.unpack_from(buf, pos)
        if n < -1:
            raise Malformed(f"{what}: negative bytes length {n}")
        return pos + 4 if n == -1 else _need(pos + 4, n, end, what)

    return step


def _compact_bytes(what: str) -> Step:
    def step(buf: bytes, pos: int, end: int) -> int:
        n, pos = read_uvarint(buf, pos, end)
        return pos if n == 0 else _need(pos, n - 1, end, what)

    return step


def _array_count(buf: bytes, pos: int, end: int, flexible: bool, what: str) -> tuple[int, int]:
    """Element count (-1 for null) and the position after it."""
    if flexible:
        n, pos = read_uvarint(buf, pos, end)
        return n - 1, pos
    _need(pos, 4, end, what)
    (n,) = _I32.unpack_from(buf, pos)
    if n < -1:
        raise Malformed(f"{what}: negative array length {n}")
    return n, pos + 4


def _array(item: Step, item_min_size: int, flexible: bool, what: str) -> Step:
    def step(buf: bytes, pos: int, end: int) -> int:
        count, pos = _array_count(buf, pos, end, flexible, what)
        if count <= 0:
            return pos
        # Every element takes at least ``item_min_size`` (>= 1) bytes, so a count larger than
        # the remaining bytes is rejected before any per-element work.
        if count * item_min_size > end - pos:
            raise Malformed(f"{what}: {count} elements cannot fit in {end - pos} bytes")
        for _ in range(count):
            pos = item(buf, pos, end)
        return pos

    return step


def _fixed_array(size: int, flexible: bool, what: str) -> Step:
    def step(buf: bytes, pos: int, end: int) -> int:
        count, pos = _array_count(buf, pos, end, flexible, what)
        if count <= 0:
            return pos
        return _need(pos, count * size, end, what)

    return step


def _nullable_entity(inner: Step, what: str) -> Step:
    # KIP-893 nullable structs: int8 marker, -1 null, 1 present.
    def step(buf: bytes, pos: int, end: int) -> int:
        _need(pos, 1, end, what)
        marker = buf[pos]
        if marker == 0xFF:
            return pos + 1
        if marker != 1:
            raise Malformed(f"{what}: bad nullable struct marker {marker}")
        return inner(buf, pos + 1, end)

    return step


def skip_tagged_fields(buf: bytes, pos: int, end: int, known: dict[int, Step] | None) -> int:
    """Walk a tagged-field section; known tags are walked within their declared size."""
    count, pos = read_uvarint(buf, pos, end)
    if count > end - pos:
        raise Malformed(f"{count} tagged fields cannot fit in {end - pos} bytes")
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        field_end = _need(pos, size, end, f"tagged field {tag}")
        if known is not None and tag in known:
            known[tag](buf, pos, field_end)
        pos = field_end
    return pos


def _primitive_step(kafka_type: str, flexible: bool, what: str) -> tuple[Step, int]:
    """Step for one primitive value and its minimum encoded size."""
    if kafka_type in _FIXED_SIZES:
        size = _FIXED_SIZES[kafka_type]
        return _fixed(size, what), size
    if kafka_type in ("string", "bytes", "records"):
        if flexible:
            return _compact_bytes(what), 1
        if kafka_type == "string":
            return _legacy_string(what), 2
        return _legacy_bytes(what), 4
    raise Malformed(f"unsupported kafka_type {kafka_type!r} for {what}")


def _field_step(owner: type[Any], f: Field[Any], flexible: bool) -> tuple[Step, int]:
    what = f"{owner.__name__}.{f.name}"
    kind = classify_field(f)
    if isinstance(kind, PrimitiveField):
        return _primitive_step(get_schema_field_type(f), flexible, what)
    if isinstance(kind, PrimitiveTupleField):
        kafka_type = get_schema_field_type(f)
        if kafka_type in _FIXED_SIZES:
            return _fixed_array(_FIXED_SIZES[kafka_type], flexible, what), 1
        item, item_min = _primitive_step(kafka_type, flexible, what)
        return _array(item, item_min, flexible, what), 1
    if isinstance(kind, EntityField):
        inner = _entity_step(kind.type_)
        if is_optional(f) and get_field_tag(f) is None:
            return _nullable_entity(inner, what), 1
        return inner, 1 if flexible else 0
    if isinstance(kind, EntityTupleField):
        return _array(_entity_step(kind.type_), 1, flexible, what), 1
    raise Malformed(f"unclassifiable field {what}")


_STEPS: dict[type[Any], Step] = {}


def _entity_step(cls: type[Any]) -> Step:
    cached = _STEPS.get(cls)
    if cached is not None:
        return cached
    step = _make_entity_step(cls)
    _STEPS[cls] = step
    return step


def _make_entity_step(cls: type[Any]) -> Step:
    flexible = bool(cls.__flexible__)
    plain: list[Step] = []
    tagged: dict[int, Step] = {}
    for f in fields(cls):
        tag = get_field_tag(f)
        step, _ = _field_step(cls, f, flexible)
        if tag is None:
            plain.append(step)
        else:
            tagged[int(tag)] = step
    steps = tuple(plain)

    if not flexible:

        def walk(buf: bytes, pos: int, end: int) -> int:
            for s in steps:
                pos = s(buf, pos, end)
            return pos

        return walk

    def walk_flexible(buf: bytes, pos: int, end: int) -> int:
        for s in steps:
            pos = s(buf, pos, end)
        return skip_tagged_fields(buf, pos, end, tagged)

    return walk_flexible


def walk_entity(cls: type[Any], buf: bytes, pos: int, end: int) -> int:
    """Walk one encoded ``cls`` at ``pos``; return the end position or raise ``Malformed``."""
    return _entity_step(cls)(buf, pos, end)
