"""Checks a campaign passes before it starts anything (issue #16).

Every check raises `ValueError` with one line that names the option and what is allowed, so
`hiwater campaign` can exit 3 with that line before a ZooKeeper, a broker or a run directory
exists:

- `check_options(opts)`: the values themselves (`CampaignOptions.__post_init__` calls it);
- `check_bootstrap_reachable(bootstrap)`: some bootstrap server accepts a TCP connection,
  answered within seconds (an unreachable cluster is not left to a 30 s client time-out);
- `check_zookeeper()`: the local cluster's ZooKeeper is installed.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.campaign import CampaignOptions

ACKS = ("all", "-1", "1", "0")
SUB_VIA = ("assign", "subscribe")
MAX_BROKERS = 200  # broker i listens on 127.0.0.(10 + i)


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]` as (host, port) pairs; ValueError when malformed."""
    out: list[tuple[str, int]] = []
    for hp in bootstrap.split(","):
        host, _, port = hp.strip().rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"--bootstrap takes host:port[,host:port...] with ports "
                             f"1-65535; got {bootstrap!r}")
        out.append((host, int(port)))
    return out


def _nemesis_names() -> tuple[str, ...]:
    from nemesis.packages import PACKAGE_BUILDERS

    return (*sorted(PACKAGE_BUILDERS), "standard", "none")


def _bug_names() -> tuple[str, ...]:
    from core.config import Bugs

    return tuple(f.name for f in dataclasses.fields(Bugs))


def check_options(opts: CampaignOptions) -> None:
    """The option values (not the environment); raises ValueError with one line."""
    local = opts.bootstrap is None
    if opts.acks not in ACKS:
        raise ValueError(f"--acks must be all, 1 or 0 (or -1); got {opts.acks!r}")
    if opts.idempotence and opts.acks not in ("all", "-1"):
        raise ValueError(f"--acks {opts.acks} needs --no-idempotence (idempotent producers "
                         "need acks=all)")
    if opts.target_leader and opts.workload != "queue":
        raise ValueError("--target-leader aims at a queue partition: it needs --workload queue")
    known = _nemesis_names()
    for name in opts.nemesis:
        for part in name.split(","):
            if part.strip() not in (*known, "all", ""):
                raise ValueError(f"--nemesis: unknown fault {part.strip()!r}; "
                                 f"known: {', '.join(known)}")
    if not 1 <= opts.brokers <= MAX_BROKERS:
        raise ValueError(f"--brokers must be 1..{MAX_BROKERS}; got {opts.brokers}")
    if opts.replication_factor < 1:
        raise ValueError(f"--rf must be at least 1; got {opts.replication_factor}")
    if local and opts.replication_factor > opts.brokers:
        raise ValueError(f"--rf {opts.replication_factor} is above --brokers {opts.brokers}: "
                         "a replica needs a broker of its own")
    if opts.min_insync_replicas < 1:
        raise ValueError(f"--min-isr must be at least 1; got {opts.min_insync_replicas}")
    if local and opts.min_insync_replicas > opts.replication_factor:
        raise ValueError(f"--min-isr {opts.min_insync_replicas} is above --rf "
                         f"{opts.replication_factor}: no acks=all write could succeed")
    if opts.concurrency < 1:
        raise ValueError(f"--concurrency must be at least 1; got {opts.concurrency}")
    if not opts.rate > 0:
        raise ValueError(f"--rate must be above 0; got {opts.rate}")
    if not opts.nemesis_interval_s > 0:
        raise ValueError(f"--nemesis-interval must be above 0; got {opts.nemesis_interval_s}")
    if opts.rotate_period_s is not None and not opts.rotate_period_s > 0:
        raise ValueError(f"--rotate must be above 0; got {opts.rotate_period_s}")
    if not opts.sub_via or any(s not in SUB_VIA for s in opts.sub_via):
        raise ValueError(f"--sub-via takes assign, subscribe or both; got "
                         f"{','.join(opts.sub_via)!r}")
    if opts.key_count < 1 or opts.partitions < 1:
        raise ValueError("key count and partitions must be at least 1")
    if (not opts.name or opts.name in (".", "..", "latest") or "/" in opts.name
            or "\\" in opts.name):
        raise ValueError(f"--name must be a plain directory name (not latest); "
                         f"got {opts.name!r}")
    if Path(opts.store).exists() and not Path(opts.store).is_dir():
        raise ValueError(f"--store {opts.store} exists and is not a directory")
    if not local:
        parse_bootstrap(opts.bootstrap or "")
        for what, given in (("--bug", opts.bugs), ("--override", opts.broker_overrides),
                            ("--scenario", opts.scenario)):
            if given:
                raise ValueError(f"{what} needs the local cluster, not --bootstrap")
        return
    bugs = _bug_names()
    for bug in opts.bugs:
        if bug not in bugs:
            raise ValueError(f"--bug: {bug.replace('_', '-')!r} is not a bug switch of the "
                             f"broker; known: {', '.join(b.replace('_', '-') for b in bugs)}")
    _check_server_properties(opts)


# server.properties keys the local cluster sets for each broker itself (an override would give
# every broker the same listener port, data dir or id)
LOCAL_KEYS = ("broker.id", "listeners", "advertised.listeners", "log.dirs", "log.dir",
              "zookeeper.connect", "hiwater.admin.port", "port", "host.name")


def check_local_overrides(overrides: dict[str, str]) -> None:
    """`--override` pairs for a local cluster: no key it sets per broker, and values every
    broker would accept."""
    for key in overrides:
        if key.strip() in LOCAL_KEYS:
            raise ValueError(f"--override {key.strip()}: the local cluster sets it for each "
                             "broker (listeners on free ports of 127.0.0.x, one data dir "
                             "each); leave it out")
    _check_properties({k.strip(): v.strip() for k, v in overrides.items()})


def _check_server_properties(opts: CampaignOptions) -> None:
    """The brokers would accept their server.properties (overrides included)."""
    check_local_overrides(dict(opts.broker_overrides))
    props = dict(opts.server_properties())
    if opts.bugs:
        props["hiwater.bugs"] = ",".join(opts.bugs)
    _check_properties(props)


def _check_properties(given: dict[str, str]) -> None:
    from broker.config import BrokerConfig, ConfigError

    props = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181",
             "listeners": "PLAINTEXT://127.0.0.11:9092", "log.dirs": "/nonexistent",
             **given}
    quiet = logging.getLogger("broker.config")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "unknown keys" is the broker's to say, in its log
    try:
        BrokerConfig.from_properties(props)
    except ConfigError as e:
        raise ValueError(f"--override: {e}") from None
    finally:
        quiet.setLevel(level)


def check_bootstrap_reachable(bootstrap: str, timeout_s: float = 8.0) -> None:
    """Some bootstrap server accepts a TCP connection within `timeout_s` in all."""
    addresses = parse_bootstrap(bootstrap)
    end = time.monotonic() + timeout_s
    why: list[str] = []
    for host, port in addresses:
        left = end - time.monotonic()
        if left <= 0:
            why.append(f"{host}:{port} (not tried: out of time)")
            continue
        try:
            with socket.create_connection((host, port), timeout=min(3.0, left)):
                return
        except OSError as e:
            why.append(f"{host}:{port} ({e.strerror or type(e).__name__})")
    raise ValueError(f"--bootstrap: no server reachable: {'; '.join(why)}")


def check_zookeeper() -> None:
    import shutil

    from broker.runtime.zkserver import INSTALL_HINT, ZKSERVER_SH, ZOOKEEPER_JAR

    if not (ZKSERVER_SH.exists() and ZOOKEEPER_JAR.exists()):
        raise ValueError(f"ZooKeeper is not installed (the local cluster needs it): "
                         f"{INSTALL_HINT}")
    if shutil.which("java") is None:
        raise ValueError("Java is not installed or not on PATH (ZooKeeper needs it): "
                         "apt-get install -y default-jre-headless (or run scripts/setup as "
                         "root)")


def check_listen_address(address: str, what: str) -> None:
    """`host:port` is free to listen on (nobody holds it now)."""
    import errno

    host, _, port_text = address.strip().rpartition(":")
    host = host.strip("[]")
    if not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{what} takes one host:port with a port 1-65535; got {address!r}")
    port = int(port_text)
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise ValueError(f"{what} {host}:{port}: the port is in use by another process: "
                             "stop it or choose another port") from None
        raise ValueError(f"{what} {host}:{port}: cannot listen there: "
                         f"{e.strerror or e}") from None


__all__ = ["LOCAL_KEYS", "check_bootstrap_reachable", "check_listen_address",
           "check_local_overrides", "check_options", "check_zookeeper", "parse_bootstrap"]
