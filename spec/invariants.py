"""The safety properties, one source of truth for every driver (checker, Hypothesis, the
simulator, live probes). Names follow Kafka's TLA+ specs (hachikuji/kafka-specification,
Vanlightly/kafka-tlaplus) as the reference documents list them.

State invariants take a World; step invariants take the World before and after one action.
Each returns None when it holds, or a sentence saying what broke.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from core.replica import ReplicaState
from core.timers import ReplicaLagTimer, TimerKey
from core.types import NO_LEADER, Role
from spec.world import TP, Node, Record, World

Check = Callable[[World], str | None]
StepCheck = Callable[[World, World], str | None]


def _replica(node: Node) -> ReplicaState | None:
    if node.state is None:
        return None
    for r in node.state.replicas:
        if r.tp == TP:
            return r
    return None


def _leaders(w: World) -> list[tuple[int, ReplicaState, tuple[Record, ...]]]:
    """Brokers that presume leadership (they accept writes and expose their HW)."""
    out = []
    for i, n in enumerate(w.nodes):
        r = _replica(n)
        if r is not None and r.role == Role.LEADER:
            out.append((i, r, n.disk.records))
    return out


def strong_isr(w: World) -> str | None:
    """Whatever any (possibly stale) leader has exposed below its HW is held, identically,
    by every replica in the ZooKeeper ISR: the controller could elect any of them."""
    p = w.zk.partition
    if p is None:
        return None
    for i, r, log in _leaders(w):
        for m in p.isr:
            other = w.nodes[m].disk.records
            if other[:r.high_watermark] != log[:r.high_watermark]:
                return (f"broker {i} (leader, epoch {r.leader_epoch}) exposes "
                        f"{log[:r.high_watermark]} below HW {r.high_watermark}, but ISR member "
                        f"{m} holds {other[:r.high_watermark]}")
    return None


def weak_isr(w: World) -> str | None:
    """As strong_isr, over the leader's own view of the ISR."""
    for i, r, log in _leaders(w):
        for m in r.isr:
            other = w.nodes[m].disk.records
            if other[:r.high_watermark] != log[:r.high_watermark]:
                return (f"broker {i} (leader, epoch {r.leader_epoch}) exposes up to HW "
                        f"{r.high_watermark} but its ISR member {m} holds {other}")
    return None


def leader_in_isr(w: World) -> str | None:
    """The ZooKeeper leader is in the ZooKeeper ISR (guarded: or there is no leader)."""
    p = w.zk.partition
    if p is not None and p.leader != NO_LEADER and p.leader not in p.isr:
        return f"ZooKeeper names leader {p.leader} outside ISR {p.isr}"
    return None


def high_watermark_le_log_end(w: World) -> str | None:
    for i, n in enumerate(w.nodes):
        r = _replica(n)
        if r is not None and r.high_watermark > r.log_end_offset:
            return f"broker {i}: HW {r.high_watermark} > LEO {r.log_end_offset}"
    return None


def log_end_matches_disk(w: World) -> str | None:
    """The core's log end offset is what the store holds (driver and core agree)."""
    for i, n in enumerate(w.nodes):
        r = _replica(n)
        if r is not None and r.log_end_offset != len(n.disk.records):
            return f"broker {i}: core LEO {r.log_end_offset} != log length {len(n.disk.records)}"
    return None


def log_matching(w: World) -> str | None:
    """Any two replicas agree on every offset below both their HWs."""
    reps = [(i, r, n.disk.records) for i, n in enumerate(w.nodes)
            if (r := _replica(n)) is not None]
    for a in range(len(reps)):
        for b in range(a + 1, len(reps)):
            (i, ri, li), (j, rj, lj) = reps[a], reps[b]
            k = min(ri.high_watermark, rj.high_watermark)
            if li[:k] != lj[:k]:
                return f"brokers {i} and {j} differ below HW {k}: {li[:k]} vs {lj[:k]}"
    return None


def epoch_offset_uniqueness(w: World) -> str | None:
    """Two replicas holding a record with the same (offset, epoch) hold the same record."""
    seen: dict[tuple[int, int], tuple[int, int]] = {}
    for i, n in enumerate(w.nodes):
        for off, rec in enumerate(n.disk.records):
            key = (off, rec[1])
            if key in seen and seen[key][1] != rec[0]:
                return (f"offset {off} epoch {rec[1]}: broker {seen[key][0]} has record "
                        f"{seen[key][1]}, broker {i} has record {rec[0]}")
            seen.setdefault(key, (i, rec[0]))
    return None


def leader_completeness(w: World) -> str | None:
    """A leader that ZooKeeper names and that has taken over in that epoch holds every
    acknowledged record."""
    p = w.zk.partition
    if p is None or p.leader == NO_LEADER or not w.ghost.acked:
        return None
    n = w.nodes[p.leader]
    r = _replica(n)
    if r is None or r.role != Role.LEADER or r.leader_epoch != p.leader_epoch:
        return None
    held = {rec[0] for rec in n.disk.records}
    missing = sorted(w.ghost.acked - held)
    if missing:
        return f"leader {p.leader} (epoch {p.leader_epoch}) lacks acknowledged records {missing}"
    return None


def no_acked_record_lost(w: World) -> str | None:
    """Every acknowledged record is still on some broker's disk."""
    held = {rec[0] for n in w.nodes for rec in n.disk.records}
    missing = sorted(w.ghost.acked - held)
    if missing:
        return f"acknowledged records {missing} are on no broker"
    return None


def consistent_read(w: World) -> str | None:
    """Leaders never expose two different histories: what consumers could read below any
    leader's HW is a prefix of one log."""
    if w.ghost.conflicting_exposure:
        return "two leaders exposed different records at the same offset"
    return None


def single_leader_per_epoch(w: World) -> str | None:
    """Each leader epoch is led by one broker: the controller mints an epoch for one leader
    (a zombie controller without fencing can mint it twice, KAFKA-6082)."""
    seen: dict[int, int] = {}
    for epoch, broker in w.ghost.leaders:
        if epoch in seen and seen[epoch] != broker:
            return f"leader epoch {epoch} was led by both broker {seen[epoch]} and {broker}"
        seen[epoch] = broker
    return None


def list_offsets_monotonic(w: World) -> str | None:
    """The latest offset ListOffsets returns never goes backwards across leader changes
    (KIP-207): a new leader answers only once its HW reaches its epoch start."""
    if w.ghost.listed_backwards:
        return (f"ListOffsets returned a latest offset below {w.ghost.latest_listed}, which "
                "an earlier request had been given")
    return None


def controller_cache_matches_zk(w: World) -> str | None:
    """The active controller's view of the partition is ZooKeeper's, once it has processed
    the notifications it was sent: a write it did not make (a zombie controller's) would
    otherwise go unseen (KAFKA-6082). (Not while a leader owes it the notification of an ISR
    write that landed with its answer lost: the leader sends it once it learns.)"""
    c = w.zk.controller
    if c == NO_LEADER or w.zk.unseen:
        return None
    node = w.nodes[c]
    if node.state is None or node.state.controller is None or node.inbox:
        return None
    for ctx in node.state.controller.partitions:
        if ctx.tp != TP or ctx.state is None or w.zk.partition is None:
            continue
        a, z = ctx.state, w.zk.partition
        if (a.leader, a.leader_epoch, a.isr, a.zk_version) != (z.leader, z.leader_epoch, z.isr,
                                                               z.zk_version):
            return (f"controller {c} believes leader {a.leader} epoch {a.leader_epoch} ISR "
                    f"{list(a.isr)}, ZooKeeper holds leader {z.leader} epoch {z.leader_epoch} "
                    f"ISR {list(z.isr)}")
    return None


def leader_epoch_monotonic(before: World, after: World) -> str | None:
    """A running replica only ever moves to a larger leader epoch."""
    for i, (a, b) in enumerate(zip(before.nodes, after.nodes, strict=True)):
        if a.state is b.state:
            continue  # most actions change one or two brokers: the others trivially hold
        ra, rb = _replica(a), _replica(b)
        if ra is not None and rb is not None and rb.leader_epoch < ra.leader_epoch:
            return f"broker {i}: leader epoch went from {ra.leader_epoch} to {rb.leader_epoch}"
    return None


def controller_epoch_monotonic(before: World, after: World) -> str | None:
    if after.zk.controller_epoch < before.zk.controller_epoch:
        return "ZooKeeper's controller epoch went down"
    for i, (a, b) in enumerate(zip(before.nodes, after.nodes, strict=True)):
        if a.state is not b.state and a.state is not None and b.state is not None and (
            b.state.controller_epoch < a.state.controller_epoch
        ):
            return f"broker {i}: controller epoch went down"
    return None


def zk_leader_epoch_monotonic(before: World, after: World) -> str | None:
    pa, pb = before.zk.partition, after.zk.partition
    if pa is not None and (pb is None or pb.leader_epoch < pa.leader_epoch):
        return "the partition's leader epoch in ZooKeeper went down"
    return None


def hw_monotonic(before: World, after: World) -> str | None:
    """A leader's HW never goes down while it leads in the same epoch."""
    for i, (a, b) in enumerate(zip(before.nodes, after.nodes, strict=True)):
        if a.state is b.state:
            continue
        ra, rb = _replica(a), _replica(b)
        if (ra is not None and rb is not None and ra.role == rb.role == Role.LEADER
                and ra.leader_epoch == rb.leader_epoch and rb.high_watermark < ra.high_watermark):
            return f"broker {i}: leader HW went from {ra.high_watermark} to {rb.high_watermark}"
    return None


def unwatched_isr_members(r: ReplicaState, timers: Collection[TimerKey]) -> tuple[int, ...]:
    """The other ISR members a leader with no ISR write in flight has no lag timer for
    (`timers`: the broker's armed ones)."""
    if r.role != Role.LEADER or r.pending_isr is not None:
        return ()
    if not timers:  # a projection without timers: no key to build
        return tuple(f for f in r.isr if f != r.broker_id)
    return tuple(f for f in r.isr
                 if f != r.broker_id and ReplicaLagTimer(r.tp, f) not in timers)


def isr_members_watched(w: World) -> str | None:
    """A leader watches every other ISR member with its lag timer (Kafka's ISR expiration
    looks at each member's lastCaughtUpTimeMs), except while its own ISR write is in flight,
    which the lag timer waits for. An unwatched member that stops fetching stays in the ISR
    for good, and the HW, with every acks=all produce, waits for it: a liveness failure the
    safety invariants cannot see. Reads the timers: the model checker and Hypothesis keep
    them in the world; the simulator, whose projection keeps none, runs this check on its
    interpreters' armed timers (harness/sim/cluster.py); the live probe cannot see them."""
    for n in w.nodes:
        r = _replica(n)
        if r is None:
            continue
        missing = unwatched_isr_members(r, n.timers)
        if missing:
            return (f"broker {r.broker_id} leads epoch {r.leader_epoch} with ISR {list(r.isr)} "
                    f"and no lag timer for {list(missing)}: a member that stops fetching "
                    "would never leave the ISR")
    return None


def controlled_shutdown_moves_leadership(w: World) -> str | None:
    """A broker that stops after a successful controlled shutdown leads nothing any more
    when another live ISR member could lead (the point of controlled shutdown: no partition
    is offline while its broker restarts)."""
    if w.ghost.stopped_as_leader:
        return ("a broker stopped after its controlled shutdown while ZooKeeper still named "
                "it leader, with a live ISR member to take over")
    return None


def controlled_shutdown_shrinks_isr(w: World) -> str | None:
    """While a broker shuts down, the controller never writes an ISR that keeps it next to
    other members (so acks=all and the HW do not wait for a broker that is going away)."""
    if w.ghost.stopped_in_isr:
        return ("the controller wrote an ISR that keeps a shutting-down broker next to other "
                "members")
    return None


@dataclass(frozen=True)
class Invariant:
    name: str
    check: Check
    needs_acks: bool = False  # only meaningful when records are acknowledged


STATE_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("strong_isr", strong_isr),
    Invariant("weak_isr", weak_isr),
    Invariant("leader_in_isr", leader_in_isr),
    Invariant("high_watermark_le_log_end", high_watermark_le_log_end),
    Invariant("log_end_matches_disk", log_end_matches_disk),
    Invariant("log_matching", log_matching),
    Invariant("epoch_offset_uniqueness", epoch_offset_uniqueness),
    Invariant("leader_completeness", leader_completeness, needs_acks=True),
    Invariant("no_acked_record_lost", no_acked_record_lost, needs_acks=True),
    Invariant("consistent_read", consistent_read),
    Invariant("single_leader_per_epoch", single_leader_per_epoch),
    Invariant("controller_cache_matches_zk", controller_cache_matches_zk),
    Invariant("list_offsets_monotonic", list_offsets_monotonic),
    Invariant("controlled_shutdown_moves_leadership", controlled_shutdown_moves_leadership),
    Invariant("controlled_shutdown_shrinks_isr", controlled_shutdown_shrinks_isr),
    Invariant("isr_members_watched", isr_members_watched),
)

# invariants that read the brokers' timers: drivers whose projection keeps none leave them
# out of their projected checks (the simulator checks them on its interpreters' timers)
TIMER_INVARIANTS = frozenset({"isr_members_watched"})

STEP_INVARIANTS: tuple[tuple[str, StepCheck], ...] = (
    ("leader_epoch_monotonic", leader_epoch_monotonic),
    ("controller_epoch_monotonic", controller_epoch_monotonic),
    ("zk_leader_epoch_monotonic", zk_leader_epoch_monotonic),
    ("hw_monotonic", hw_monotonic),
)


NAMES = tuple(i.name for i in STATE_INVARIANTS) + tuple(n for n, _ in STEP_INVARIANTS)


def view(w: World, nodes: tuple[object, ...] | None = None) -> tuple[object, ...]:
    """Everything the state invariants (and their messages) read, and nothing else: per
    broker whether it runs, its replica's role, leader epoch, HW, LEO and ISR (and, for a
    leader, the ISR members it has no lag timer for), its log, the
    partition states its controller holds and whether it has notifications pending;
    ZooKeeper's partition and controller; the ghost's acknowledged records, exposure flag,
    leaders per epoch and ListOffsets answers. Two worlds with equal views get equal
    `check_state` answers, so the checker evaluates the invariants once per view (far fewer
    than states: timers, network, fetch states and epochs of other kinds vary freely).
    An invariant that reads anything else must add it here. `nodes`: `node_view` of each
    of `w.nodes`, when the caller kept them (the simulator, whose events change one or two
    brokers)."""
    if nodes is None:
        nodes = tuple([node_view(n) for n in w.nodes])
    g = w.ghost
    return (nodes, w.zk.partition, w.zk.controller, g.acked, g.conflicting_exposure,
            g.leaders, g.listed_backwards, g.latest_listed, g.stopped_as_leader,
            g.stopped_in_isr)


def node_view(n: Node) -> tuple[object, ...]:
    """One broker's part of `view`."""
    st = n.state
    if st is None:
        return (False, n.disk.records)
    r = None
    for x in st.replicas:
        if x.tp == TP:
            r = x
    rv = None if r is None else (r.role, r.leader_epoch, r.high_watermark,
                                 r.log_end_offset, r.isr)
    ctl = None if st.controller is None else st.controller.partitions
    unwatched = () if r is None else unwatched_isr_members(r, n.timers)
    return (True, rv, n.disk.records, ctl, bool(n.inbox), unwatched)


def check_state(w: World, only: frozenset[str] | None = None) -> tuple[str, str] | None:
    """The first state invariant broken (among `only`, when given)."""
    for inv in STATE_INVARIANTS:
        if only is not None and inv.name not in only:
            continue
        why = inv.check(w)
        if why is not None:
            return inv.name, why
    return None


def check_step(before: World, after: World,
               only: frozenset[str] | None = None) -> tuple[str, str] | None:
    for name, f in STEP_INVARIANTS:
        if only is not None and name not in only:
            continue
        why = f(before, after)
        if why is not None:
            return name, why
    return None
