"""`meta.properties`: which broker of which cluster a log dir belongs to (Kafka's format for
ZooKeeper mode: `version=0`, `broker.id`, `cluster.id`).

Kafka's rules (KafkaServer.startup, BrokerMetadataCheckpoint), followed here:

- every log dir gets the file, written crash-safely (temp, fsync, rename, dir fsync), once the
  broker knows the cluster id from ZooKeeper's `/cluster/id` (created by the first broker);
  a dir without it (a new one, or one written before this file existed) gets it written;
- a dir whose file names another `broker.id` refuses the start
  (`InconsistentBrokerIdException`): the data was moved, or the config is wrong;
- a dir whose file names another `cluster.id` refuses the start
  (`InconsistentClusterIdException`): the broker is pointed at the wrong ZooKeeper, or the
  dir is another cluster's;
- a file that does not parse refuses the start (its identity cannot be checked).

Better than Kafka: a file that holds no `key=value` line at all (empty, or zeroed) names no
identity, like a missing one, so it is written again with a warning instead of failing the
start. The broker id is checked before any log is loaded; the cluster id once ZooKeeper
answered, before the broker registers. Each refusal is one line naming the file and what to do.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from broker.store.errors import StoreError
from broker.store.fs import FS, read_whole, write_atomic

META_PROPERTIES = "meta.properties"
META_VERSION = "0"

log = logging.getLogger("hiwater.store")


class MetaPropertiesError(StoreError):
    """A log dir belongs to another broker or cluster, or its identity file is unreadable:
    the broker refuses to start (bad input, not a broken disk: exit 3)."""


class InconsistentBrokerIdError(MetaPropertiesError):
    pass


class InconsistentClusterIdError(MetaPropertiesError):
    pass


def _parse(text: str) -> dict[str, str]:
    """Java properties, the subset Kafka writes: `#` comments, `key=value` lines."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"a line without '=': {line[:40]!r}")
        out[key.strip()] = value.strip()
    return out


def read_meta(fs: FS, d: Path) -> dict[str, str] | None:
    """The dir's identity as {"broker.id", "cluster.id"}, or None when the file is missing
    or names nothing (empty, zeroed); MetaPropertiesError when it does not parse."""
    path = d / META_PROPERTIES
    if not fs.exists(path):
        return None
    raw = read_whole(fs, path)
    if not raw.strip(b"\x00 \t\r\n"):
        return None
    fix = (f"if {d} is this broker's, delete {path} and start again (it is written anew); "
           "else point log.dirs elsewhere")
    try:
        props = _parse(raw.decode("utf-8"))
        if props.get("version") != META_VERSION:
            raise ValueError(f"version {props.get('version')!r}, expected {META_VERSION}")
        int(props["broker.id"])
        if not props.get("cluster.id"):
            raise ValueError("no cluster.id")
    except (UnicodeDecodeError, ValueError, KeyError) as e:
        why = f"no {e.args[0]}" if isinstance(e, KeyError) else str(e).splitlines()[0]
        raise MetaPropertiesError(f"{path} does not parse ({why}): {fix}") from None
    return props


def check_broker_id(fs: FS, dirs: Sequence[Path], broker_id: int) -> None:
    """Before loading any log: every dir that names a broker names this one."""
    for d in dirs:
        props = read_meta(fs, d)
        if props is not None and int(props["broker.id"]) != broker_id:
            raise InconsistentBrokerIdError(
                f"{d / META_PROPERTIES}: configured broker.id {broker_id} does not match "
                f"stored broker.id {props['broker.id']}: if the data was moved here, set "
                f"broker.id={props['broker.id']}; for a new broker, empty {d} (log.dirs)")


def check_and_write(fs: FS, dirs: Sequence[Path], broker_id: int, cluster_id: str) -> list[str]:
    """Once the cluster id is known: refuse a dir of another cluster (or broker); write the
    file where it is missing or names nothing. Returns the warnings (also logged)."""
    warnings = []
    written = []
    for d in dirs:
        props = read_meta(fs, d)
        path = d / META_PROPERTIES
        if props is None:
            written.append(d)
            if fs.exists(path):
                warnings.append(f"{path} names no broker or cluster (empty or zeroed): "
                                f"written again for broker {broker_id} of cluster {cluster_id}")
            continue
        if props["cluster.id"] != cluster_id:
            raise InconsistentClusterIdError(
                f"{path}: cluster.id {props['cluster.id']} does not match ZooKeeper's "
                f"{cluster_id}: the broker is trying to join the wrong cluster (check "
                f"zookeeper.connect), or {d} is another cluster's (point log.dirs elsewhere)")
        if int(props["broker.id"]) != broker_id:
            check_broker_id(fs, [d], broker_id)
    for w in warnings:
        log.warning("%s", w)
    for d in written:
        write_meta(fs, d, broker_id, cluster_id)
    return warnings


def render_meta(broker_id: int, cluster_id: str) -> bytes:
    return (f"#hiwater: which broker of which cluster this log dir belongs to\n"
            f"version={META_VERSION}\nbroker.id={broker_id}\n"
            f"cluster.id={cluster_id}\n").encode()


def write_meta(fs: FS, d: Path, broker_id: int, cluster_id: str) -> None:
    write_atomic(fs, d / META_PROPERTIES, render_meta(broker_id, cluster_id))


__all__ = ["META_PROPERTIES", "InconsistentBrokerIdError", "InconsistentClusterIdError",
           "MetaPropertiesError", "check_and_write", "check_broker_id", "read_meta",
           "render_meta", "write_meta"]
