"""Timing faults for the simulator's nemesis: the schedules the historic replication bugs
need that independent kills, partitions and clogs almost never line up.

- `bounce-leader`: fast preferred-leader elections (leadership moves from the leader l to
  an ISR follower t and, in two seeds of three, 50 ms to 1 s later back to l: an operator
  or the auto-rebalance moving leaders, KIP-320's "several fast elections") while the
  controller's channel to one broker (l, t or the third) is slow for 1 to 6 s: its requests
  wait, in order (a congested connection, a request queue stuck behind a slow request),
  while the broker's fetcher connections and other controllers' channels are not slowed.
  This is how a broker ends up acting on an old LeaderAndIsr after newer ones were made
  (KAFKA-6880's zombie follower, B8/B10; a stale leader answering OffsetsForLeaderEpoch,
  B9; a stale leader admitting a follower, B11), or, when the controller changes meanwhile,
  misses an epoch (the new controller's requests overtake the old one's: B12).
- `slow-zk`: ZooKeeper answers slowly (20 ms to 1 s per operation and notification) for a
  while: an ensemble stalled on fsync or GC. Asynchronous ISR writes stay in flight that
  long (KIP-497's window, B14) and a broker hears of its own session expiry late (B13).
- `slow-control`: the controller's channel to the partition's leader (the broker carrying
  the load, whose request queue is the likeliest to be stuck) is slow for 1 to 6 s on its
  own, so whatever the controller decides meanwhile (an election after a crash, an expiry or
  a move; an ISR change) reaches it late: an old leader goes on leading.
- `bounce-controller`: `bounce-leader`, and the controller fails over (`/controller` is
  deleted, as an operator does to move it) at a random moment of the slow broker's hold.
  The new controller tells every broker the current state at once, ahead of what the old
  one still holds for the slow broker: that broker hears a later epoch naming the leader it
  follows without the epoch in between that named another (KAFKA-7164's line-up, B12).

The held requests go in when the hold ends (or when the liveness phase heals everything),
in order, one delivery per event; a crash of the broker drops them with its process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from core import events as ev
from core.messages import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from core.types import NO_LEADER
from harness.sim.sched import US_PER_MS
from spec.world import TP

if TYPE_CHECKING:
    from harness.sim.run import Nemesis

TIMING_FAULTS = ("bounce-leader", "slow-zk", "slow-control", "bounce-controller")
ZK_LATENCY_US = (20_000, 200_000, 1_000_000)
HOLD_MS = (1_000, 3_000, 6_000)  # how long the slow broker's control requests wait
BOUNCE_GAP_MS = (50, 1_000)  # between the two elections
CONTROL_IN = (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)


class TimingFaults:
    def __init__(self, nem: Nemesis) -> None:
        self.nem = nem
        self.holds: dict[int, Callable[[], None]] = {}  # broker -> release its held requests
        self.zk_latency_us = nem.c.net.zk_latency_us  # the normal latency

    def inject(self, kind: str, b: int) -> None:
        if kind == "bounce-leader":
            self._bounce()
        elif kind == "bounce-controller":
            self._bounce(failover=True)
        elif kind == "slow-zk":
            self._slow_zk()
        elif kind == "slow-control":
            p = self.nem.c.zk.partition
            # the leader carries the load: its request queue is the likeliest to be stuck
            self._slow_control(p.leader if p is not None and p.leader != NO_LEADER else b)

    def _slow_control(self, b: int) -> None:
        """The controller's channel to broker b (the partition's leader) is slow for 1 to 6 s,
        as in `bounce-leader` but on its own: whatever the controller decides meanwhile (an
        election after a crash, an expiry or a move; an ISR change) reaches b late, in
        order. A leader that lost its leadership goes on leading meanwhile."""
        nem, c = self.nem, self.nem.c
        ctl = c.zk.controller
        if ctl == NO_LEADER or c.brokers[ctl].node is None or c.brokers[b].node is None \
                or b in self.holds:
            return
        hold_ms = nem.rng.choice(HOLD_MS)
        nem._log("slow-control", {"node": b, "controller": ctl, "hold_ms": hold_ms})
        self._hold(ctl, b, hold_ms)

    def _failover(self) -> None:
        """`/controller` is deleted (a controller moved by hand, or its ZooKeeper hiccup
        without the broker leaving): the controller resigns and every broker races to take
        over (the old one may win again). The new controller tells every broker the current
        state of every partition, while what the old one queued for a slow broker is still
        on its way, so that broker may hear a newer LeaderAndIsr before older ones."""
        nem, c = self.nem, self.nem.c
        if nem.stopped or c.zk.controller == NO_LEADER:
            return
        nem._log("move-controller", {"from": c.zk.controller})
        c.zk.delete_controller()

    def _slow_zk(self) -> None:
        nem, c = self.nem, self.nem.c
        if c.net.zk_latency_us != self.zk_latency_us:
            return  # already slow
        latency = nem.rng.choice(ZK_LATENCY_US)
        nem._log("slow-zk", {"latency_ms": latency // US_PER_MS})
        c.net = dataclasses.replace(c.net, zk_latency_us=latency)
        nem._later(self._zk_normal)

    def _zk_normal(self) -> None:
        c = self.nem.c
        if c.net.zk_latency_us != self.zk_latency_us:
            c.net = dataclasses.replace(c.net, zk_latency_us=self.zk_latency_us)
            self.nem._log("stop-slow-zk", None)

    def _bounce(self, failover: bool = False) -> None:
        """`bounce-leader`; with `failover` (`bounce-controller`), the controller also fails
        over at a random moment of the slow broker's hold."""
        nem, c = self.nem, self.nem.c
        ctl, p = c.zk.controller, c.zk.partition
        if ctl == NO_LEADER or p is None or p.leader == NO_LEADER or c.brokers[ctl].node is None:
            return
        leader = p.leader
        targets = [x for x in p.isr if x != leader and c.brokers[x].node is not None]
        if not targets:
            return
        t = nem.rng.choice(targets)
        slow = nem.rng.randrange(c.n)
        hold_ms = nem.rng.choice(HOLD_MS)
        back = nem.rng.random() < 2 / 3
        gap_ms = int(nem.rng.uniform(*BOUNCE_GAP_MS))
        failover_ms = int(nem.rng.uniform(0, hold_ms)) if failover else None
        nem._log("bounce-controller" if failover else "bounce-leader",
                 {"from": leader, "to": t, "back_after_ms": gap_ms if back else None,
                  "slow_control": slow, "hold_ms": hold_ms}
                 | ({"failover_after_ms": failover_ms} if failover else {}))
        self._hold(ctl, slow, hold_ms)
        self._move(ctl, t)
        if back:
            c.sched.after_us(gap_ms * US_PER_MS, lambda: None if nem.stopped else
                             self._move(c.zk.controller, leader))
        if failover_ms is not None:
            c.sched.after_us(failover_ms * US_PER_MS, self._failover)

    def _move(self, ctl: int, target: int) -> None:
        c = self.nem.c
        if ctl == NO_LEADER:
            return
        br = c.brokers[ctl]
        c.run_on(ctl, br.incarnation, lambda: br.node.handle(ev.LeaderMoveRequested(TP, target))
                 if br.node is not None else None)

    def _hold(self, ctl: int, b: int, hold_ms: int) -> None:
        """Hold back the control requests broker b's current process receives from `ctl`."""
        c = self.nem.c
        br = c.brokers[b]
        node = br.node
        if node is None or b in self.holds:
            return
        inc = br.incarnation
        inner = node.handle
        held: list[ev.MessageReceived] = []
        withheld = (b, inc, held)
        c.withheld.append(withheld)  # still on its way to b (`Cluster.on_its_way`)
        done = [False]  # the held requests are all in: this layer only passes events on

        def handle(e: ev.Event) -> None:
            if not done[0] and isinstance(e, ev.MessageReceived) and e.src == ctl and \
                    isinstance(e.message, CONTROL_IN):
                held.append(e)
                return
            inner(e)

        def release() -> None:
            """The hold ends: the held requests go in, in order, one per event (each a
            delivery of its own, as over the network); requests that come meanwhile queue
            behind them."""
            if self.holds.get(b) is not release:
                return
            del self.holds[b]
            if br.incarnation != inc or br.node is not node:
                return  # the process died: its held requests died with it
            c.note(f"release {b}: {len(held)} control requests")
            deliver()

        def deliver() -> None:
            if br.incarnation != inc or br.node is not node:
                return
            if not held:
                # A later hold may have wrapped this one while it was still delivering
                # (seed 401497: restoring `inner` then dropped that hold's layer, and its
                # own restore put this finished layer back, holding the controller's
                # requests for good): unwrap only if outermost, else just pass events on.
                done[0] = True
                c.withheld[:] = [w for w in c.withheld if w is not withheld]
                if node.handle is handle:
                    node.handle = inner  # type: ignore[method-assign]
                return
            c.dirty = True
            inner(held.pop(0))
            c.sched.after_us(US_PER_MS, lambda: c.run_on(b, inc, deliver))

        node.handle = handle  # type: ignore[method-assign,assignment]
        self.holds[b] = release
        c.sched.after_us(hold_ms * US_PER_MS, lambda: self._end(b, inc, release))

    def _end(self, b: int, inc: int, release: Callable[[], None]) -> None:
        """Release on the broker's process (after its pause, if paused); a dead process's
        hold is only forgotten."""
        c = self.nem.c
        if c.brokers[b].incarnation == inc and c.brokers[b].node is not None:
            c.run_on(b, inc, release)
        else:
            release()

    def heal(self) -> None:
        self._zk_normal()
        for b, release in sorted(self.holds.items()):
            self._end(b, self.nem.c.brokers[b].incarnation, release)
