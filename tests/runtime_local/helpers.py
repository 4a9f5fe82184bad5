"""Bounded helpers for the live runtime tests: topics, producing, waiting."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from harness.runtime.base import node_id
from harness.runtime.local import LocalRuntime

T = TypeVar("T")


def wait_for(pred: Callable[[], T], timeout_s: float, what: str,
             interval_s: float = 0.2) -> T:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = pred()
            if last:
                return last
        except Exception as e:
            last = e
        time.sleep(interval_s)
    raise AssertionError(f"not within {timeout_s}s: {what} (last: {last!r})")


def create_topic(rt: LocalRuntime, topic: str, partitions: int = 1, rf: int = 3) -> str:
    admin = KafkaAdminClient(bootstrap_servers=rt.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(topic, partitions, rf)])
    finally:
        admin.close()
    return wait_for(lambda: rt.leader_of(topic, 0), 15, f"a leader for {topic}-0")


def produce(rt: LocalRuntime, topic: str, n: int, per_batch: int = 5, size: int = 40) -> None:
    """`n` records in many small batches (flush every `per_batch`), acks=all."""
    p = KafkaProducer(bootstrap_servers=rt.bootstrap, acks="all", linger_ms=0,
                      request_timeout_ms=10000, max_block_ms=10000)
    try:
        for i in range(n):
            p.send(topic, (f"{i:06d}-" + "x" * size).encode())
            if (i + 1) % per_batch == 0:
                p.flush(10)
        p.flush(10)
    finally:
        p.close(5)


def replica(rt: LocalRuntime, node: str, topic: str, partition: int = 0) -> dict[str, Any]:
    for r in rt.replica_states(node)["replicas"]:
        if r["topic"] == topic and r["partition"] == partition:
            return dict(r)
    raise LookupError(f"{node} has no replica of {topic}-{partition}")


def caught_up(rt: LocalRuntime, node: str, topic: str, partition: int = 0) -> bool:
    """`node`'s store has the leader's log end and the leader has it in the ISR."""
    leader = rt.leader_of(topic, partition)
    if leader is None or leader == node:
        return False
    lr = replica(rt, leader, topic, partition)
    nr = replica(rt, node, topic, partition)
    return (node_id(node) in lr["isr"]
            and nr["store_log_end_offset"] == lr["store_log_end_offset"] > 0)


def follower_of(rt: LocalRuntime, topic: str, partition: int = 0) -> str:
    leader = rt.leader_of(topic, partition)
    return next(n for n in rt.nodes if n != leader)
