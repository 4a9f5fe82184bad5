"""Toxiproxy in front of the brokers: link toxics through Toxiproxy's HTTP API.

`ToxiproxyLinks` starts a Toxiproxy API server (`nemesis.toxiproxy.launch`: the real
`toxiproxy-server` when one is installed, else the project's asyncio implementation) and
drives it with the unmodified `toxiproxy-python` client. One proxy per broker, named
`n<i>`, listens on the broker's own 127.0.0.x (another port) and forwards to the broker's
listener; the broker advertises the proxy (`advertised.listeners`), so clients and the other
brokers reach it only through the proxy and a toxic on `n<i>` affects every connection into
broker i. The proxy's own upstream connection comes from 127.0.0.1.

`toxiproxy-python` talks to a module-level server address (`APIConsumer.host/port`): every
call here sets it first, under a lock. It uses `requests`, which honours `HTTP(S)_PROXY`;
`start()` adds 127.0.0.1 to `NO_PROXY` so those calls stay on loopback.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer

from nemesis.toxiproxy import LaunchedToxiproxy, launch

TOXIC_TYPES = ("latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer",
               "limit_data")
_client_lock = threading.Lock()


def _no_proxy_for_loopback() -> None:
    for var in ("NO_PROXY", "no_proxy"):
        have = [h.strip() for h in os.environ.get(var, "").split(",") if h.strip()]
        for h in ("127.0.0.1", "localhost"):
            if h not in have:
                have.append(h)
        os.environ[var] = ",".join(have)


class ToxiproxyLinks:
    def __init__(self, mode: str | None = None) -> None:
        self.mode = mode
        self.server: LaunchedToxiproxy | None = None
        self.listen: dict[str, tuple[str, int]] = {}
        self._toxic_seq = 0

    def start(self) -> ToxiproxyLinks:
        if self.server is None:
            _no_proxy_for_loopback()
            self.server = launch(mode=self.mode)  # type: ignore[arg-type]
        return self

    def stop(self) -> None:
        if self.server is not None:
            server, self.server = self.server, None
            server.stop()

    @property
    def kind(self) -> str | None:
        return self.server.kind if self.server is not None else None

    def _client(self) -> Toxiproxy:
        if self.server is None:
            raise RuntimeError("the toxiproxy server is not running")
        APIConsumer.host, APIConsumer.port = self.server.host, self.server.port
        return Toxiproxy()

    def add_proxy(self, name: str, listen: tuple[str, int], upstream: tuple[str, int]) -> None:
        with _client_lock:
            client = self._client()
            existing = client.get_proxy(name)
            if existing is not None:
                existing.destroy()
            client.create(upstream=f"{upstream[0]}:{upstream[1]}", name=name,
                          listen=f"{listen[0]}:{listen[1]}", enabled=True)
        self.listen[name] = listen

    def add_toxic(self, name: str, toxic_type: str, attributes: Mapping[str, Any], *,
                  stream: str = "downstream", toxicity: float = 1.0) -> str:
        if toxic_type not in TOXIC_TYPES:
            raise ValueError(f"toxic type must be one of {TOXIC_TYPES}, not {toxic_type!r}")
        if stream not in ("upstream", "downstream"):
            raise ValueError(f"stream must be upstream or downstream, not {stream!r}")
        with _client_lock:
            proxy = self._client().get_proxy(name)
            if proxy is None:
                raise KeyError(f"no proxy {name!r}")
            self._toxic_seq += 1
            toxic_name = f"{toxic_type}_{stream}_{self._toxic_seq}"
            proxy.add_toxic(type=toxic_type, attributes=dict(attributes), name=toxic_name,
                            stream=stream, toxicity=toxicity)
        return toxic_name

    def toxics(self, name: str) -> list[str]:
        with _client_lock:
            proxy = self._client().get_proxy(name)
            return sorted(proxy.toxics()) if proxy is not None else []

    def remove_toxics(self, name: str | None = None) -> dict[str, list[str]]:
        """Destroy every toxic (of one proxy, or of all). Returns what was removed."""
        removed: dict[str, list[str]] = {}
        with _client_lock:
            proxies = self._client().proxies()
            for pname in sorted(proxies):
                if name is not None and pname != name:
                    continue
                proxy = proxies[pname]
                gone = sorted(proxy.toxics())
                for t in gone:
                    proxy.destroy_toxic(t)
                if gone:
                    removed[pname] = gone
        return removed
