"""`hiwater broker --config server.properties`: run one broker until SIGTERM/SIGINT.

SIGTERM and SIGINT shut down cleanly (controlled shutdown, then flush and checkpoints);
SIGKILL is a crash, and the next start recovers the store. With `hiwater.admin.port` set, a
read-only HTTP endpoint serves `GET /replicas` (each replica's role, leader epoch, LEO, HW,
ISR as JSON) for harnesses that check invariants on a live cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from broker.config import BrokerConfig, ConfigError
from broker.runtime import loopstats
from broker.runtime.server import Broker, ListenerUnavailable
from broker.runtime.zk import BrokerIdInUse, ZkUnavailable
from broker.store.errors import StoreError
from broker.store.meta import MetaPropertiesError

log = logging.getLogger("hiwater.broker")

# 3 is hiwater's code for bad input: a bad server.properties, a broker id in use, a listener
# port in use, ZooKeeper out of reach, a log dir of another broker or cluster
EXIT_CONFIG = 3
EXIT_ZOOKEEPER = 3
EXIT_BAD_INPUT = 3
EXIT_FATAL = 4
EXIT_STORAGE = 5
ADMIN_REQUEST_MAX = 8192


async def _admin(broker: Broker, host: str, port: int) -> asyncio.base_events.Server:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5.0)
            # drain headers (bounded)
            total = len(line)
            while total < ADMIN_REQUEST_MAX:
                h = await asyncio.wait_for(reader.readline(), 5.0)
                total += len(h)
                if h in (b"\r\n", b"\n", b""):
                    break
            parts = line.decode("latin-1").split()
            if len(parts) >= 2 and parts[0] == "GET" and parts[1] == "/replicas":
                body, status = broker.replica_states_json(), "200 OK"
            else:
                body, status = b'{"error":"GET /replicas only"}', "404 Not Found"
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(serve, host, port)


def _dump_tasks() -> None:
    """SIGUSR1: log every asyncio task's stack (diagnosing a stuck broker)."""
    import io

    for task in asyncio.all_tasks():
        out = io.StringIO()
        task.print_stack(file=out)
        log.warning("task %s:\n%s", task.get_name(), out.getvalue())


async def run(config: BrokerConfig) -> int:
    broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, _dump_tasks)
    loopstats.maybe_install(loop)
    try:
        await broker.start()
    except ZkUnavailable as e:
        print(f"hiwater broker: cannot reach ZooKeeper: {e}: start it or fix "
              "zookeeper.connect", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            await broker.stop(controlled=False)
        return EXIT_ZOOKEEPER
    except ListenerUnavailable as e:
        print(f"hiwater broker: {e}", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            await broker.stop(controlled=False)
        return EXIT_BAD_INPUT
    except MetaPropertiesError as e:
        # a log dir of another broker or cluster: bad input, one line (Kafka's
        # InconsistentBrokerIdException / InconsistentClusterIdException)
        print(f"hiwater broker: {e}", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            await broker.stop(controlled=False)
        return EXIT_BAD_INPUT
    except BrokerIdInUse as e:
        print(f"hiwater broker: {e}", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            await broker.stop(controlled=False)
        return EXIT_CONFIG
    except (StoreError, OSError) as e:
        if not isinstance(e, StoreError) and broker.logs is not None:
            raise  # not from loading the log dirs (LogManager is the first thing start does)
        # a log dir the broker cannot use: one line naming the path (docs/storage-faults.md)
        print(f"hiwater broker: log dir unusable: {e}: fix or move the named path aside and "
              f"start again (a replica re-fetches from its leader)", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            await broker.stop(controlled=False)
        return EXIT_STORAGE
    admin = None
    if config.hiwater_admin_port is not None:
        admin = await _admin(broker, broker.host, config.hiwater_admin_port)
    print(f"broker {config.broker_id} serving {broker.adv_host}:{broker.adv_port} "
          f"({type(loop).__module__.split('.')[0]} event loop)", flush=True)
    # Everything loaded so far (modules, kio's schema classes, hypothesis pulled in by kio,
    # the recovered logs) lives as long as the broker: out of the collector's sight, so a
    # full (generation 2) collection no longer walks it. Measured under load: each broker
    # stalled 50 to 120 ms in one such collection every few seconds of produce traffic,
    # stalling every request it held (acks=all p99).
    gc.freeze()
    await broker.serve_until(stop)
    if admin is not None:
        admin.close()
    if broker.fatal is not None:
        with contextlib.suppress(Exception):
            await broker.stop(controlled=False)
        print(f"hiwater broker: {broker.fatal}", file=sys.stderr, flush=True)
        # a duplicate broker.id is a configuration error, not a crash of this broker
        return EXIT_CONFIG if isinstance(broker.fatal, BrokerIdInUse) else EXIT_FATAL
    await broker.stop(controlled=True)
    return 0


def main(config_path: str, overrides: dict[str, str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = BrokerConfig.from_file(Path(config_path))
        if overrides:
            config = config.with_overrides(**overrides)
    except OSError as e:
        print(f"hiwater broker: cannot read {config_path}: {e.strerror or e}", file=sys.stderr)
        return EXIT_CONFIG
    except ConfigError as e:
        print(f"hiwater broker: {e}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        loop_factory = event_loop_factory(config.hiwater_event_loop)
    except ConfigError as e:
        print(f"hiwater broker: {e}", file=sys.stderr)
        return EXIT_CONFIG
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(run(config))


def event_loop_factory(
        name: str | None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The loop the broker runs on (`hiwater.event.loop`): uvloop when asked for, or when
    unset and importable; asyncio's default loop otherwise (None). uvloop is libuv with its
    transports and callback machinery in C: the same broker code spends less CPU per request
    in the loop (bench/README.md, "uvloop as the broker's event loop")."""
    if name == "asyncio" or (name is None and os.environ.get("HIWATER_LOOPSTATS")):
        return None  # unset and asked for loop diagnostics: they instrument asyncio's loop
    try:
        import uvloop
    except ImportError as e:
        if name is None:
            return None
        raise ConfigError("hiwater.event.loop", name,
                          f"uvloop cannot be imported ({e}): install it or set asyncio") from e
    return uvloop.new_event_loop


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--config":
        print("usage: python -m broker.runtime.main --config server.properties", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    sys.exit(main(sys.argv[2]))
