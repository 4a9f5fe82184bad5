"""The CPU of one acks=all replication round in process: `uv run python bench/node_bench.py`.

Three `Node`s (the live broker's effect interpreter over real segment files, the live
broker's protocol config), no network: a leader and two followers of one partition. Each
round is what the live brokers do for one acks=all produce request once the followers wait
in a held fetch: the leader appends the batch; each follower's held fetch is asked again (its
DelayedFetch completing), the follower gets the fetched batch as the peer client hands it
over (header read, CRC checked), appends it and sends its next fetch, which the leader takes
(the HW advances, the produce is answered). The round ends when the produce reply is there.

Printed per round: CPU (process time), core steps, event-loop turns the followers needed
before their next fetch left, and clock handles armed. process time is little disturbed by
other load on the machine, unlike latency, so this is the figure to compare between two
versions of the broker (run each with PYTHONPATH set to its tree, alternated).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.config import BrokerConfig
from broker.recordbatch import HEADER_SIZE, unpack_header
from broker.runtime.node import Node
from broker.runtime.ports import AsyncioClock, Cancellable
from broker.store.batch import Record, build_batch, validate_batch
from broker.store.manager import LogManager
from core import events as ev
from core.messages import BatchInfo, FetchRequest, FetchResponse, LeaderAndIsrRequest
from core.types import PartitionInfo, TopicPartition

TP = TopicPartition("bench", 0)
LEADER, FOLLOWERS = 1, (2, 3)


class CountingClock(AsyncioClock):
    def __init__(self) -> None:
        self.armed = 0

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        self.armed += 1
        return super().call_later(delay_ms, callback)


def make_node(broker_id: int, root: Path, sent: list[FetchRequest], clock: CountingClock
              ) -> Node:
    cfg = BrokerConfig.from_properties({"broker.id": str(broker_id),
                                        "zookeeper.connect": "127.0.0.1:2181",
                                        "min.insync.replicas": "2"})
    kw: dict[str, Any] = {"clock": clock,
                          "send_to_peer": lambda dst, m: sent.append(m)
                          if isinstance(m, FetchRequest) else None}
    d = root / f"broker-{broker_id}"
    d.mkdir()
    try:
        node = Node(broker_id, cfg.protocol_config(), LogManager([d]), inline_timers=True, **kw)
    except TypeError:  # a broker before inline timers
        node = Node(broker_id, cfg.protocol_config(), LogManager([d]), **kw)
    node.handle(ev.BrokerRegistered(10))
    info = PartitionInfo(TP, LEADER, 1, (1, 2, 3), 0, (1, 2, 3))
    node.handle(ev.MessageReceived(0, LeaderAndIsrRequest(0, 1, 10, (info,))))
    return node


def fetched(leader: Node, req: FetchRequest, resp: FetchResponse) -> FetchResponse:
    """The follower's FetchResponse as `peers._fetch_response` builds it from the wire."""
    lg = leader.logs.get_log(TP.topic, TP.partition)
    assert lg is not None
    records = memoryview(lg.read(resp.fetch_offset, 1 << 24).read_bytes())
    batches, pos = [], 0
    while pos + HEADER_SIZE <= len(records):
        h = unpack_header(records, pos)
        validate_batch(records, pos)
        batches.append(BatchInfo(h.base_offset, h.last_offset, h.partition_leader_epoch,
                                 h.producer_id, h.producer_epoch, h.base_sequence))
        pos += h.size
    return FetchResponse(
        tp=TP, error=resp.error, fetch_offset=req.fetch_offset,
        current_leader_epoch=req.current_leader_epoch, high_watermark=resp.high_watermark,
        log_start_offset=resp.log_start_offset,
        end_offset=batches[-1].last_offset + 1 if batches else req.fetch_offset,
        batches=tuple(batches), records=records[:pos] if batches else None,
        request_id=req.request_id)


def ask(leader: Node, src: int, req: FetchRequest) -> FetchResponse:
    """The leader's request handler: the core's answer to a follower's fetch."""
    req = dataclasses.replace(req, request_id=leader.new_request_id())
    fut = leader.responses.expect(req.request_id)
    leader.handle(ev.MessageReceived(src, req))
    assert fut.done()
    resp = fut.result()
    assert isinstance(resp, FetchResponse)
    return resp


async def next_fetch(sent: list[FetchRequest]) -> int:
    """Loop turns until the follower's next fetch has left (0: it left inside `handle`)."""
    turns = 0
    while not sent:
        await asyncio.sleep(0)
        turns += 1
        if turns > 100:
            raise RuntimeError("the follower sent no fetch")
    return turns


async def run(rounds: int, records: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="hiwater-node-bench-"))
    clock = CountingClock()
    sent: dict[int, list[FetchRequest]] = {b: [] for b in (LEADER, *FOLLOWERS)}
    nodes = {b: make_node(b, root, sent[b], clock) for b in (LEADER, *FOLLOWERS)}
    leader = nodes[LEADER]
    for f in FOLLOWERS:  # each follower's first fetch (zero-delay timer after LeaderAndIsr)
        await next_fetch(sent[f])
    now_ms = int(time.time() * 1000)  # (old timestamps would roll a segment per append)
    batch = build_batch([Record(i, now_ms, None, bytes(1024)) for i in range(records)],
                        base_offset=0)
    held = {f: sent[f].pop() for f in FOLLOWERS}
    for f in FOLLOWERS:  # caught up on an empty log: these fetches are held
        ask(leader, f, held[f])
    cpu, steps, turns, armed = [], [], [], []
    for _ in range(rounds):
        s0 = sum(n.steps for n in nodes.values())
        a0 = clock.armed
        t0 = time.process_time()
        rid = leader.new_request_id()
        reply = leader.replies.expect(rid)
        leader.handle(ev.ProduceReceived(rid, TP, -1, records, batch))
        n_turns = 0
        for f in FOLLOWERS:
            req = held[f]
            resp = ask(leader, f, req)  # the held fetch completes: data past its offset
            nodes[f].handle(ev.MessageReceived(LEADER, fetched(leader, req, resp)))
            n_turns += await next_fetch(sent[f])
            held[f] = sent[f].pop()
            ask(leader, f, held[f])  # the follower's next fetch: the leader learns its LEO
        if not reply.done():
            raise RuntimeError("acks=all not answered after both followers' next fetches")
        cpu.append(time.process_time() - t0)
        steps.append(sum(n.steps for n in nodes.values()) - s0)
        turns.append(n_turns)
        armed.append(clock.armed - a0)
    for n in nodes.values():
        n.close()
    return {"cpu_us": statistics.median(cpu) * 1e6, "cpu_mean_us": statistics.fmean(cpu) * 1e6,
            "steps": statistics.fmean(steps), "turns": statistics.fmean(turns),
            "armed": statistics.fmean(armed)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3000)
    ap.add_argument("--records", type=int, default=7, help="1 KiB records per produced batch")
    args = ap.parse_args()
    r = asyncio.run(run(args.rounds, args.records))
    print(f"{Path(sys.modules[Node.__module__].__file__ or '').parents[2]}: "
          f"{args.rounds} acks=all rounds of {args.records} x 1 KiB, RF 3: "
          f"CPU {r['cpu_us']:.0f} us median ({r['cpu_mean_us']:.0f} mean) per round, "
          f"core steps {r['steps']:.2f}, follower loop turns {r['turns']:.2f}, "
          f"clock handles {r['armed']:.2f}")


if __name__ == "__main__":
    main()
