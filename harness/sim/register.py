"""The register workload's operations as simulated clients (`hiwater sim --workload register`).

The live register workload (`harness.workloads.register`) keeps one register per record key
of a compacted topic: `write [k, v]` produces key=k, value=v with acks=all; `read [k, null]`
asks the leader for its high watermark (ListOffsets latest, uncached), consumes the partition
until its position reaches it and returns the value of the last record for k. Here the same
operations, drawn by the live workload's own generator (`RegisterGen`: rotating keys,
per-key counters), run against the one simulated partition spec's invariants watch, and
the history goes to `harness.checkers.linearizable` unchanged.

One difference in the bytes, not in the history: spec's invariants identify a record by one
integer, so each record's value is a run-wide record id and the clients keep the table
id -> (k, v) (a real client would decode v from the value bytes).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from core import effects as fx
from core import events as ev
from core.types import NO_LEADER, UNDEFINED_EPOCH, Errors
from harness.history import FAIL, INFO, INVOKE, OK
from harness.sim.cluster import Broker, Cluster
from harness.sim.run import Drawn, SimOptions, Workload
from harness.sim.sched import US_PER_MS
from harness.workloads.register import RegisterGen, RegisterOpts
from spec.world import TP

READ_TIMEOUT_MS = 5_000  # RegisterOpts.read_timeout_s: a read that cannot reach the HW: info
FETCH_RETRY_MS = 50  # a fetch that brought nothing new is asked again after this
KEY_COUNT = 3
OPS_PER_KEY = 60


class RegisterWorkload(Workload):
    """Simulated register clients: `write [k, v]` and `read [k, v]` over rotating keys."""

    def __init__(self, c: Cluster, opts: SimOptions, d: Drawn, rng: random.Random) -> None:
        super().__init__(c, opts, d, rng)
        ropts = RegisterOpts(concurrency=opts.clients, key_count=KEY_COUNT,
                             ops_per_key=OPS_PER_KEY, read_p=1 - d.send_ratio)
        self.gen = RegisterGen(ropts, random.Random(rng.randrange(1 << 62)))
        self.values: dict[int, tuple[int, int]] = {}  # record id -> (key, value)
        self.views: list[dict[int, int]] = [{} for _ in range(opts.clients)]  # key -> value
        self.epoch = [UNDEFINED_EPOCH] * opts.clients  # the leader epoch the metadata said
        # bumped when a client's consumer starts afresh (a new process, the final reads): a
        # fetch answered after that belongs to the old consumer and must not move the new one
        self.consumer_gen = [0] * opts.clients

    # -- metadata -----------------------------------------------------------------------

    def _pick_broker(self, i: int) -> int:
        """The leader and its epoch as some broker's metadata cache says (librdkafka sends
        the epoch with ListOffsets and Fetch: KIP-320)."""
        if self.leader[i] != NO_LEADER:
            return self.leader[i]
        b = self.rng.randrange(self.c.n)
        node = self.c.brokers[b].node
        if node is not None:
            for p in node.state.metadata:
                if p.tp == TP and p.leader != NO_LEADER:
                    self.leader[i], self.epoch[i] = p.leader, p.leader_epoch
                    return p.leader
        self.epoch[i] = UNDEFINED_EPOCH
        return b

    def _forget_leader(self, i: int) -> None:
        self.leader[i] = NO_LEADER
        self.epoch[i] = UNDEFINED_EPOCH

    # -- ops ----------------------------------------------------------------------------

    def _op(self, i: int) -> None:
        if self.stopped or self.busy[i] or self.done[i]:
            return
        self.busy[i] = True
        if self.final:
            self._read_op(i, self.rng.choice(self.gen.active))
            return
        spec = self.gen.next_op()
        k, v = spec.value
        if spec.f == "write":
            self._write(i, k, v)
        else:
            self._read_op(i, k)

    def _finish(self, i: int, lost_process: bool) -> None:
        if lost_process:  # a new process starts with a fresh consumer: from offset 0
            self.views[i] = {}
            self.consumer_gen[i] += 1
        super()._finish(i, lost_process)

    def _write(self, i: int, k: int, v: int) -> None:
        self.next_value += 1
        g = self.next_value
        self.values[g] = (k, v)
        p = self.process[i]
        self.record(p, INVOKE, "write", [k, v])
        self._produce(i, p, "write", k, g, lambda _offset: [k, v])

    def _read_op(self, i: int, k: int) -> None:
        """ListOffsets(latest) at the leader, then fetch until the position reaches it."""
        p = self.process[i]
        self.record(p, INVOKE, "read", [k, None])
        deadline = self.c.sched.now_us + READ_TIMEOUT_MS * US_PER_MS
        # As spec.model's clients (and the queue clients' ListOffsets): the leader ZooKeeper
        # names, with its epoch. A client with stale metadata can read a zombie leader's HW,
        # which ZooKeeper-era Kafka does not fence (KIP-320 fences only a client that knows
        # the newer epoch): spec's KIP-207 invariant and linearizable reads assume the
        # current epoch.
        zp = self.c.zk.partition
        if zp is None or zp.leader == NO_LEADER:
            self.record(p, FAIL, "read", [k, None], {"error": "LEADER_NOT_AVAILABLE"})
            self._finish(i, False)
            return
        b, epoch = zp.leader, zp.leader_epoch

        def failed(error: str, definite: bool) -> None:
            self._forget_leader(i)
            if definite:  # nothing was read: the read took no effect
                self.record(p, FAIL, "read", [k, None], {"error": error})
            else:
                self.record(p, INFO, "read", [k, None], {"error": error})
            self._finish(i, not definite)

        def make(br: Broker, rid: int) -> None:
            if br.node is not None:
                br.node.handle(ev.ListOffsetsReceived(rid, TP, -1, epoch))

        def on_reply(r: object) -> None:
            assert isinstance(r, fx.ListOffsetsReply)
            if r.error != Errors.NONE:
                failed(r.error.name, True)
                return
            self._catch_up(i, b, epoch, r.offset, deadline,
                           lambda: self._read_done(i, p, k), failed)

        self._request(i, b, make, on_reply, lambda: failed("timeout", True))

    def _read_done(self, i: int, p: int, k: int) -> None:
        self.record(p, OK, "read", [k, self.views[i].get(k)])
        if self.final and self.position[i] > self.max_offset:
            self.done[i] = True
        self._finish(i, False)

    def _catch_up(self, i: int, b: int, epoch: int, hw: int, deadline: int,
                  done: Callable[[], None], failed: Callable[[str, bool], None]) -> None:
        """Consume from the client's position until it reaches `hw` (the read's HW)."""
        if self.position[i] >= hw:
            done()
            return
        if self.c.sched.now_us >= deadline:
            failed("read timeout", False)
            return
        pos = self.position[i]
        gen = self.consumer_gen[i]
        read: dict[str, list[list[int]]] = {}

        def make(br: Broker, rid: int) -> None:
            cb = self.c.clients.get(rid)
            if cb is not None:  # read the records [fetch_offset, end_offset) as the core answers
                def both(v: object, cb: Callable[[object], None] = cb) -> None:
                    if isinstance(v, fx.ConsumerFetchReply) and v.error == Errors.NONE:
                        read["pairs"] = self._read(b, v)
                    cb(v)

                self.c.clients[rid] = both
            if br.node is not None:
                br.node.handle(ev.ConsumerFetchReceived(rid, TP, pos, epoch))

        def on_reply(r: object) -> None:
            assert isinstance(r, fx.ConsumerFetchReply)
            if r.error != Errors.NONE:
                failed(r.error.name, True)
                return
            if self.consumer_gen[i] != gen:
                # the consumer started afresh while this fetch was out (seed 257: its
                # records moved the fresh consumer's position past a key it never saw)
                failed("consumer reset", False)
                return
            pairs = read.get("pairs", [])
            view = self.views[i]
            for _offset, g in pairs:
                kv = self.values.get(g)
                if kv is not None:
                    view[kv[0]] = kv[1]
            if pairs:
                self.position[i] = pairs[-1][0] + 1
                self._saw(pairs[-1][0])
                self._catch_up(i, b, epoch, hw, deadline, done, failed)
            else:
                self.c.sched.after_us(
                    FETCH_RETRY_MS * US_PER_MS,
                    lambda: None if self.stopped else self._catch_up(i, b, epoch, hw, deadline,
                                                                      done, failed))

        self._request(i, b, make, on_reply, lambda: failed("timeout", False))

    def start_final(self) -> None:
        """Final reads: fresh consumers read from the start past the highest offset any op
        saw (a read ends at the HW it asked for)."""
        super().start_final()
        self.views = [{} for _ in range(self.opts.clients)]
        for i in range(self.opts.clients):
            self.epoch[i] = UNDEFINED_EPOCH
            self.consumer_gen[i] += 1
