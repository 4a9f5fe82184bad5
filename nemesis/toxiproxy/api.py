"""Toxiproxy 2.x REST API: routes, JSON shapes and status codes as in ``api.go``.

=========  ==============================  =====================================  ======
method     path                            does                                   status
=========  ==============================  =====================================  ======
GET        /proxies                        all proxies, by name, with toxics      200
POST       /proxies                        create (name, listen, upstream,        201
                                           enabled)
POST       /populate                       create or replace a list of proxies    201
GET        /proxies/{proxy}                one proxy                              200
POST|PATCH /proxies/{proxy}                update listen, upstream, enabled       200
DELETE     /proxies/{proxy}                delete (closes its connections)        204
GET        /proxies/{proxy}/toxics         its toxics                             200
POST       /proxies/{proxy}/toxics         add a toxic                            200
GET        /proxies/{proxy}/toxics/{t}     one toxic                              200
POST|PATCH /proxies/{proxy}/toxics/{t}     update attributes, toxicity            200
DELETE     /proxies/{proxy}/toxics/{t}     remove a toxic                         204
POST       /reset                          enable all proxies, remove all toxics  204
GET        /version                        ``{"version": "..."}``                 200
=========  ==============================  =====================================  ======

Errors are ``{"error": "...", "status": N}`` with 400 (bad body, missing field, invalid
stream or type), 404 (unknown proxy or toxic), 409 (duplicate proxy or toxic), 500 (e.g. the
listen address cannot be bound). Unknown paths give 404, a known path with another method
405, a browser user agent 403, a handler running over 25 s 503, as in Toxiproxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus

from nemesis.toxiproxy import gojson
from nemesis.toxiproxy.errors import (
    MISSING_FIELD,
    TOXIC_NOT_FOUND,
    ApiError,
    ProxyAlreadyStarted,
)
from nemesis.toxiproxy.httpd import Request, Response
from nemesis.toxiproxy.proxy import ProxyCollection, parse_proxy_fields

log = logging.getLogger(__name__)

VERSION = "2.9.0-hiwater"
HANDLER_TIMEOUT_S = 25.0
JSON = "application/json"
TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"
TIMEOUT_BODY = b"<html><head><title>Timeout</title></head><body><h1>Timeout</h1></body></html>"

Params = tuple[str, ...]
Route = Callable[[Request, Params], Awaitable[Response]]


def json_response(status: int, value: object) -> Response:
    return Response(status, gojson.encode(value), JSON)


def error_response(error: ApiError) -> Response:
    # Go's http.Error: text/plain, body plus a newline.
    return Response(error.status, gojson.encode(error.to_json()) + b"\n", TEXT)


def internal_error(exc: BaseException) -> Response:
    return error_response(ApiError(str(exc) or type(exc).__name__, 500))


class ToxiproxyApi:
    """Request handler for the REST API over a ``ProxyCollection``."""

    def __init__(self, collection: ProxyCollection, version: str = VERSION) -> None:
        self.collection = collection
        self.version = version
        self._lock = asyncio.Lock()
        self._background: set[asyncio.Task[Response]] = set()
        self._request_ids = itertools.count(1)
        self._routes: dict[tuple[str, ...], dict[str, Route]] = {
            ("reset",): {"POST": self.reset_state},
            ("proxies",): {"GET": self.proxy_index, "POST": self.proxy_create},
            ("populate",): {"POST": self.populate},
            ("proxies", "*"): {
                "GET": self.proxy_show,
                "POST": self.proxy_update,
                "PATCH": self.proxy_update,
                "DELETE": self.proxy_delete,
            },
            ("proxies", "*", "toxics"): {"GET": self.toxic_index, "POST": self.toxic_create},
            ("proxies", "*", "toxics", "*"): {
                "GET": self.toxic_show,
                "POST": self.toxic_update,
                "PATCH": self.toxic_update,
                "DELETE": self.toxic_delete,
            },
            ("version",): {"GET": self.version_show},
        }

    def _match(self, path: str) -> tuple[dict[str, Route], Params] | None:
        if not path.startswith("/"):
            return None
        segments = path[1:].split("/")
        for pattern, methods in self._routes.items():
            if len(pattern) != len(segments):
                continue
            params: list[str] = []
            for expected, actual in zip(pattern, segments, strict=True):
                if expected == "*":
                    if not actual:
                        break
                    params.append(actual)
                elif expected != actual:
                    break
            else:
                return methods, tuple(params)
        return None

    async def handle(self, request: Request) -> Response:
        request_id = f"{next(self._request_ids):020x}"
        response = await self._dispatch(request)
        response.headers.append(("X-Toxiproxy-Request-Id", request_id))
        return response

    async def _dispatch(self, request: Request) -> Response:
        matched = self._match(request.path)
        if matched is None:
            return Response(HTTPStatus.NOT_FOUND, b"404 page not found\n", TEXT)
        methods, params = matched
        route = methods.get(request.method)
        if route is None:
            return Response(HTTPStatus.METHOD_NOT_ALLOWED)
        if request.header("user-agent").startswith("Mozilla/"):
            return Response(HTTPStatus.FORBIDDEN, b"User agent not allowed\n", TEXT)
        # Like Go's http.TimeoutHandler, a slow handler gets a 503 but runs to completion.
        task = asyncio.get_running_loop().create_task(self._run(route, request, params))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        try:
            async with asyncio.timeout(HANDLER_TIMEOUT_S):
                return await asyncio.shield(task)
        except TimeoutError:
            return Response(HTTPStatus.SERVICE_UNAVAILABLE, TIMEOUT_BODY, HTML)

    async def _run(self, route: Route, request: Request, params: Params) -> Response:
        async with self._lock:
            try:
                return await route(request, params)
            except ApiError as exc:
                return error_response(exc)
            except (OSError, ValueError) as exc:
                return internal_error(exc)
            except Exception as exc:
                log.exception("API handler failed: %s %s", request.method, request.path)
                return internal_error(exc)

    # -- handlers -----------------------------------------------------------------------------

    async def proxy_index(self, request: Request, params: Params) -> Response:
        return json_response(
            HTTPStatus.OK, {proxy.name: proxy.to_json() for proxy in self.collection.proxies()}
        )

    async def reset_state(self, request: Request, params: Params) -> Response:
        for proxy in self.collection.proxies():
            with contextlib.suppress(ProxyAlreadyStarted):
                await proxy.start()
            await proxy.toxics.reset_toxics()
        return Response(HTTPStatus.NO_CONTENT)

    async def proxy_create(self, request: Request, params: Params) -> Response:
        obj = gojson.as_object(gojson.decode(request.body), "toxiproxy.Proxy")
        name, listen, upstream = parse_proxy_fields(obj, None)
        enabled = gojson.get_bool(obj, "enabled", True, "Proxy.enabled")
        if not name:
            raise MISSING_FIELD.joined("name")
        if not upstream:
            raise MISSING_FIELD.joined("upstream")
        proxy = self.collection.new_proxy(name, listen, upstream)
        await self.collection.add(proxy, enabled)
        return json_response(HTTPStatus.CREATED, proxy.to_json())

    async def populate(self, request: Request, params: Params) -> Response:
        try:
            proxies, error = await self.collection.populate(request.body)
        except ApiError as exc:
            proxies, error = [], exc
        if error is not None and not isinstance(error, ApiError):
            error = ApiError(str(error) or type(error).__name__, 500)
        # Go marshals an empty result slice as null.
        listed = [proxy.to_json() for proxy in proxies] or None
        if error is None:
            return json_response(HTTPStatus.CREATED, {"proxies": listed})
        return json_response(error.status, {**error.to_json(), "proxies": listed})

    async def proxy_show(self, request: Request, params: Params) -> Response:
        return json_response(HTTPStatus.OK, self.collection.get(params[0]).to_json())

    async def proxy_update(self, request: Request, params: Params) -> Response:
        proxy = self.collection.get(params[0])
        obj = gojson.as_object(gojson.decode(request.body), "toxiproxy.Proxy")
        _name, listen, upstream = parse_proxy_fields(obj, proxy)
        enabled = gojson.get_bool(obj, "enabled", proxy.enabled, "Proxy.enabled")
        await proxy.update(listen, upstream, enabled)
        return json_response(HTTPStatus.OK, proxy.to_json())

    async def proxy_delete(self, request: Request, params: Params) -> Response:
        await self.collection.remove(params[0])
        return Response(HTTPStatus.NO_CONTENT)

    async def toxic_index(self, request: Request, params: Params) -> Response:
        proxy = self.collection.get(params[0])
        toxics = [wrapper.to_json() for wrapper in proxy.toxics.toxic_array()]
        return json_response(HTTPStatus.OK, toxics)

    async def toxic_create(self, request: Request, params: Params) -> Response:
        proxy = self.collection.get(params[0])
        wrapper = await proxy.toxics.add_toxic_json(request.body)
        return json_response(HTTPStatus.OK, wrapper.to_json())

    async def toxic_show(self, request: Request, params: Params) -> Response:
        proxy = self.collection.get(params[0])
        wrapper = proxy.toxics.find(params[1])
        if wrapper is None:
            raise TOXIC_NOT_FOUND
        return json_response(HTTPStatus.OK, wrapper.to_json())

    async def toxic_update(self, request: Request, params: Params) -> Response:
        proxy = self.collection.get(params[0])
        wrapper = await proxy.toxics.update_toxic_json(params[1], request.body)
        return json_response(HTTPStatus.OK, wrapper.to_json())

    async def toxic_delete(self, request: Request, params: Params) -> Response:
        proxy = self.collection.get(params[0])
        await proxy.toxics.remove_toxic(params[1])
        return Response(HTTPStatus.NO_CONTENT)

    async def version_show(self, request: Request, params: Params) -> Response:
        body = f'{{"version": "{self.version}"}}\n'.encode()
        return Response(HTTPStatus.OK, body, "application/json;charset=utf-8")
