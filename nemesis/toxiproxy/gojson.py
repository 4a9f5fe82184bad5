"""Decoding request bodies the way Go's ``encoding/json`` decodes them into Toxiproxy's structs.

What matters for compatibility: only the first JSON value of a body is read (trailing bytes are
ignored), ``null`` leaves a field as it was, object keys match field names case-insensitively
(the last matching key wins), unknown keys are ignored, an integer field refuses ``1.5`` or
``1e3`` or ``true``, and ``NaN``/``Infinity`` are not JSON.
"""

from __future__ import annotations

import json
from typing import Final

from nemesis.toxiproxy.errors import BAD_REQUEST_BODY, ApiError

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
FLOAT32_MAX: Final = 3.4028234663852886e38

_DECODER: Final = json.JSONDecoder(parse_constant=lambda name: _reject_constant(name))


def _reject_constant(name: str) -> object:
    raise ValueError(f"invalid character '{name[0]}' looking for beginning of value")


def _go_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def bad_body(detail: str) -> ApiError:
    return BAD_REQUEST_BODY.joined(detail)


def decode(body: bytes) -> object:
    """The first JSON value in ``body``; ``ApiError`` 400 if there is none."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_body(f"invalid UTF-8 in request body: {exc.reason}") from exc
    text = text.lstrip(" \t\r\n")
    if not text:
        raise bad_body("EOF")
    try:
        value, _end = _DECODER.raw_decode(text)
    except ValueError as exc:
        raise bad_body(str(exc)) from exc
    return value


def as_object(value: object, struct: str) -> dict[str, object]:
    """A JSON object decoded into a Go struct: ``null`` is an empty object."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_body(f"json: cannot unmarshal {_go_type(value)} into Go value of type {struct}")
    return value


def lookup(obj: dict[str, object], field: str) -> tuple[bool, object]:
    """(present, value) of ``field``; keys match case-insensitively and the last match wins."""
    found = False
    value: object = None
    folded = field.casefold()
    for key, item in obj.items():
        if key == field or key.casefold() == folded:
            found = True
            value = item
    return found, value


def _mismatch(value: object, where: str, go_type: str) -> ApiError:
    return bad_body(
        f"json: cannot unmarshal {_go_type(value)} into Go struct field {where} of type {go_type}"
    )


def get_str(obj: dict[str, object], field: str, default: str, where: str) -> str:
    present, value = lookup(obj, field)
    if not present or value is None:
        return default
    if not isinstance(value, str):
        raise _mismatch(value, where, "string")
    return value


def get_bool(obj: dict[str, object], field: str, default: bool, where: str) -> bool:
    present, value = lookup(obj, field)
    if not present or value is None:
        return default
    if not isinstance(value, bool):
        raise _mismatch(value, where, "bool")
    return value


def get_int64(obj: dict[str, object], field: str, default: int, where: str) -> int:
    present, value = lookup(obj, field)
    if not present or value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float):
            raise bad_body(
                f"json: cannot unmarshal number {value!r} into Go struct field {where}"
                " of type int64"
            )
        raise _mismatch(value, where, "int64")
    if not INT64_MIN <= value <= INT64_MAX:
        raise bad_body(
            f"json: cannot unmarshal number {value} into Go struct field {where} of type int64"
        )
    return value


def get_float32(obj: dict[str, object], field: str, default: float, where: str) -> float:
    present, value = lookup(obj, field)
    if not present or value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _mismatch(value, where, "float32")
    number = float(value)
    if abs(number) > FLOAT32_MAX:
        raise bad_body(
            f"json: cannot unmarshal number {value} into Go struct field {where} of type float32"
        )
    return number


def encode(value: object) -> bytes:
    """Compact JSON like Go's ``json.Marshal`` (integral floats are written without ``.0``)."""
    text = json.dumps(_go_numbers(value), separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in _HTML_ESCAPES:
        text = text.replace(raw, escaped)
    return text.encode()


# Go escapes these inside strings; outside strings they cannot occur in JSON text.
_HTML_ESCAPES: Final = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def _go_numbers(value: object) -> object:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _go_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_go_numbers(item) for item in value]
    return value
