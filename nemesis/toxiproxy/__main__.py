"""``python -m nemesis.toxiproxy``: a Toxiproxy-compatible server.

Accepts ``--listen HOST:PORT`` and also ``toxiproxy-server``'s own flags (``-host``, ``-port``,
``-config``, ``-seed``, ``-version``), so it can stand in wherever that binary is expected.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from nemesis.toxiproxy.api import VERSION
from nemesis.toxiproxy.proxy import split_host_port
from nemesis.toxiproxy.server import DEFAULT_HOST, DEFAULT_PORT, serve


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m nemesis.toxiproxy",
        description="Toxiproxy 2.x compatible TCP fault proxy with an HTTP API (asyncio).",
    )
    parser.add_argument("--listen", help=f"API address HOST:PORT (default {DEFAULT_HOST}:8474)")
    parser.add_argument("-host", "--host", dest="host", help="API host (toxiproxy-server flag)")
    parser.add_argument("-port", "--port", dest="port", type=int, help="API port")
    parser.add_argument(
        "-config",
        "--config",
        dest="config",
        type=Path,
        help="JSON file of proxies to create at startup",
    )
    parser.add_argument(
        "-seed", "--seed", dest="seed", type=int, help="seed for jitter, toxicity and slicing"
    )
    parser.add_argument(
        "--allow-non-loopback",
        action="store_true",
        help="allow binding the API and proxies outside 127.0.0.0/8 and ::1",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("LOG_LEVEL", "warning"),
        help="debug, info, warning (default), error",
    )
    parser.add_argument(
        "-version",
        "--version",
        dest="version",
        action="store_true",
        help="print the version and exit",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.version:
        print(f"toxiproxy-server version {VERSION}")
        return 0
    host, port = DEFAULT_HOST, DEFAULT_PORT
    if args.listen:
        listen_host, listen_port = split_host_port(args.listen)
        host, port = listen_host or DEFAULT_HOST, int(listen_port)
    if args.host:
        host = args.host
    if args.port is not None:
        port = args.port
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        serve(
            host,
            port,
            config=args.config,
            seed=args.seed,
            allow_non_loopback=args.allow_non_loopback,
        )
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
