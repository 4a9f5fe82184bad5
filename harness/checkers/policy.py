"""Which anomalies a configuration allows — kept apart from finding them.

The checkers report every anomaly they find; this module alone decides which of them make a
run invalid. It follows Jepsen's `allowed-error-types` (jepsen.tests.kafka l.2433):

- always allowed: `int_send_skip` (transactional writes interleave in Kafka's model; external
  send skips are not even checked), and the write-cycle family `G0 G0_process G0_realtime`
  with its imprecise versions `PL_1_cycle_exists strong_PL_1_cycle_exists` (writes are never
  isolated);
- when consumers `subscribe` (rather than only `assign`): `poll_skip` and
  `nonmonotonic_poll`, because a rebalance between two ops legally moves a consumer;
- with ww-dependency inference on: `G1c G1c_process G1c_realtime PL_2_cycle_exists
  strong_PL_2_cycle_exists`, since without write isolation T0 -ww-> T1 -wr-> T0 is expected;
- the anti-dependency cycles `G_single G_nonadjacent G2_item` (and their `_process` /
  `_realtime` variants), found only when rw edges are inferred (`rw_deps`): Kafka's
  read_committed promises no snapshot across partitions, so a poll may see one partition's
  newer records and another's older ones (read skew, fractured reads of a transaction).
  `forbid` makes them (or anything else) bad, e.g. for a system that claims serializability.

Cycle search (`harness.checkers.cycles`) is on by default (`cycles`), over ww (when
`ww_deps`) and wr edges; `rw_deps`, `process_order` and `realtime_order` add rw, process and
realtime edges.

Everything else is bad, `unseen` included; `ignore` drops more types (Bufstream's
`--ignore-queue-errors unseen`). An empty history is invalid.

Validity values are Jepsen's: `True`, `False` or `"unknown"`; `merge_valid` combines them
(false dominates unknown, which dominates true).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from harness.checkers.cycles import CYCLE_ANOMALIES, CycleOptions

Validity = bool | Literal["unknown"]

#: every anomaly the queue checker can report, in Jepsen's vocabulary (underscored)
QUEUE_ANOMALIES: Final = (
    "inconsistent_offsets",
    "duplicate",
    "lost_write",
    "truncated_write",
    "G1a",
    "precommitted_read",
    "poll_skip",
    "nonmonotonic_poll",
    "int_poll_skip",
    "int_nonmonotonic_poll",
    "nonmonotonic_send",
    "int_send_skip",
    "int_nonmonotonic_send",
    "unseen",
    "empty_history",
    *CYCLE_ANOMALIES,
)

ALWAYS_ALLOWED: Final = frozenset(
    {
        "int_send_skip",
        "G0",
        "G0_process",
        "G0_realtime",
        "PL_1_cycle_exists",
        "strong_PL_1_cycle_exists",
    }
)
RW_CYCLES_ALLOWED: Final = frozenset(
    b + v
    for b in ("G_single", "G_nonadjacent", "G2_item")
    for v in ("", "_process", "_realtime")
)
SUBSCRIBE_ALLOWED: Final = frozenset({"poll_skip", "nonmonotonic_poll"})
WW_DEPS_ALLOWED: Final = frozenset(
    {
        "G1c",
        "G1c_process",
        "G1c_realtime",
        "PL_2_cycle_exists",
        "strong_PL_2_cycle_exists",
    }
)


@dataclass(frozen=True)
class QueuePolicy:
    """The parts of a queue-workload configuration that decide validity.

    `sub_via`: how consumers get partitions (`assign`, `subscribe` or both; Jepsen
    `--sub-via`). `ww_deps`: infer write-write dependencies from offsets (Jepsen default on).
    `ignore`: anomaly types to tolerate on top of the defaults. `forbid`: types to judge
    bad even when the defaults allow them (wins over everything). `cycles`: search the
    dependency graph for cycle anomalies; `rw_deps`, `process_order`, `realtime_order`: add
    rw, process and realtime edges to it.
    """

    sub_via: frozenset[str] = frozenset({"assign"})
    ww_deps: bool = True
    ignore: frozenset[str] = field(default_factory=frozenset)
    cycles: bool = True
    rw_deps: bool = False
    process_order: bool = False
    realtime_order: bool = False
    forbid: frozenset[str] = field(default_factory=frozenset)

    @staticmethod
    def of(
        sub_via: Iterable[str] = ("assign",),
        ww_deps: bool = True,
        ignore: Iterable[str] = (),
        *,
        cycles: bool = True,
        rw_deps: bool = False,
        process_order: bool = False,
        realtime_order: bool = False,
        forbid: Iterable[str] = (),
    ) -> QueuePolicy:
        return QueuePolicy(frozenset(sub_via), ww_deps, frozenset(ignore), cycles, rw_deps,
                           process_order, realtime_order, frozenset(forbid))

    def cycle_options(self) -> CycleOptions | None:
        """The dependency graph's edges, or None when cycles are not searched."""
        if not self.cycles:
            return None
        return CycleOptions(ww=self.ww_deps, rw=self.rw_deps, process=self.process_order,
                            realtime=self.realtime_order)


def allowed_anomalies(policy: QueuePolicy) -> frozenset[str]:
    """The anomaly types this configuration tolerates."""
    allowed = set(ALWAYS_ALLOWED) | RW_CYCLES_ALLOWED
    if "subscribe" in policy.sub_via:
        allowed |= SUBSCRIBE_ALLOWED
    if policy.ww_deps:
        allowed |= WW_DEPS_ALLOWED
    allowed |= policy.ignore
    allowed -= policy.forbid
    return frozenset(allowed)


def bad_anomalies(found: Iterable[str], policy: QueuePolicy) -> list[str]:
    """The found anomaly types that invalidate the run, sorted."""
    allowed = allowed_anomalies(policy)
    return sorted(t for t in set(found) if t not in allowed)


def verdict(found: Iterable[str], policy: QueuePolicy) -> tuple[bool, list[str]]:
    """(valid?, bad types) for the anomaly types a queue checker found."""
    bad = bad_anomalies(found, policy)
    return (not bad, bad)


def merge_valid(values: Iterable[Validity]) -> Validity:
    """Jepsen's `merge-valid`: False beats "unknown" beats True; no values means True."""
    out: Validity = True
    for v in values:
        if v is False:
            return False
        if v == "unknown":
            out = "unknown"
        elif v is not True:
            raise ValueError(f"validity must be True, False or 'unknown', not {v!r}")
    return out


def run_verdict(checked: Mapping[str, Any], facts: Mapping[str, Any]) -> tuple[str, list[str]]:
    """A campaign run's verdict — "valid", "invalid" or "unknown" — and its bad types, from
    `harness.checkers.check`'s result and the run's recorded facts: `error` (the run broke:
    unknown), live invariant `probes`, and whether the final reads completed (`workload`).

    The one rule: the campaign writes it into results.json, `hiwater analyze` applies it again
    to its own check of the history. Bad: the queue policy's bad types, `nonlinearizable`,
    `live-invariant`; any bad type makes the run invalid; else an unknown check or incomplete
    final reads make it unknown."""
    if "error" in facts:
        return "unknown", []
    bad = list((checked.get("queue") or {}).get("bad_anomaly_types", []))
    if not (checked.get("linearizable") or {"valid?": True})["valid?"]:
        bad.append("nonlinearizable")
    if not (facts.get("probes") or {}).get("valid?", True):
        bad.append("live-invariant")
    if bad:
        return "invalid", bad
    incomplete = (facts.get("workload") or {}).get("final_complete") is False
    if checked["valid?"] == "unknown" or incomplete:
        return "unknown", bad
    return "valid", bad
