"""Crashes, pauses and clean stops of live brokers, with confluent-kafka as the client.

Each test has its own 3-broker cluster (RF 3, min.insync.replicas 2) whose brokers use a
4 s ZooKeeper session (the test ZooKeeper's tickTime is 500 ms: sessions of 1-10 s), so a
crashed broker is noticed within about that time.

1. SIGKILL of a partition leader under an acks=all idempotent producer: no acknowledged record
   is lost, a new leader is elected within a bound, the restarted broker catches up and
   rejoins the ISR within a bound.
2. SIGKILL of the controller: another broker becomes controller with a higher epoch and every
   partition keeps (or gets back) a live leader.
3. SIGSTOP of the controller past its session: a new controller with a higher epoch; after
   SIGCONT the old one stops acting as controller, no broker's controller epoch goes back,
   and produce/consume works.
4. SIGTERM (controlled shutdown) of a leader: leadership moves away while it is still
   registered, and no acknowledged record is lost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.runtime.cluster import LocalCluster

from .faults_support import (
    EpochSampler,
    ProducerThread,
    admin,
    create_topic,
    metadata,
    read_partition,
    replica,
    wait_for,
)
from .wire_live_support import discard_cluster, start_cluster_patiently

SESSION_MS = 4000
ELECTION_BOUND_S = 15.0  # kill -> a different live leader in a survivor's Metadata
CATCH_UP_BOUND_S = 45.0  # restart -> LEO equal to the leader's and back in its ISR (a broker
# process takes 1-10 s to start on a loaded 2-CPU machine)
CONTROLLER_BOUND_S = 15.0
RESTART_BOUND_S = 45.0  # restart -> registered and following the current controller

pytestmark = [pytest.mark.timeout(150), pytest.mark.slow]


@pytest.fixture
def fault_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    overrides = {"zookeeper.session.timeout.ms": str(SESSION_MS)}
    c = start_cluster_patiently(tmp_path / "cluster", 3, **overrides)
    try:
        yield c
    finally:
        discard_cluster(c)


def _logs(c: LocalCluster) -> str:
    return "\n".join(f"--- broker {i} ---\n{c.log_tail(i, 30)}" for i in sorted(c.nodes))


def _check_no_loss(c: LocalCluster, topic: str, partitions: list[int],
                   prod: ProducerThread) -> None:
    """Every acknowledged value is in its partition at its acknowledged offset; the idempotent
    producer left no duplicates."""
    for p in partitions:
        records = read_partition(c, topic, p)
        by_value: dict[bytes, list[int]] = {}
        for off, v in records:
            by_value.setdefault(v, []).append(off)
        acked = {v: o for v, (pp, o) in prod.acked.items() if pp == p}
        lost = sorted(v for v in acked if v not in by_value)
        assert not lost, f"partition {p}: {len(lost)} acknowledged values lost, e.g. {lost[:5]}"
        moved = {v: (o, by_value[v]) for v, o in acked.items() if o not in by_value[v]}
        assert not moved, f"partition {p}: acknowledged at another offset: {list(moved)[:5]}"
        dups = {v: offs for v, offs in by_value.items() if len(offs) > 1}
        assert not dups, f"partition {p}: duplicates from an idempotent producer: " \
                         f"{list(dups.items())[:5]}"


# ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_leader_kill_loses_no_acknowledged_write(
        fault_cluster: LocalCluster, record_property: Any) -> None:
    c = fault_cluster
    topic = "kill-leader"
    create_topic(c, topic, 1)
    old = metadata(c, 1, topic).partitions[0]
    victim = old.leader
    survivors = [i for i in sorted(c.nodes) if i != victim]

    prod = ProducerThread(c.bootstrap, topic, [0]).start()
    try:
        prod.wait_acked(200, 20, "before the kill")
        t0 = time.monotonic()
        c.kill(victim)

        def new_leader() -> int:
            for s in survivors:
                m = metadata(c, s, topic, 1.0)
                p = m.partitions[0]
                if p.leader not in (victim, -1) and p.leader in m.brokers \
                        and p.leader_epoch > old.leader_epoch:
                    return p.leader
            return 0

        leader = wait_for(new_leader, ELECTION_BOUND_S, "a new leader", 0.02)
        election_s = time.monotonic() - t0
        before = prod.acked_count()
        prod.wait_acked(before + 200, 30, "after the failover")
    finally:
        prod.stop()
    record_property("election_s", round(election_s, 2))
    record_property("producer", prod.summary())
    print(f"leader {victim} killed: broker {leader} leads after {election_s:.2f}s; "
          f"{prod.summary()}")
    assert not prod.fatal, prod.fatal
    assert election_s < ELECTION_BOUND_S

    # the killed broker comes back, catches up and rejoins the ISR
    t1 = time.monotonic()
    c.start_broker(victim)

    def caught_up() -> bool:
        lead = replica(admin(c, leader), topic, 0)
        back = replica(admin(c, victim), topic, 0)
        return (lead is not None and back is not None and lead["role"] == "leader"
                and victim in lead["isr"] and back["role"] == "follower"
                and back["log_end_offset"] == lead["log_end_offset"])

    wait_for(caught_up, CATCH_UP_BOUND_S, f"broker {victim} to catch up and rejoin the ISR")
    record_property("rejoin_s", round(time.monotonic() - t1, 2))
    print(f"broker {victim} back in the ISR after {time.monotonic() - t1:.2f}s")
    _check_no_loss(c, topic, [0], prod)


def test_controller_kill_elects_a_new_controller(fault_cluster: LocalCluster) -> None:
    c = fault_cluster
    topic = "kill-controller"
    create_topic(c, topic, 3)
    ctrl = c.controller()
    old_epoch = int(admin(c, ctrl)["controller_epoch"])
    survivors = [i for i in sorted(c.nodes) if i != ctrl]

    t0 = time.monotonic()
    c.kill(ctrl)

    def new_controller() -> int:
        for s in survivors:
            v = admin(c, s)
            if v["is_controller"] and v["controller_epoch"] > old_epoch:
                return s
        return 0

    new = wait_for(new_controller, CONTROLLER_BOUND_S, "a new controller")
    print(f"controller {ctrl} killed: broker {new} is controller after "
          f"{time.monotonic() - t0:.2f}s")
    new_epoch = int(admin(c, new)["controller_epoch"])
    assert new_epoch > old_epoch

    def leaders_ok() -> bool:
        for s in survivors:
            m = metadata(c, s, topic, 1.0)
            if m.controller_id != new or ctrl in m.brokers or len(m.partitions) != 3:
                return False
            if any(p.leader not in survivors for p in m.partitions.values()):
                return False
            if any(admin(c, x)["controller_epoch"] != new_epoch for x in survivors):
                return False
        return True

    wait_for(leaders_ok, CONTROLLER_BOUND_S, "every partition led by a live broker")

    prod = ProducerThread(c.bootstrap, topic, [0, 1, 2]).start()
    try:
        prod.wait_acked(60, 20, "with the new controller")
    finally:
        prod.stop()
    assert not prod.failed and not prod.fatal, prod.summary()
    _check_no_loss(c, topic, [0, 1, 2], prod)

    # the old controller restarts as an ordinary broker that follows the new epoch
    c.start_broker(ctrl)

    def follows() -> bool:
        v = admin(c, ctrl)
        seen = {k: v[k] for k in ("controller_id", "controller_epoch", "is_controller")}
        assert seen == {"controller_id": new, "controller_epoch": new_epoch,
                        "is_controller": False}, seen
        return True

    wait_for(follows, RESTART_BOUND_S, f"restarted broker {ctrl} to follow controller {new}")


def test_paused_controller_is_fenced_after_its_session_expires(
        fault_cluster: LocalCluster) -> None:
    c = fault_cluster
    topic = "pause-controller"
    create_topic(c, topic, 3)
    ctrl = c.controller()
    old_epoch = int(admin(c, ctrl)["controller_epoch"])
    others = [i for i in sorted(c.nodes) if i != ctrl]

    with EpochSampler(c, sorted(c.nodes)) as sampler:
        t0 = time.monotonic()
        c.pause(ctrl)
        try:
            def new_controller() -> int:
                for s in others:
                    v = admin(c, s)
                    if v["is_controller"] and v["controller_epoch"] > old_epoch:
                        return s
                return 0

            new = wait_for(new_controller, CONTROLLER_BOUND_S, "a new controller")
            elected_s = time.monotonic() - t0
            # /controller is ephemeral: a new controller means the paused one's session is gone
            assert elected_s >= SESSION_MS / 1000 * 0.5, elected_s
            new_epoch = int(admin(c, new)["controller_epoch"])
            wait_for(lambda: all(metadata(c, s, topic, 1.0).controller_id == new
                                 for s in others), CONTROLLER_BOUND_S,
                     "the survivors to name the new controller")
            time.sleep(1.0)  # the paused broker stays paused a while past its session
        finally:
            c.resume(ctrl)
        t1 = time.monotonic()

        def stepped_down() -> bool:
            v = admin(c, ctrl)
            return (not v["is_controller"] and v["controller_epoch"] >= new_epoch
                    and v["controller_id"] == new)

        wait_for(stepped_down, CONTROLLER_BOUND_S, f"broker {ctrl} to step down")
        t2 = time.monotonic()
        print(f"controller {ctrl} paused: broker {new} controller after {elected_s:.2f}s "
              f"(epoch {old_epoch} -> {new_epoch}); old one stepped down "
              f"{time.monotonic() - t1:.2f}s after resume")
        # it re-registers (a new session) and every broker lists it again
        wait_for(lambda: all(ctrl in metadata(c, s, topic, 1.0).brokers for s in others)
                 and ctrl in metadata(c, ctrl, topic, 1.0).brokers,
                 CONTROLLER_BOUND_S, f"broker {ctrl} registered again")
        # a while of watching: nobody goes back to the old epoch, nobody else claims control
        time.sleep(2.0)

    assert sampler.regressions() == [], sampler.regressions()
    # once it has noticed, only the new controller claims the role, at its epoch
    after = [(t, i, e, ic) for t, i, e, ic in sampler.samples if t > t2]
    assert after, "no samples after the old controller stepped down"
    claims = {(i, e) for _, i, e, ic in after if ic}
    assert claims <= {(new, new_epoch)}, f"controllers after the resume: {claims}"
    assert all(e >= new_epoch for _, i, e, _ in after if i in others)
    assert int(admin(c, new)["controller_epoch"]) == new_epoch  # no further election
    assert all(metadata(c, s, topic).controller_id == new for s in sorted(c.nodes))

    prod = ProducerThread(c.bootstrap, topic, [0, 1, 2]).start()
    try:
        prod.wait_acked(60, 20, "after the resume")
    finally:
        prod.stop()
    assert not prod.failed and not prod.fatal, prod.summary()
    _check_no_loss(c, topic, [0, 1, 2], prod)


def test_controlled_shutdown_moves_leadership_without_losing_writes(
        fault_cluster: LocalCluster, record_property: Any) -> None:
    c = fault_cluster
    topic = "controlled-shutdown"
    create_topic(c, topic, 3)
    ctrl = c.controller()
    m = metadata(c, ctrl, topic)
    leaders = {p.leader for p in m.partitions.values()}
    # a leader that is not the controller when there is one (the usual rolling restart case)
    victim = min(leaders - {ctrl}) if leaders - {ctrl} else min(leaders)
    led = sorted(p.partition for p in m.partitions.values() if p.leader == victim)
    survivors = [i for i in sorted(c.nodes) if i != victim]
    watcher = next(s for s in survivors if s == ctrl) if ctrl != victim else survivors[0]

    # Watch a survivor's Metadata while the victim stops: with a controlled shutdown its
    # partitions get new leaders while it is still a registered (live) broker.
    samples: list[tuple[float, tuple[int, ...], dict[int, int]]] = []
    stop_watch = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + 60
        while not stop_watch.is_set() and time.monotonic() < deadline:
            try:
                mv = metadata(c, watcher, topic, 1.0)
            except (OSError, AssertionError):
                continue
            samples.append((time.monotonic(), mv.brokers,
                            {p.partition: p.leader for p in mv.partitions.values()}))
            time.sleep(0.01)

    prod = ProducerThread(c.bootstrap, topic, [0, 1, 2]).start()
    w = threading.Thread(target=watch, daemon=True)
    try:
        prod.wait_acked(150, 20, "before the shutdown")
        w.start()
        t0 = time.monotonic()
        c.stop_broker(victim, timeout_s=45)
        stop_s = time.monotonic() - t0
        before = prod.acked_count()
        prod.wait_acked(before + 150, 30, "after the shutdown")
    finally:
        stop_watch.set()
        prod.stop()
        w.join(5)
    record_property("stop_s", round(stop_s, 2))
    record_property("producer", prod.summary())
    print(f"broker {victim} (leader of {led}) stopped in {stop_s:.2f}s; {prod.summary()}")
    assert stop_s < 30, f"the controlled shutdown took {stop_s:.1f}s\n{_logs(c)}"
    assert not prod.fatal, prod.fatal

    moved_while_live = [s for s in samples if victim in s[1]
                        and all(s[2].get(p) not in (victim, -1, None) for p in led)]
    assert moved_while_live, (
        f"broker {victim}'s partitions {led} never had other leaders while it was registered; "
        f"samples: {[(round(t - t0, 2), b, ls) for t, b, ls in samples[:40]]}")
    # The survivors learn of the deregistration through the controller's UpdateMetadata, which
    # follows the ZooKeeper watch; the producer's acks may come before it (CI run on 126ceb9).
    def without_victim(node: int) -> Any:
        mv = metadata(c, node, topic)
        return mv if victim not in mv.brokers else None

    for s in survivors:
        mv = wait_for(lambda s=s: without_victim(s), 15,
                      f"broker {s} to drop broker {victim} from its Metadata")
        assert all(p.leader in survivors for p in mv.partitions.values()), mv
    # A controlled shutdown: no request timed out, nothing failed. (CI, stop 23: a leader
    # re-added the stopping broker to the ISR without a lag timer and its HW waited for
    # good; tests/core/test_isr_watch.py.) The brokers' logs say which partition stalled.
    assert not prod.failed, f"{prod.summary()}\n{_logs(c)}"
    _check_no_loss(c, topic, [0, 1, 2], prod)
