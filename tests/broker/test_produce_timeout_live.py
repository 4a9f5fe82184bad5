"""A pipelined acks=all Produce whose high watermark never comes is still answered.

The pipelined produce path (broker/runtime/pipeline.py, server.py) keeps no timer per
request: the core's produce timeout (`ProduceTimeoutTimer`, Kafka's DelayedProduce expiry)
is what answers. Live: both followers of a partition are paused (SIGSTOP), so the leader's ISR
still names them (replica.lag.time.max.ms is far longer than the test) and its HW cannot move;
two Produce requests written back to back on one connection must each be answered
REQUEST_TIMED_OUT, in request order, no earlier than their own timeout. Without the core's
timer nothing answers them until the paused followers' ZooKeeper sessions expire (LocalCluster:
6 s) and the controller shrinks the ISR: then the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND
(seen when the timer was disabled), not REQUEST_TIMED_OUT. No tight timing bound.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from broker.wire import DecodedResponse, decode_response, encode_request

from .faults_support import create_topic, leader_replica
from .wire_live_support import (
    connect,
    discard_cluster,
    record_batch,
    recv_frame,
    request_body,
    start_cluster_patiently,
)

TOPIC = "never-covered"
TIMEOUT_MS = 1_000
LAG_MS = 60_000
REQUEST_TIMED_OUT = 7


def test_pipelined_produce_without_a_high_watermark_times_out(tmp_path: Path) -> None:
    c = start_cluster_patiently(tmp_path / "cluster", 3,
                                **{"replica.lag.time.max.ms": str(LAG_MS)})
    paused: list[int] = []
    try:
        create_topic(c, TOPIC, 1, rf=3)
        lead = leader_replica(c, TOPIC, 0)
        assert lead is not None
        leader = int(lead["broker_id"])
        for i in sorted(c.nodes):
            if i != leader:
                c.pause(i)
                paused.append(i)
        b = c.nodes[leader]
        s = connect(b.host, b.port, timeout_s=LAG_MS / 1000 / 2)
        try:
            t0 = time.monotonic()
            for cid in (1, 2):  # written before either is answered: the pipelined path
                body = request_body(0, 7, {
                    "transactional_id": None, "acks": -1, "timeout": TIMEOUT_MS,
                    "topic_data": [{"name": TOPIC, "partition_data": [
                        {"index": 0, "records": record_batch([f"v{cid}".encode()])}]}]})
                s.sendall(encode_request(body, cid, "timeout-test"))
            answers = []
            for _ in (1, 2):
                resp = decode_response(recv_frame(s), 0, 7)
                assert isinstance(resp, DecodedResponse), resp
                r: Any = resp.body
                (p,) = r.responses[0].partition_responses
                answers.append((resp.correlation_id, int(p.error_code),
                                time.monotonic() - t0))
        finally:
            s.close()
    finally:
        for i in paused:
            c.resume(i)
        discard_cluster(c)
    assert [(cid, code) for cid, code, _ in answers] == [(1, REQUEST_TIMED_OUT),
                                                         (2, REQUEST_TIMED_OUT)], answers
    assert all(t >= TIMEOUT_MS / 1000 * 0.9 for _, _, t in answers), answers
