"""Build a kio entity of one exact version from a superset of fields.

kio's dataclasses differ per version (fields appear, disappear, become tagged) and required
fields have no defaults.  Handlers describe a response once, as plain data, and ``build``
keeps what the requested version has:

* keys the version lacks are dropped; a required field that is missing raises ``BuildError``
  (a local bug, found by the per-version sweep tests);
* nested entities and arrays of entities accept mappings or any dataclass instance (recursively);
* ``error_code`` accepts an int, ``*_ms`` timedelta fields accept int milliseconds (under
  kio's name, e.g. ``throttle_time``, or Kafka's, ``throttle_time_ms``), ``datetime_i64``
  accepts int milliseconds since the epoch, arrays accept any iterable;
* ``throttle_time`` defaults to 0 (the only implicit default).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, cast

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
)

__all__ = ["BuildError", "build"]

E = TypeVar("E")

_MISSING = object()
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
# Required in kio, but with an obvious value when a handler does not say (as in Kafka's Java).
_IMPLICIT_DEFAULTS: dict[str, Any] = {"throttle_time": datetime.timedelta(0)}


class BuildError(TypeError):
    """The data cannot make this entity (a required field is missing or has a wrong shape)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kind: str  # "primitive" | "primitive_tuple" | "entity" | "entity_tuple"
    kafka_type: str | None
    nested: type[Any] | None
    required: bool


_PLANS: dict[type[Any], tuple[_FieldPlan, ...]] = {}


def _plan(cls: type[Any]) -> tuple[_FieldPlan, ...]:
    cached = _PLANS.get(cls)
    if cached is None:
        cached = _PLANS[cls] = _make_plan(cls)
    return cached


def _make_plan(cls: type[Any]) -> tuple[_FieldPlan, ...]:
    plans: list[_FieldPlan] = []
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if isinstance(kind, PrimitiveField):
            plans.append(_FieldPlan(f.name, "primitive", get_schema_field_type(f), None, required))
        elif isinstance(kind, PrimitiveTupleField):
            plans.append(
                _FieldPlan(f.name, "primitive_tuple", get_schema_field_type(f), None, required)
            )
        elif isinstance(kind, EntityField):
            plans.append(_FieldPlan(f.name, "entity", None, kind.type_, required))
        elif isinstance(kind, EntityTupleField):
            plans.append(_FieldPlan(f.name, "entity_tuple", None, kind.type_, required))
    return tuple(plans)


def _lookup(src: Any, name: str) -> Any:
    if isinstance(src, Mapping):
        return src.get(name, _MISSING)
    return getattr(src, name, _MISSING)


def _primitive(kafka_type: str | None, value: Any, where: str) -> Any:
    if value is None:
        return None
    if kafka_type == "error_code":
        try:
            return ErrorCode(int(value))
        except ValueError:
            raise BuildError(f"{where}: unknown error code {value!r}") from None
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        return _EPOCH + datetime.timedelta(milliseconds=value)
    return value


def _source(value: Any, where: str) -> Any:
    if isinstance(value, Mapping) or dataclasses.is_dataclass(value):
        return value
    raise BuildError(f"{where}: expected a mapping or a dataclass, got {type(value).__name__}")


def _build(cls: type[Any], src: Any, where: str) -> Any:
    if type(src) is cls:
        return src
    kwargs: dict[str, Any] = {}
    missing: list[str] = []
    for p in _plan(cls):
        value = _lookup(src, p.name)
        if value is _MISSING and p.kafka_type in ("timedelta_i32", "timedelta_i64"):
            value = _lookup(src, p.name + "_ms")
        if value is _MISSING:
            value = _IMPLICIT_DEFAULTS.get(p.name, _MISSING)
        if value is _MISSING:
            if p.required:
                missing.append(p.name)
            continue
        at = f"{where}.{p.name}"
        if p.kind == "primitive":
            kwargs[p.name] = _primitive(p.kafka_type, value, at)
        elif p.kind == "primitive_tuple":
            kwargs[p.name] = None if value is None else tuple(_iter(value, at))
        elif p.kind == "entity":
            nested = cast(type[Any], p.nested)
            kwargs[p.name] = None if value is None else _build(nested, _source(value, at), at)
        else:
            nested = cast(type[Any], p.nested)
            kwargs[p.name] = (
                None
                if value is None
                else tuple(
                    _build(nested, _source(v, f"{at}[{i}]"), f"{at}[{i}]")
                    for i, v in enumerate(_iter(value, at))
                )
            )
    if missing:
        raise BuildError(
            f"{where} ({cls.__module__}) is missing required field(s): {', '.join(missing)}"
        )
    return cls(**kwargs)


def _iter(value: Any, where: str) -> Iterable[Any]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise BuildError(f"{where}: expected an array, got {type(value).__name__}")
    return value


def build(cls: type[E], data: Any = None, /, **fields: Any) -> E:
    """An instance of the kio entity ``cls`` from ``data`` and/or keyword fields.

    ``data`` is a mapping or a dataclass instance (e.g. another version's entity); keyword
    fields override it.  An instance of ``cls`` itself is returned unchanged.
    """
    if data is not None and not fields and not isinstance(data, Mapping):
        result: E = _build(cls, _source(data, cls.__name__), cls.__name__)
        return result
    src: dict[str, Any] = {}
    if data is not None:
        if not isinstance(data, Mapping):
            data = {f.name: getattr(data, f.name) for f in dataclasses.fields(_source(data, ""))}
        src.update(data)
    src.update(fields)
    built: E = _build(cls, src, cls.__name__)
    return built
