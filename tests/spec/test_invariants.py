"""Each invariant of spec/invariants.py, broken on purpose: a healthy world reached by the
model (broker 0 leads epoch 0 with ISR [0, 1], both hold the acknowledged record 0 below
HW 1), then one field changed so that exactly the named property fails, and the same change
just short of the boundary, where it must hold. The historic-bug traces exercise only the
invariant each bug breaks first; these pin the others (found by mutation testing: an
invariant weakened to never fire passed every trace)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from core.replica import ReplicaState
from core.timers import LeaderImbalanceTimer, ReplicaLagTimer
from core.types import NO_LEADER, Role
from spec import invariants as inv
from spec.checker import replay
from spec.model import Model
from spec.trace import load
from spec.world import TP, World

TRACE = Path(__file__).parent / "traces" / "last-replica-standing.jsonl"


@pytest.fixture(scope="module")
def healthy() -> World:
    """The trace's first six actions: elected, both replicas caught up, record 0 acked."""
    config, bounds, actions, _ = load(TRACE)
    w = replay(Model(config, bounds), actions[:6])[-1][1]
    assert [(_rep(w, i).role, _rep(w, i).high_watermark, _rep(w, i).log_end_offset)
            for i in (0, 1)] == [(Role.LEADER, 1, 1), (Role.FOLLOWER, 1, 1)]
    assert w.nodes[0].disk.records == w.nodes[1].disk.records == ((0, 0),)
    assert w.zk.partition is not None and w.zk.partition.isr == (0, 1)
    assert w.ghost.acked == {0} and w.zk.controller == 0
    assert inv.check_state(w) is None and inv.check_step(w, w) is None
    return w


def _rep(w: World, i: int) -> ReplicaState:
    r = inv._replica(w.nodes[i])
    assert r is not None
    return r


def with_replica(w: World, i: int, **changes: Any) -> World:
    node = w.nodes[i]
    assert node.state is not None
    reps = tuple(r._replace(**changes) if r.tp == TP else r for r in node.state.replicas)
    return _node(w, i, node._replace(state=node.state._replace(replicas=reps)))


def with_records(w: World, i: int, records: tuple[tuple[int, int], ...]) -> World:
    node = w.nodes[i]
    return _node(w, i, node._replace(disk=node.disk._replace(records=records)))


def with_zk_partition(w: World, **changes: Any) -> World:
    assert w.zk.partition is not None
    return w._replace(zk=w.zk._replace(partition=w.zk.partition._replace(**changes)))


def with_ghost(w: World, **changes: Any) -> World:
    return w._replace(ghost=w.ghost._replace(**changes))


def crashed(w: World, i: int) -> World:
    return _node(w, i, w.nodes[i]._replace(state=None))


def _node(w: World, i: int, node: Any) -> World:
    return w._replace(nodes=(*w.nodes[:i], node, *w.nodes[i + 1:]))


def broken(w: World) -> set[str]:
    """Every state invariant `w` breaks (check_state stops at the first)."""
    return {i.name for i in inv.STATE_INVARIANTS if i.check(w) is not None}


def test_strong_and_weak_isr(healthy: World) -> None:
    """strong_isr reads ZooKeeper's ISR (any member could be elected), weak_isr the leader's
    own view: a member that differs below the leader's HW breaks the one whose ISR holds
    it, and a difference at the HW or above breaks neither."""
    diverged = with_records(healthy, 1, ((9, 0),))
    # the leader alone in its own ISR view, ZooKeeper still lists broker 1
    w = with_replica(diverged, 0, isr=(0,))
    assert inv.strong_isr(w) is not None and inv.weak_isr(w) is None
    # ZooKeeper shrank the ISR, the leader still counts broker 1
    w = with_zk_partition(diverged, isr=(0,), leader=0)
    assert inv.weak_isr(w) is not None and inv.strong_isr(w) is None
    # a difference at offset HW or beyond is not exposed: both hold
    w = with_records(healthy, 1, ((0, 0), (9, 0)))
    assert inv.strong_isr(w) is None and inv.weak_isr(w) is None
    # no partition in ZooKeeper yet: strong_isr has nothing to judge
    assert inv.strong_isr(diverged._replace(zk=diverged.zk._replace(partition=None))) is None
    # a follower exposes nothing: only leaders are judged
    w = with_replica(diverged, 0, role=Role.FOLLOWER)
    assert inv.strong_isr(w) is None and inv.weak_isr(w) is None


def test_leader_in_isr(healthy: World) -> None:
    assert inv.leader_in_isr(with_zk_partition(healthy, leader=1, isr=(0,))) is not None
    assert inv.leader_in_isr(with_zk_partition(healthy, leader=1, isr=(0, 1))) is None
    assert inv.leader_in_isr(with_zk_partition(healthy, leader=NO_LEADER, isr=(0,))) is None


def test_high_watermark_never_passes_the_log_end(healthy: World) -> None:
    assert broken(with_replica(healthy, 1, high_watermark=2)) >= {"high_watermark_le_log_end"}
    assert inv.high_watermark_le_log_end(with_replica(healthy, 1, high_watermark=0)) is None
    assert inv.high_watermark_le_log_end(crashed(healthy, 1)) is None


def test_the_cores_log_end_is_the_disks(healthy: World) -> None:
    assert inv.log_end_matches_disk(with_replica(healthy, 1, log_end_offset=2)) is not None
    assert inv.log_end_matches_disk(with_replica(healthy, 1, log_end_offset=0)) is not None
    assert inv.log_end_matches_disk(with_records(crashed(healthy, 1), 1, ())) is None


def test_log_matching_below_both_high_watermarks(healthy: World) -> None:
    diverged = with_records(healthy, 1, ((9, 0),))
    assert inv.log_matching(diverged) is not None
    # broker 1's HW at 0: nothing below both HWs to compare
    assert inv.log_matching(with_replica(diverged, 1, high_watermark=0)) is None
    assert inv.log_matching(with_replica(diverged, 0, high_watermark=0)) is None
    assert inv.log_matching(crashed(diverged, 1)) is None


def test_log_matching_names_the_first_pair_in_broker_order(healthy: World) -> None:
    """Broker 0 differs from both others: the report names the lowest pair, 0 and 1 (a
    third broker, a copy of broker 1, added for this pure check)."""
    three = healthy._replace(nodes=(*healthy.nodes[:2], healthy.nodes[1]))
    odd = with_records(three, 0, ((9, 0),))
    message = inv.log_matching(odd)
    assert message is not None and message.startswith("brokers 0 and 1 differ"), message


def test_one_record_per_offset_and_epoch(healthy: World) -> None:
    clash = with_records(with_records(healthy, 0, ((5, 0),)), 1, ((9, 0),))
    assert inv.epoch_offset_uniqueness(clash) == (
        "offset 0 epoch 0: broker 0 has record 5, broker 1 has record 9")
    # another epoch at the same offset, or another offset, is a different place
    assert inv.epoch_offset_uniqueness(with_records(healthy, 1, ((9, 1),))) is None
    assert inv.epoch_offset_uniqueness(with_records(healthy, 1, ((0, 0), (9, 0)))) is None


def test_a_leader_of_its_epoch_holds_every_acknowledged_record(healthy: World) -> None:
    lost = with_ghost(healthy, acked=frozenset({0, 7}))
    assert inv.leader_completeness(lost) is not None
    # not yet leader in ZooKeeper's epoch (the LeaderAndIsr is on its way): not judged
    assert inv.leader_completeness(with_zk_partition(lost, leader_epoch=1)) is None
    assert inv.leader_completeness(with_replica(lost, 0, role=Role.FOLLOWER)) is None
    assert inv.leader_completeness(with_zk_partition(lost, leader=NO_LEADER)) is None
    assert inv.leader_completeness(crashed(lost, 0)) is None
    assert inv.leader_completeness(with_ghost(healthy, acked=frozenset())) is None


def test_no_acknowledged_record_is_lost(healthy: World) -> None:
    assert inv.no_acked_record_lost(with_ghost(healthy, acked=frozenset({0, 7}))) is not None
    only_on_1 = with_records(with_records(healthy, 0, ()), 1, ((0, 0),))
    assert inv.no_acked_record_lost(only_on_1) is None


def test_ghost_flags_are_reported(healthy: World) -> None:
    for flag, name in (("conflicting_exposure", "consistent_read"),
                       ("listed_backwards", "list_offsets_monotonic"),
                       ("stopped_as_leader", "controlled_shutdown_moves_leadership"),
                       ("stopped_in_isr", "controlled_shutdown_shrinks_isr")):
        assert broken(with_ghost(healthy, **{flag: True})) == {name}


def test_one_leader_per_epoch(healthy: World) -> None:
    assert inv.single_leader_per_epoch(with_ghost(healthy, leaders=((0, 0), (0, 1)))) is not None
    assert inv.single_leader_per_epoch(with_ghost(healthy, leaders=((0, 0), (1, 1)))) is None
    assert inv.single_leader_per_epoch(with_ghost(healthy, leaders=((0, 0), (0, 0)))) is None
    assert inv.single_leader_per_epoch(
        with_ghost(healthy, leaders=((0, 0), (1, 1), (0, 1)))) is not None


def test_the_controllers_cache_is_zookeepers(healthy: World) -> None:
    stale = with_zk_partition(healthy, leader_epoch=1)
    assert inv.controller_cache_matches_zk(stale) is not None
    assert inv.controller_cache_matches_zk(with_zk_partition(healthy, zk_version=1)) is not None
    # a notification not yet processed: not judged
    node = stale.nodes[0]._replace(inbox=("isr",))
    assert inv.controller_cache_matches_zk(_node(stale, 0, node)) is None
    assert inv.controller_cache_matches_zk(stale._replace(
        zk=stale.zk._replace(controller=NO_LEADER))) is None
    assert inv.controller_cache_matches_zk(crashed(stale, 0)) is None
    # a partition the controller knows without state (a new topic), or none in ZooKeeper
    node = stale.nodes[0]
    assert node.state is not None and node.state.controller is not None
    ctl = node.state.controller
    new = ctl._replace(partitions=tuple(p._replace(state=None) for p in ctl.partitions))
    no_state = _node(stale, 0, node._replace(state=node.state._replace(controller=new)))
    assert inv.controller_cache_matches_zk(no_state) is None
    assert inv.controller_cache_matches_zk(stale._replace(
        zk=stale.zk._replace(partition=None))) is None
    not_a_controller = node._replace(state=node.state._replace(controller=None))
    assert inv.controller_cache_matches_zk(_node(stale, 0, not_a_controller)) is None


def test_epochs_never_go_down(healthy: World) -> None:
    later = with_replica(healthy, 1, leader_epoch=1)
    assert inv.leader_epoch_monotonic(later, healthy) is not None
    assert inv.leader_epoch_monotonic(healthy, later) is None
    assert inv.leader_epoch_monotonic(crashed(later, 1), healthy) is None
    zk_later = healthy._replace(zk=healthy.zk._replace(controller_epoch=2))
    assert inv.controller_epoch_monotonic(zk_later, healthy) is not None
    assert inv.controller_epoch_monotonic(healthy, zk_later) is None
    node = healthy.nodes[1]
    assert node.state is not None
    b_later = _node(healthy, 1, node._replace(state=node.state._replace(
        controller_epoch=node.state.controller_epoch + 1)))
    assert inv.controller_epoch_monotonic(b_later, healthy) is not None
    assert inv.controller_epoch_monotonic(healthy, b_later) is None
    assert inv.controller_epoch_monotonic(b_later, crashed(healthy, 1)) is None
    p_later = with_zk_partition(healthy, leader_epoch=1)
    assert inv.zk_leader_epoch_monotonic(p_later, healthy) is not None
    assert inv.zk_leader_epoch_monotonic(healthy, p_later) is None
    assert inv.zk_leader_epoch_monotonic(
        healthy, healthy._replace(zk=healthy.zk._replace(partition=None))) is not None


def test_a_leaders_high_watermark_never_goes_down_within_its_epoch(healthy: World) -> None:
    lower = with_replica(healthy, 0, high_watermark=0)
    assert inv.hw_monotonic(healthy, lower) is not None
    assert inv.hw_monotonic(lower, healthy) is None
    # a new epoch, or a follower, may start lower
    assert inv.hw_monotonic(healthy, with_replica(lower, 0, leader_epoch=1)) is None
    assert inv.hw_monotonic(healthy, with_replica(healthy, 1, high_watermark=0)) is None
    assert inv.hw_monotonic(with_replica(healthy, 0, role=Role.FOLLOWER),
                            with_replica(lower, 0, role=Role.FOLLOWER)) is None


def without_timer(w: World, i: int, key: Any) -> World:
    return _node(w, i, w.nodes[i]._replace(timers=w.nodes[i].timers - {key}))


def test_a_leader_watches_every_isr_member(healthy: World) -> None:
    lag = ReplicaLagTimer(TP, 1)
    assert lag in healthy.nodes[0].timers
    unwatched = without_timer(healthy, 0, lag)
    assert broken(unwatched) == {"isr_members_watched"}
    # while its ISR write is in flight the lag timer waits for it (on_lag_timer re-arms)
    assert broken(with_replica(unwatched, 0, pending_isr=(0,))) == set()
    # a member that left the ISR, or a follower's timers, are not its business
    assert "isr_members_watched" not in broken(with_replica(unwatched, 0, isr=(0,)))
    assert broken(_node(healthy, 1, healthy.nodes[1]._replace(timers=frozenset()))) == set()
    assert "isr_members_watched" in inv.TIMER_INVARIANTS


def test_check_state_and_check_step_name_the_first_broken_invariant(healthy: World) -> None:
    w = with_ghost(healthy, conflicting_exposure=True, listed_backwards=True)
    first = inv.check_state(w)
    assert first is not None and first[0] == "consistent_read"
    only = frozenset({"list_offsets_monotonic"})
    assert inv.check_state(w, only) == (
        "list_offsets_monotonic", inv.list_offsets_monotonic(w))
    assert inv.check_state(w, frozenset({"strong_isr"})) is None
    lower = with_replica(healthy, 0, high_watermark=0)
    assert inv.check_step(healthy, lower) == ("hw_monotonic", inv.hw_monotonic(healthy, lower))
    assert inv.check_step(healthy, lower, frozenset({"leader_epoch_monotonic"})) is None
    assert inv.check_step(healthy, lower, frozenset({"hw_monotonic"})) is not None
    assert set(inv.NAMES) == {i.name for i in inv.STATE_INVARIANTS} | {
        n for n, _ in inv.STEP_INVARIANTS}
    assert [i.name for i in inv.STATE_INVARIANTS if i.needs_acks] == [
        "leader_completeness", "no_acked_record_lost"]
    # the tables are shared by every driver: their entries cannot be changed in place
    with pytest.raises(dataclasses.FrozenInstanceError):
        inv.STATE_INVARIANTS[0].needs_acks = True  # type: ignore[misc]


def test_worlds_with_equal_views_get_equal_answers(healthy: World) -> None:
    """The checker evaluates the invariants once per view: every change above that breaks
    an invariant must change the view, and a change no invariant reads must not."""
    changed = [
        with_records(healthy, 1, ((9, 0),)), with_replica(healthy, 0, isr=(0,)),
        with_replica(healthy, 1, high_watermark=0), with_replica(healthy, 1, log_end_offset=2),
        with_replica(healthy, 0, role=Role.FOLLOWER), with_replica(healthy, 1, leader_epoch=1),
        with_zk_partition(healthy, leader_epoch=1), crashed(healthy, 1),
        with_records(crashed(healthy, 1), 1, ()),
        _node(healthy, 0, healthy.nodes[0]._replace(inbox=("isr",))),
        healthy._replace(zk=healthy.zk._replace(controller=NO_LEADER)),
        with_ghost(healthy, acked=frozenset()), with_ghost(healthy, conflicting_exposure=True),
        with_ghost(healthy, leaders=()), with_ghost(healthy, listed_backwards=True),
        with_ghost(healthy, latest_listed=3), with_ghost(healthy, stopped_as_leader=True),
        with_ghost(healthy, stopped_in_isr=True),
        without_timer(healthy, 0, ReplicaLagTimer(TP, 1)),
    ]
    views = [inv.view(w) for w in changed]
    assert inv.view(healthy) not in views
    assert len(set(views)) == len(views)
    unread = healthy._replace(ghost=healthy.ghost._replace(drops=1, moves=2),
                              nodes=(without_timer(healthy, 0, LeaderImbalanceTimer()).nodes[0],
                                     healthy.nodes[1]._replace(timers=frozenset())))
    assert inv.view(unread) == inv.view(healthy)
