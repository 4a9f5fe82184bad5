"""ApiVersions responses built from an ``ApiTable`` (the answer is a function of the table)."""

from __future__ import annotations

import datetime
import importlib
import re
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.protocol import ResponsePayload

from .apis import API_TABLE, ApiKey, ApiTable
from .response import encode_response, response_class

__all__ = [
    "api_versions_response",
    "client_software_valid",
    "unsupported_api_versions_frame",
]

_SOFTWARE_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_versions_response(
    version: int,
    table: ApiTable = API_TABLE,
    error_code: ErrorCode = ErrorCode.none,
    throttle_time_ms: int = 0,
) -> ResponsePayload:
    """The ApiVersionsResponse body of ``version`` advertising ``table``."""
    cls = response_class(int(ApiKey.API_VERSIONS), version)
    api_version_cls = importlib.import_module(cls.__module__).ApiVersion
    keys = tuple(
        api_version_cls(
            api_key=int(s.api_key), min_version=s.min_version, max_version=s.max_version
        )
        for s in table
    )
    kwargs: dict[str, Any] = {"error_code": error_code, "api_keys": keys}
    if version >= 1:
        kwargs["throttle_time"] = datetime.timedelta(milliseconds=throttle_time_ms)
    return cls(**kwargs)


def unsupported_api_versions_frame(correlation_id: int, table: ApiTable = API_TABLE) -> bytes:
    """Kafka's answer to an ApiVersions request above the supported maximum (KIP-511).

    The body is ApiVersionsResponse **v0** with UNSUPPORTED_VERSION (35) and the full table,
    under response header v0, so any client can read it and retry with ``min(its, our max)``.
    """
    body = api_versions_response(0, table, ErrorCode.unsupported_version)
    return encode_response(correlation_id, body)


def client_software_valid(name: str, version: str) -> bool:
    """ApiVersions v3+ ``client_software_name``/``version`` check (Kafka: INVALID_REQUEST if not).

    Kafka's ``ApiVersionsRequest.isValid`` pattern, ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``.
    """
    return bool(_SOFTWARE_RE.fullmatch(name)) and bool(_SOFTWARE_RE.fullmatch(version))
