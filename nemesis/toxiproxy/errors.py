"""API errors with the messages and status codes of Toxiproxy 2.x (``api.go``)."""

from __future__ import annotations

from http import HTTPStatus


class ApiError(Exception):
    """An error the HTTP API reports as ``{"error": message, "status": code}``."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def joined(self, detail: str) -> ApiError:
        """Toxiproxy's ``joinError``: ``"<message>: <detail>"`` with the same status."""
        return ApiError(f"{self.message}: {detail}", self.status)

    def to_json(self) -> dict[str, object]:
        return {"error": self.message, "status": self.status}


class ProxyAlreadyStarted(Exception):
    """``ErrProxyAlreadyStarted``: starting a proxy that is already listening."""


BAD_REQUEST_BODY = ApiError("bad request body", HTTPStatus.BAD_REQUEST)
MISSING_FIELD = ApiError("missing required field", HTTPStatus.BAD_REQUEST)
PROXY_NOT_FOUND = ApiError("proxy not found", HTTPStatus.NOT_FOUND)
PROXY_ALREADY_EXISTS = ApiError("proxy already exists", HTTPStatus.CONFLICT)
INVALID_STREAM = ApiError(
    "stream was invalid, can be either upstream or downstream", HTTPStatus.BAD_REQUEST
)
INVALID_TOXIC_TYPE = ApiError("invalid toxic type", HTTPStatus.BAD_REQUEST)
TOXIC_ALREADY_EXISTS = ApiError("toxic already exists", HTTPStatus.CONFLICT)
TOXIC_NOT_FOUND = ApiError("toxic not found", HTTPStatus.NOT_FOUND)
# Not in Toxiproxy: hiwater refuses to bind outside loopback unless told otherwise.
NON_LOOPBACK_LISTEN = ApiError(
    "listen address must be a loopback address (127.0.0.0/8 or ::1)", HTTPStatus.BAD_REQUEST
)
# Not in Toxiproxy, where these attribute values crash or wedge the server (an unbounded
# recursion in the slicer, a negative slice bound in the bandwidth toxic).
INVALID_ATTRIBUTE = ApiError("invalid toxic attribute", HTTPStatus.BAD_REQUEST)
