"""A Toxiproxy 2.x compatible fault-injecting TCP proxy on asyncio.

Speaks Toxiproxy's HTTP API (so the ``toxiproxy-python`` client drives it unchanged) and
implements its toxics: latency, bandwidth, slow_close, timeout, reset_peer, slicer, limit_data.
Disabling a proxy closes its connections and stops listening: a cut link.

Entry points: ``serve(host, port)`` / ``python -m nemesis.toxiproxy --listen 127.0.0.1:8474``,
``ThreadedToxiproxy`` (in-process, background thread), ``launch()`` (child process; the real
``toxiproxy-server`` when one is installed and configured).

Where it knowingly differs from Toxiproxy 2.x:

- listen addresses (proxies and API) must be loopback unless ``allow_non_loopback``; an empty
  host means 127.0.0.1; a refused address is a 400;
- attribute values Toxiproxy crashes or spins on are a 400: slicer ``average_size`` < 1 or
  ``size_variation`` outside ``[0, average_size)``, negative slicer ``delay``, negative
  bandwidth ``rate``;
- an interrupted toxic keeps the data it holds and sends it first when it runs again, instead
  of blocking until it can pass it on, so changing toxics never hangs behind a stalled peer;
- ``reset_peer`` sets SO_LINGER 0 when it fires, also on connections opened before it was
  added (Toxiproxy only does so for connections opened while it exists);
- upstream dials time out after 10 s and each proxy carries at most 1024 connections;
- ``/version`` says ``2.9.0-hiwater``; there is no ``/metrics``.
"""

from nemesis.toxiproxy.api import VERSION, ToxiproxyApi
from nemesis.toxiproxy.errors import ApiError
from nemesis.toxiproxy.launcher import (
    LaunchedToxiproxy,
    ToxiproxyLaunchError,
    find_real_server,
    launch,
)
from nemesis.toxiproxy.server import ThreadedToxiproxy, ToxiproxyServer, serve

__all__ = [
    "VERSION",
    "ApiError",
    "LaunchedToxiproxy",
    "ThreadedToxiproxy",
    "ToxiproxyApi",
    "ToxiproxyLaunchError",
    "ToxiproxyServer",
    "find_real_server",
    "launch",
    "serve",
]
