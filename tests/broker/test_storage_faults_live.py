"""The storage fault atlas against real brokers (issue #16), with confluent-kafka as the client:
one row per file kind of docs/storage-faults.md, and replicated safety.

A 3-broker cluster (RF 3, min.insync.replicas 2) takes acks=all idempotent writes to three
partitions and a consumer group commit; one broker is killed (SIGKILL) or stopped cleanly
(SIGTERM) and, while it is down,
one file of each kind in its data dir is damaged: a sealed segment (zeroed 4 KiB page), an
active segment (torn tail), an offset index and a leader-epoch-checkpoint (garbage), the
high-watermark checkpoint (garbage) and the group's `__consumer_offsets` segment (torn tail).

It must start (no traceback), say in its log which files it repaired, rejoin every partition
as a follower, truncate and fetch again what it lost, and get back in the ISR only with the
leader's records. Then the two other brokers are killed: it becomes the leader of every
partition, and every acknowledged record is read back from it, at its acknowledged offset.
It never leads with fewer records than the high watermark implied."""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTp

from broker.runtime.cluster import LocalCluster
from broker.store.checkpoint import read_offsets
from broker.store.fs import RealFS

from .faults_support import (
    ProducerThread,
    admin,
    create_topic,
    read_partition,
    replica,
    wait_for,
)
from .wire_live_support import discard_cluster, start_cluster_patiently

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

SESSION_MS = 4000
TOPIC = "atlas"
PARTITIONS = 3
GROUP = "atlas-g"


@pytest.fixture
def atlas_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    overrides = {"zookeeper.session.timeout.ms": str(SESSION_MS), "log.segment.bytes": "1024"}
    c = start_cluster_patiently(tmp_path / "cluster", 3, **overrides)
    try:
        yield c
    finally:
        discard_cluster(c)


def _segments(d: Path) -> list[Path]:
    return sorted(d.glob("*.log"))


def _damage(data: Path) -> list[tuple[str, ...]]:
    """One file of each kind; returns what the broker's log must mention, each as words that
    one line must hold (the directory and the file)."""
    named = []
    p0, p1, p2 = (data / f"{TOPIC}-{p}" for p in range(PARTITIONS))
    sealed = _segments(p0)[0]
    assert len(_segments(p0)) > 2, _segments(p0)
    raw = sealed.read_bytes()
    sealed.write_bytes(bytes(min(len(raw), 4096)) + raw[4096:])  # zeroed 4 KiB page
    named.append((p0.name, sealed.name))
    active = _segments(p1)[-1]
    raw = active.read_bytes()
    assert len(raw) > 7
    active.write_bytes(raw[:-7])  # torn tail
    named.append((p1.name, active.name))
    # garbage in an index: named when its segment is below the recovery point (loaded);
    # past it the segment is rescanned and the index rewritten anyway (the atlas: "intact")
    rp = read_offsets(RealFS(), data / "recovery-point-offset-checkpoint").get((TOPIC, 2), 0)
    segs = _segments(p2)
    loaded = [s for s, nxt in pairwise(segs) if int(nxt.stem) <= rp]
    index = (loaded or segs)[0].with_suffix(".index")
    index.write_bytes(b"\x7f" * 13)  # garbage: not a whole number of entries
    if loaded:
        named.append((p2.name, index.name))
    (p2 / "leader-epoch-checkpoint").write_bytes(b"\x00garbage\xff\n")
    named.append((p2.name, "leader-epoch-checkpoint"))
    (data / "replication-offset-checkpoint").write_bytes(b"0\n3\nnot a checkpoint\n")
    named.append(("replication-offset-checkpoint",))
    offsets = [d for d in data.glob("__consumer_offsets-*") if any(
        s.stat().st_size for s in _segments(d))]
    assert offsets, "the group commit wrote no __consumer_offsets segment"
    seg = max((s for s in _segments(offsets[0]) if s.stat().st_size), key=lambda s: s.name)
    raw = seg.read_bytes()
    seg.write_bytes(raw[:-7])  # torn tail
    named.append((offsets[0].name, seg.name))
    return named


def _commit(c: LocalCluster) -> None:
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        def committed() -> bool:
            consumer.commit(offsets=[CkTp(TOPIC, 0, 5)], asynchronous=False)
            got = consumer.committed([CkTp(TOPIC, 0)], timeout=5)
            return got[0].offset == 5
        wait_for(committed, 60, "a group commit")
    finally:
        consumer.close()


def _in_sync(c: LocalCluster, victim: int, leaders: list[int]) -> bool:
    for p in range(PARTITIONS):
        lead = None
        for i in leaders:
            r = replica(admin(c, i), TOPIC, p)
            if r is not None and r["role"] == "leader":
                lead = r
        back = replica(admin(c, victim), TOPIC, p)
        if lead is None or back is None or back["role"] != "follower":
            return False
        if victim not in lead["isr"] or back["log_end_offset"] != lead["log_end_offset"]:
            return False
    return True


def _views(c: LocalCluster) -> str:
    out = []
    for i in sorted(c.nodes):
        try:
            reps = [(p, (r := replica(admin(c, i), TOPIC, p)) and
                     {k: r.get(k) for k in ("role", "leader", "leader_epoch", "isr",
                                            "log_end_offset", "high_watermark")})
                    for p in range(PARTITIONS)]
        except (OSError, AssertionError, KeyError, ValueError) as e:
            reps = [(-1, repr(e))]
        out.append(f"--- broker {i}: {reps}\n{c.log_tail(i, 40)}")
    return "\n".join(out)


def _caught_up(c: LocalCluster, victim: int) -> bool:
    """The victim holds every partition's whole log (its leader's log end), so there are
    sealed segments to damage: acks=all needs only min.insync.replicas, and on a busy machine
    a follower can be out of the ISR when the producer stops."""
    for p in range(PARTITIONS):
        ends = {i: r for i in sorted(c.nodes) if (r := replica(admin(c, i), TOPIC, p))}
        lead = [r for r in ends.values() if r["role"] == "leader"]
        back = ends.get(victim)
        if len(lead) != 1 or back is None or back["log_end_offset"] != lead[0]["log_end_offset"]:
            return False
    return True


@pytest.mark.timeout(300)
@pytest.mark.parametrize("stop", ["kill", "clean"])
def test_a_broker_with_damaged_files_rejoins_refetches_and_loses_nothing(
        atlas_cluster: LocalCluster, stop: str, record_property: Any) -> None:
    c = atlas_cluster
    t0 = time.monotonic()
    create_topic(c, TOPIC, PARTITIONS)
    prod = ProducerThread(c.bootstrap, TOPIC, list(range(PARTITIONS)), interval_s=0.002).start()
    try:
        prod.wait_acked(600, 60, "before the fault")
    finally:
        prod.stop()
    assert not prod.fatal and not prod.failed, prod.summary()
    _commit(c)
    victim = c.controller() % 3 + 1  # any broker but the controller
    others = [i for i in sorted(c.nodes) if i != victim]
    wait_for(lambda: _caught_up(c, victim), 90, f"broker {victim} to hold every log in full")

    if stop == "kill":
        c.kill(victim)
    else:
        c.stop_broker(victim)  # SIGTERM: controlled shutdown, flush, every checkpoint
    data = c.nodes[victim].data_dir
    named = _damage(data)
    log_before = c.nodes[victim].log_path.read_text(errors="replace")
    c.start_broker(victim)
    try:
        wait_for(lambda: _in_sync(c, victim, others), 90,
                 f"broker {victim} to re-fetch and rejoin the ISR of every partition")
    except AssertionError as e:  # what each broker holds, and what they logged (CI, stop 24)
        raise AssertionError(f"{e}\n{_views(c)}") from None
    log = c.nodes[victim].log_path.read_text(errors="replace")[len(log_before):]
    assert "Traceback" not in log, log[-3000:]
    lines = log.splitlines()
    missing = [n for n in named if not any(all(w in line for w in n) for line in lines)]
    assert not missing, f"broker {victim}'s log does not name {missing}:\n{log[-4000:]}"

    # the repaired broker alone: it must lead every partition with every acknowledged record
    for i in others:
        c.kill(i)

    def leads_all() -> bool:
        view = admin(c, victim)
        return all((r := replica(view, TOPIC, p)) is not None and r["role"] == "leader"
                   for p in range(PARTITIONS))

    wait_for(leads_all, 60, f"broker {victim} to lead every partition")
    for p in range(PARTITIONS):
        records = dict(read_partition(c, TOPIC, p, timeout_s=60))
        acked = {v: o for v, (pp, o) in prod.acked.items() if pp == p}
        wrong = {v: o for v, o in acked.items() if records.get(o) != v}
        assert not wrong, f"partition {p}: {len(wrong)} acknowledged records lost or moved"
    record_property("seconds", round(time.monotonic() - t0, 1))
    print(f"broker {victim}: repaired {named}; {prod.summary()}; "
          f"{time.monotonic() - t0:.1f}s")
