"""The workloads against a live 3-broker cluster, without faults: the queue workload (main
phase + final polls) must check valid under the default policy with every acknowledged send
read back in the final phase; the register workload must be linearizable; final reads whose
target lies past a partition's end stop at the confirmed end (both clients).

One cluster for the module (about 5 s to start); each run is bounded by its deadline, the
send/poll timeouts and the final phase's time limit."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.runtime.cluster import LocalCluster
from harness.checkers import check
from harness.clients import open_client
from harness.history import JsonlWriter, Op, read_jsonl
from harness.workloads.queue import QueueOpts, QueueRun, final_phase, run_queue
from harness.workloads.recorder import Recorder
from harness.workloads.register import RegisterOpts, run_register
from tests.broker.conftest import start_cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # a small __consumer_offsets: the subscribe test's group starts sooner
    c = start_cluster(tmp_path_factory.mktemp("workloads-cluster"), 3,
                      **{"offsets.topic.num.partitions": "3"})
    try:
        yield c
    finally:
        # nothing to keep: kill -9 is much faster than three controlled shutdowns
        for i in sorted(c.nodes):
            c.kill(i)
        c.stop()


def acked_sends(ops: list[Op]) -> set[tuple[int, int]]:
    return {(m[1], m[2][1]) for op in ops if op.type == "ok" and op.f in ("send", "txn")
            for m in op.value if m[0] == "send"}


def polled(ops: list[Op]) -> set[tuple[int, int]]:
    return {(k, v) for op in ops if op.type == "ok" and op.f in ("poll", "txn")
            for m in op.value if m[0] == "poll" for k, pairs in m[1].items()
            for _o, v in pairs}


def summary(result: dict[str, Any]) -> str:
    q = result.get("queue", {})
    return repr({k: q.get(k) for k in ("valid?", "bad_anomaly_types", "anomaly_types")}) + \
        repr({k: q.get("anomalies", {}).get(k, [])[:3] for k in q.get("bad_anomaly_types", [])})


def run(cluster: LocalCluster, tmp_path: Path, opts: QueueOpts, main_s: float
        ) -> tuple[list[Op], QueueRun]:
    writer = JsonlWriter(tmp_path / "history.jsonl")
    rec = Recorder(writer, concurrency=opts.concurrency)
    try:
        r = run_queue(cluster.bootstrap, opts, rec, threading.Event(),
                      time.monotonic() + main_s)
    finally:
        writer.close()
    ops = rec.ops()
    assert read_jsonl(tmp_path / "history.jsonl") == ops
    assert not r.errors, r.errors
    return ops, r


def check_queue_run(ops: list[Op], r: QueueRun) -> None:
    result = check(ops)  # the default policy: assign, ww-deps
    assert result["valid?"] is True, summary(result)
    acked = acked_sends(ops)
    assert len(acked) > 0
    assert r.final_start_ns is not None
    final = [op for op in ops if op.time_ns >= r.final_start_ns]
    assert {op.f for op in final} >= {"crash", "debug-topic-partitions", "assign", "poll"}
    missing = acked - polled(final)
    assert not missing, f"acknowledged sends never read in the final phase: {sorted(missing)}"
    assert r.final_complete, r.unreached
    # every final-phase thread read every key from the beginning
    assert all(op.get("seek_to_beginning") for op in final if op.f == "assign")
    debug = [op for op in final if op.f == "debug-topic-partitions" and op.type == "ok"]
    assert debug and all(p.get("leader") is not None for op in debug
                         for p in op.value["partitions"])


@pytest.mark.timeout(150)
def test_queue_confluent(cluster: LocalCluster, tmp_path: Path) -> None:
    opts = QueueOpts(client="confluent", concurrency=3, rate=40, max_txn_length=2,
                     sub_p=1 / 16, max_writes_per_key=64, recovery_wait_s=1.0,
                     final_time_limit_s=40.0, seed=20240601)
    ops, r = run(cluster, tmp_path, opts, 15.0)
    check_queue_run(ops, r)
    assert {"send", "poll", "assign"} <= {op.f for op in ops if op.type == "ok"}


@pytest.mark.timeout(120)
def test_queue_kafka_python(cluster: LocalCluster, tmp_path: Path) -> None:
    opts = QueueOpts(client="kafka-python", concurrency=2, rate=20, sub_p=1 / 8,
                     topic_prefix="kp", recovery_wait_s=0.5, final_time_limit_s=30.0,
                     crash_clients=True, crash_client_interval_s=4.0, seed=7)
    ops, r = run(cluster, tmp_path, opts, 8.0)
    check_queue_run(ops, r)
    # crashes renumbered the processes: thread = process mod concurrency
    crashes = [op for op in ops if op.f == "crash" and op.type == "info"]
    assert crashes
    assert max(op.process for op in ops if isinstance(op.process, int)) >= 2


@pytest.mark.timeout(90)
def test_subscribe_rebalance_log(cluster: LocalCluster) -> None:
    opts = QueueOpts(topic_prefix="sub", sub_via=("subscribe",))
    settings = opts.client_settings(cluster.bootstrap)
    producer = open_client("confluent", settings, 0)
    consumer = open_client("confluent", settings, 1)
    try:
        sent = [producer.invoke("send", [["send", k, 1]]) for k in (0, 1)]
        assert all(c.type == "ok" for c in sent), sent
        assert consumer.invoke("subscribe", [0, 1]).type == "ok"
        seen: dict[int, list[Any]] = {}
        logs: list[Any] = []
        end = time.monotonic() + 30
        while time.monotonic() < end and set(seen) != {0, 1}:
            c = consumer.invoke("poll", [["poll"]], {"poll_ms": 500})
            assert c.type == "ok", c
            logs.extend(c.extra.get("rebalance_log", ()))
            for k, pairs in c.value[0][1].items():
                seen.setdefault(k, []).extend(pairs)
        assert seen == {0: [[0, 1]], 1: [[0, 1]]}
        assert {"type": "assigned", "keys": [0, 1]} in logs
    finally:
        producer.close()
        consumer.close()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_assign_keeps_the_position_of_kept_partitions(cluster: LocalCluster,
                                                      client: str) -> None:
    """Java's `assign` semantics: a partition still assigned continues where it was,
    whether it had delivered records or none yet; a dropped and re-added partition starts
    again at the reset position (earliest here). Each key is read exactly once in offset
    order, whatever the re-assignments in between."""
    opts = QueueOpts(client=client, topic_prefix=f"asg-{client}", max_poll_records=2)
    settings = opts.client_settings(cluster.bootstrap)
    producer = open_client(client, settings, 0)
    consumer = open_client(client, settings, 1)
    try:
        for v in range(6):
            for k in (0, 1, 2):
                c = producer.invoke("send", [["send", k, v]])
                assert c.type == "ok", c
        seen: dict[int, list[int]] = {0: [], 1: [], 2: []}

        def poll_until(pred: Any) -> None:
            end = time.monotonic() + 30
            while time.monotonic() < end and not pred():
                c = consumer.invoke("poll", [["poll"]], {"poll_ms": 200})
                assert c.type == "ok", c
                for k, pairs in c.value[0][1].items():
                    seen[k].extend(o for o, _v in pairs)
            assert pred(), seen

        assert consumer.invoke("assign", [0, 1]).type == "ok"
        poll_until(lambda: seen[0] or seen[1])
        # 0 and 1 are kept (one of them maybe with nothing read yet), 2 is new
        assert consumer.invoke("assign", [0, 1, 2]).type == "ok"
        poll_until(lambda: all(len(seen[k]) >= 2 for k in (0, 1, 2)))
        assert consumer.invoke("assign", [1, 2]).type == "ok"
        poll_until(lambda: all(len(seen[k]) == 6 for k in (1, 2)))
        assert seen[1] == seen[2] == list(range(6)), seen
        # 0 was dropped and comes back at the beginning
        read_before = list(seen[0])
        seen[0].clear()
        assert consumer.invoke("assign", [0, 1, 2]).type == "ok"
        poll_until(lambda: len(seen[0]) == 6)
        assert read_before == list(range(len(read_before))), read_before
        assert seen[0] == list(range(6)), seen
    finally:
        producer.close()
        consumer.close()


@pytest.mark.timeout(60)
def test_seek_right_after_assign(cluster: LocalCluster) -> None:
    """A seek right after an assign, before the first fetch (where librdkafka may refuse
    it and the client assigns that partition again), puts the partition at the offset;
    the other partition reads from the start."""
    opts = QueueOpts(client="confluent", topic_prefix="seek-early")
    settings = opts.client_settings(cluster.bootstrap)
    producer = open_client("confluent", settings, 0)
    consumer = open_client("confluent", settings, 1)
    try:
        for v in range(5):
            for k in (0, 1):
                assert producer.invoke("send", [["send", k, v]]).type == "ok"
        seen: dict[int, list[int]] = {0: [], 1: []}
        consumer.assign([0, 1])
        consumer.seek(0, 3)
        end = time.monotonic() + 30
        while time.monotonic() < end and (len(seen[0]) < 2 or len(seen[1]) < 5):
            for k, pairs in consumer.poll(200).items():
                seen[k].extend(o for o, _v in pairs)
        assert seen == {0: [3, 4], 1: [0, 1, 2, 3, 4]}, seen
    finally:
        producer.close()
        consumer.close()


@pytest.mark.timeout(120)
def test_register_linearizable(cluster: LocalCluster, tmp_path: Path) -> None:
    opts = RegisterOpts(concurrency=3, rate=25, key_count=2, ops_per_key=40, seed=3)
    writer = JsonlWriter(tmp_path / "history.jsonl")
    rec = Recorder(writer, concurrency=opts.concurrency)
    try:
        r = run_register(cluster.bootstrap, opts, rec, threading.Event(),
                         time.monotonic() + 10.0)
    finally:
        writer.close()
    assert not r.errors, r.errors
    ops = rec.ops()
    result = check(ops, time_limit_s=30.0)
    assert "queue" not in result
    assert result["linearizable"]["valid?"] is True, result["linearizable"]
    writes = [op for op in ops if op.f == "write" and op.type == "ok"]
    reads = [op for op in ops if op.f == "read" and op.type == "ok"]
    assert writes and reads
    assert any(op.value[1] is not None for op in reads)
    assert len({op.value[0] for op in ops if op.type == "invoke"}) > opts.key_count  # rotated


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_final_reads_stop_at_a_confirmed_end(cluster: LocalCluster, client: str) -> None:
    """A target past the partition's end (what an unclean election leaves when it truncates
    a key nobody writes again): the final reads ask the real leaders for the end offsets,
    read up to the end, confirm it and finish, instead of waiting out their time limit. An
    acknowledged send recorded at an offset the partition does not have (the truncated
    write, injected here) is then reported as `truncated_write`."""
    prefix = "tre" if client == "confluent" else "trk"
    opts = QueueOpts(client=client, concurrency=2, topic_prefix=prefix, seed=5,
                     final_time_limit_s=40.0)
    settings = opts.client_settings(cluster.bootstrap)
    rec = Recorder(concurrency=2)
    producer = open_client(client, settings, 4)
    try:
        for v in (1, 2, 3):
            inv = rec.invoke(4, "send", [["send", 0, v]])
            c = producer.invoke("send", [["send", 0, v]])
            assert c.type == "ok", c
            rec.complete(inv, c.type, c.value)
    finally:
        producer.close()
    # the lost write: acknowledged at offset 5 of key 0, which ends at 3, and read there
    # before the (imagined) truncation, so it is not unseen
    rec.complete(rec.invoke(6, "send", [["send", 0, 9]]), "ok", [["send", 0, [5, 9]]])
    rec.complete(rec.invoke(8, "poll", [["poll"]]), "ok", [["poll", {0: [[5, 9]]}]])
    t0 = time.monotonic()
    r = final_phase(cluster.bootstrap, opts, rec, {0: 5})
    took = time.monotonic() - t0
    ops = rec.ops()
    assert r.final_complete, (r.unreached, took)
    assert r.truncated == {0: {0: 3}, 1: {0: 3}}
    ends = [op for op in ops if op.f == "end-offsets" and op.type == "ok"]
    # a real leader answered, with its epoch; each thread confirmed the end once
    assert all(row[0] == 0 and row[2] == 3 and row[3] is not None
               for op in ends for row in op.value)
    assert sorted(kv for op in ends for kv in op.get("truncated") or ()) == [[0, 3], [0, 3]]
    q = check(ops)["queue"]
    assert q["bad_anomaly_types"] == ["truncated_write"], q["anomalies"]
    (e,) = q["anomalies"]["truncated_write"]["errs"]
    assert (e["key"], e["value"], e["offset"], e["end_offset"]) == (0, 9, 5, 3)
