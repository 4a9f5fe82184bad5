"""A Toxiproxy 2.x compatible fault-injecting TCP proxy on asyncio.

Speaks Toxiproxy's HTTP API (so the ``toxiproxy-python`` client drives it unchanged) and
implements its toxics: latency, bandwidth, slow_close, timeout, reset_peer, slicer, limit_data.
Disabling a proxy closes its connections and stops listening: a cut link.

Entry points: ``serve(host, port)`` / ``python -m nemesis.toxiproxy --listen 127.0.0.1:8474``,
``ThreadedToxiproxy`` (in-process, background thread), ``launch()`` (child process; the real
``toxiproxy-server`` when one is installed and configured).
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
