"""The catalogue of historic Kafka replication bugs (and documented trade-offs) that the
checkers must find. Each entry names the reference scenario (B1-B18 in
shared/reference/kafka-replication.md), how to switch it back on, and the smallest bounds
at which our model checker finds it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from core.config import ProtocolConfig
from spec.model import Bounds


@dataclass(frozen=True)
class BugScenario:
    name: str
    reference: str  # the scenario id(s) in the reference catalogue
    description: str
    switch: str | None  # the core.config.Bugs field, or None for a configuration trade-off
    config_changes: tuple[tuple[str, object], ...]
    bounds: Bounds  # small bounds at which the checker finds it (BFS: a shortest trace)
    unfixed: bool = False  # ZooKeeper-era Kafka has no fix: found even with every fix on
    # The properties that tell the bug apart, when the bounds it needs (a lossy crash) break
    # others in the fixed protocol too; None: every invariant.
    invariants: tuple[str, ...] | None = None
    # "bfs" gives a shortest trace; "dfs" where the shortest lies beyond what BFS exhausts
    # in minutes (depth-first finds a longer one in seconds)
    strategy: str = "bfs"

    def config(self, base: ProtocolConfig | None = None) -> ProtocolConfig:
        cfg = base or ProtocolConfig()
        if self.config_changes:
            cfg = replace(cfg, **dict(self.config_changes))  # type: ignore[arg-type]
        if self.switch is not None:
            cfg = cfg.with_bug(self.switch)
        return cfg


CATALOGUE: tuple[BugScenario, ...] = (
    BugScenario(
        "acks-1", "B1",
        "producers use acks=1: a leader acknowledges before followers have the record, and "
        "losing that leader loses an acknowledged write (documented trade-off)",
        None, (), Bounds(brokers=2, records=1, leader_epochs=2, crashes=1, acks=1),
    ),
    BugScenario(
        "unclean-election", "B2",
        "unclean.leader.election.enable with min.insync.replicas=1: a replica outside the "
        "ISR is elected and committed records are lost",
        None, (("unclean_leader_election_enable", True), ("min_insync_replicas", 1)),
        Bounds(brokers=2, records=1, leader_epochs=3, crashes=1),
    ),
    BugScenario(
        "min-isr-1-lossy-crash", "B3",
        "min.insync.replicas=1 and one machine crash that loses the page cache: an "
        "acknowledged record that only the leader had is gone",
        None, (("min_insync_replicas", 1),),
        Bounds(brokers=2, records=1, leader_epochs=3, crashes=1, lossy_crashes=1),
    ),
    BugScenario(
        "last-replica-standing", "B4",
        "min.insync.replicas=2 is not enough against a lossy crash of the last ISR member: "
        "it is re-elected with an empty log (unfixed in ZooKeeper-era Kafka; KIP-966)",
        None, (),
        Bounds(brokers=2, records=2, leader_epochs=3, crashes=1, lossy_crashes=1),
        unfixed=True,
    ),
    BugScenario(
        "truncate-to-hw", "B5/B6",
        "followers truncate to their high watermark when they become followers (before "
        "KIP-101): a committed record is cut from an ISR member",
        "truncate_to_hw", (),
        Bounds(brokers=3, records=1, leader_epochs=2, crashes=0, leader_moves=1),
    ),
    BugScenario(
        "kip-101-only", "B7",
        "truncation by OffsetsForLeaderEpoch without KIP-279's epoch in the answer and "
        "without KAFKA-7415 (a new leader records its epoch): fast fail-overs diverge",
        "kip101_only", (),
        Bounds(brokers=2, records=2, leader_epochs=3, crashes=0, leader_moves=2, drops=1),
    ),
    BugScenario(
        "no-fetch-epoch-fencing", "B8",
        "fetches do not carry the current leader epoch (before KIP-320): a zombie follower "
        "of an old epoch helps advance the HW and later truncates committed data",
        "no_fetch_epoch_fencing", (),
        Bounds(brokers=3, records=1, leader_epochs=3, crashes=0, leader_moves=2),
    ),
    BugScenario(
        "unfenced-truncation", "B9",
        "OffsetsForLeaderEpoch is answered by a leader in another epoch: the follower "
        "truncates against a log that is itself about to be truncated",
        "unfenced_truncation", (),
        Bounds(brokers=3, records=1, leader_epochs=3, crashes=0, leader_moves=2),
    ),
    BugScenario(
        "kip-320-first-try", "B10",
        "followers truncate lazily when a fetch reveals a mismatch, and the leader cannot "
        "tell which epoch its followers follow",
        "kip320_first_try", (),
        Bounds(brokers=3, records=1, leader_epochs=3, crashes=0, leader_moves=2),
    ),
    BugScenario(
        "isr-expand-before-epoch-start", "B11",
        "a follower joins the ISR before the new leader's HW reaches its epoch start "
        "(KAFKA-7128)",
        "isr_expand_before_epoch_start", (),
        Bounds(brokers=3, records=1, leader_epochs=2, crashes=0, leader_moves=1, drops=1),
    ),
    BugScenario(
        "skip-truncate-same-leader", "B12",
        "a follower that missed an epoch skips truncation because the leader id did not "
        "change (KAFKA-7164)",
        "skip_truncate_same_leader", (),
        Bounds(brokers=3, records=2, leader_epochs=3, crashes=0, leader_moves=2),
        strategy="dfs",
    ),
    BugScenario(
        "no-controller-epoch-check", "B13",
        "controller writes are not fenced by /controller_epoch's version and brokers accept "
        "requests from an older controller (KAFKA-6082): a controller whose session expired "
        "still runs a queued preferred-leader election; its write lands and the new "
        "controller's view of the partition is silently stale",
        "no_controller_epoch_check", (),
        Bounds(brokers=2, records=0, leader_epochs=3, crashes=0, expiries=1,
               zk_watches="async", rebalance=True),
    ),
    BugScenario(
        "hw-over-committed-isr", "B14",
        "while an ISR expansion is in flight to ZooKeeper the leader advances its HW over the "
        "committed ISR only, not the maximal ISR (KIP-497): once the expansion lands, an ISR "
        "member lacks records below the HW",
        "hw_over_committed_isr", (),
        Bounds(brokers=2, records=2, leader_epochs=2, crashes=0, isr_writes="async", acks=1),
    ),
    BugScenario(
        "offsets-before-epoch-start", "B17",
        "a new leader answers ListOffsets before its HW reaches the start of its epoch "
        "(before KIP-207): the latest offset a client sees goes backwards",
        "offsets_before_epoch_start", (),
        Bounds(brokers=2, records=1, leader_epochs=2, crashes=0, leader_moves=1,
               list_offsets=2, drops=1),
    ),
    BugScenario(
        "unclean-shutdown-epoch-reuse", "B16 family (KIP-966)",
        "a leader that is also the controller loses its page cache in a machine crash, "
        "registers again and, before any controller has seen it go, becomes controller and "
        "trusts ZooKeeper's state, which still names it leader: it leads the same epoch "
        "again and writes a different record at an (offset, epoch) a follower already "
        "holds, so logs diverge undetectably (ZooKeeper-era Kafka; the broker epoch of "
        "KIP-380 only tells bounces the controller sees)",
        "failover_trusts_restarted", (),
        Bounds(brokers=2, records=2, leader_epochs=3, crashes=1, lossy_crashes=1),
        invariants=("epoch_offset_uniqueness",),
    ),
    BugScenario(
        "failover-trusts-restarted", "B16 family (KIP-966)",
        "the controller and leader loses its page cache, registers again and wins the "
        "controller election; the new controller trusts the ISR of the broker's old "
        "incarnation, so the emptied broker leads again and its follower truncates an "
        "acknowledged record away (found by the safe-wipe-one campaign in CI)",
        "failover_trusts_restarted", (),
        Bounds(brokers=3, records=1, leader_epochs=2, controller_epochs=3, crashes=1,
               lossy_crashes=1),
        invariants=("leader_completeness", "no_acked_record_lost"),
    ),
)


def by_name(name: str) -> BugScenario:
    for b in CATALOGUE:
        if b.name == name:
            return b
    raise KeyError(f"unknown bug {name!r}; known: {', '.join(b.name for b in CATALOGUE)}")
