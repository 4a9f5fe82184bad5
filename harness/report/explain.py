"""Plain-language explanations of every anomaly the checkers (or Jepsen) can report.

Names follow the checkers' underscored Jepsen vocabulary (`lost_write`, `G1a`, ...); `explain`
also accepts Jepsen's spellings (`:lost-write`, `g1a`, `G1c-realtime`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Explanation:
    title: str
    what: str  # what was observed, in plain words
    why: str  # why it matters / what usually causes it


_E = Explanation

EXPLANATIONS: Final[dict[str, Explanation]] = {
    "inconsistent_offsets": _E(
        "Inconsistent offsets",
        "Two observers disagree about what a log holds: the same offset of one key was seen "
        "holding two or more different values (by sends that learned their offset, or by polls).",
        "A Kafka partition is one totally ordered log; every reader must see the same record at "
        "a given offset. Different values at one offset mean the log diverged, typically two "
        "leaders accepting writes at once (split brain) or a replica truncating and re-using "
        "offsets that were already acknowledged or read.",
    ),
    "duplicate": _E(
        "Duplicate",
        "One value (written once by the workload: every value is unique) appears at more than "
        "one offset of the same key.",
        "The record was appended twice, e.g. a producer retry after a timeout without "
        "idempotence, or a replica re-copying data it already had. Consumers that expect each "
        "message once will process it twice.",
    ),
    "lost_write": _E(
        "Lost write",
        "A send that must have committed (it was acknowledged, or some reader saw one of its "
        "values) was never read by anyone, although readers did read later positions of the "
        "same key.",
        "Acknowledged data disappeared from the log: everyone moved past it. This is the most "
        "serious queue anomaly; classic causes are unclean leader election, truncating to the "
        "high watermark instead of the leader epoch, or acknowledging before the write is "
        "replicated to the in-sync replicas.",
    ),
    "truncated_write": _E(
        "Truncated write",
        "A send that must have committed sits at an offset of its key at or past the end "
        "offset the final reads found there: that partition's end was stable, at one leader "
        "epoch, below offsets operations had already seen, and nothing is written in the "
        "final phase.",
        "The partition's log was cut back below acknowledged (or already read) records, and "
        "nobody wrote to it again, so no later read shows the gap: typically an unclean leader "
        "election or a power failure that lost unflushed records on every replica.",
    ),
    "G1a": _E(
        "G1a (aborted read)",
        "A successful poll read a value whose send definitely failed (the client was told the "
        "write did not happen).",
        "Reading data from a failed write: either the broker reported failure for a write that "
        "in fact committed, or a reader saw uncommitted/aborted data. The client will retry or "
        "give up on something the log now contains.",
    ),
    "precommitted_read": _E(
        "Precommitted read",
        "An operation (a transaction) read back a value it had itself sent earlier in the same "
        "operation.",
        "In Kafka's model sends are invisible to every poller until the transaction commits, "
        "including the sender's own consumer, so seeing your own uncommitted write breaks "
        "read-committed isolation.",
    ),
    "poll_skip": _E(
        "Poll skip",
        "One consumer process polled a key twice in a row (no reassignment in between that "
        "dropped the key) and the second poll started more than one record past where the "
        "first ended: records in between were skipped.",
        "A consumer that skips records silently misses messages. With `subscribe` this is "
        "allowed, because a rebalance between two polls legally moves the consumer's position.",
    ),
    "nonmonotonic_poll": _E(
        "Nonmonotonic poll",
        "One consumer process polled a key twice in a row and the second poll started at or "
        "before the last record the first one returned: the consumer went backwards or "
        "re-read.",
        "Without a seek or rebalance a consumer's position only moves forward; going back means "
        "it will re-process messages. Allowed with `subscribe`, where a rebalance can rewind to "
        "the last committed offset.",
    ),
    "int_poll_skip": _E(
        "Internal poll skip",
        "Inside a single operation, two consecutive reads of one key were more than one record "
        "apart in the log: the poll skipped records in the middle of its own results.",
        "One fetch (or a sequence of polls in one transaction) returned a non-contiguous "
        "slice of the log, i.e. the consumer missed records it had no reason to miss. Keys "
        "rebalanced during the op are exempt.",
    ),
    "int_nonmonotonic_poll": _E(
        "Internal nonmonotonic poll",
        "Inside a single operation, a later read of a key was at or before an earlier read "
        "of the same key (it went backwards or repeated a record).",
        "Records inside one poll must come in log order, each once; this points to a broken "
        "fetch path or log that returns records out of order or twice.",
    ),
    "nonmonotonic_send": _E(
        "Nonmonotonic send",
        "One producer process sent to a key twice in a row (two separate operations) and the "
        "later send landed at or before the earlier one in the log.",
        "A single producer's messages should appear in the order it sent them; a later message "
        "landing earlier means reordering (e.g. retries without idempotence, or a log that "
        "was truncated and rewritten).",
    ),
    "int_send_skip": _E(
        "Internal send skip",
        "Inside one operation (a transaction), two consecutive sends to a key have other "
        "values between them in the log.",
        "Other producers' writes interleaved with this transaction's writes. Kafka does not "
        "isolate transactional writes from each other, so this is always allowed; it is "
        "reported for information.",
    ),
    "int_nonmonotonic_send": _E(
        "Internal nonmonotonic send",
        "Inside one operation, a later send to a key landed at or before an earlier send of "
        "the same operation.",
        "Sends of one producer batch or transaction must keep their order in the log; "
        "reordering means the broker (or client retries) reordered records.",
    ),
    "unseen": _E(
        "Unseen",
        "Messages that were acknowledged to their producer but were never read by any poll "
        "by the end of the history (the final read-everything phase included).",
        "An acknowledged message nobody can read is either lost or very badly delayed; from "
        "the history alone the two look the same. The unseen curve should fall to zero soon "
        "after faults heal; a plateau means lost or stuck messages.",
    ),
    "realtime_lag": _E(
        "Realtime lag",
        "For each poll, how long ago (at the poll's invocation) the consumer's position on a "
        "key was already known not to be the end of the log: a lower bound on how stale the "
        "consumer was.",
        "A measurement, not an error: long lags show consumers stuck behind the log, e.g. "
        "fetching from a partitioned or lagging replica.",
    ),
    "empty_history": _E(
        "Empty history",
        "No send, poll or transaction completed successfully, so nothing could be checked.",
        "A run that never talked to the cluster proves nothing; Jepsen counts it as invalid. "
        "Usually the cluster never came up, or every request timed out.",
    ),
    "G0": _E(
        "G0 (write cycle)",
        "A cycle of transactions, each of which wrote some key before and after another one, "
        "judged by the log order (write-write dependencies only).",
        "Dirty writes: transactions' writes interleave. Kafka does not isolate writes, so this "
        "is allowed.",
    ),
    "G0_process": _E(
        "G0-process",
        "A write cycle (G0) that is closed by process order: a process's later transaction "
        "appears to precede its earlier one.",
        "Interleaving writes combined with one client's own order; allowed for Kafka like G0.",
    ),
    "G0_realtime": _E(
        "G0-realtime",
        "A write cycle (G0) closed by real-time order: a transaction that finished before "
        "another began appears after it.",
        "Allowed for Kafka like G0, since writes are not isolated.",
    ),
    "G1c": _E(
        "G1c (circular information flow)",
        "A cycle of write-write and write-read dependencies with at least one read: "
        "transaction A saw B's effects and B saw A's.",
        "Without write isolation (Kafka's model) T0 -ww-> T1 -wr-> T0 is expected, so it is "
        "allowed when write-write dependencies are inferred.",
    ),
    "G1c_process": _E(
        "G1c-process",
        "A G1c cycle that includes a process-order edge.",
        "As G1c, with a client's own order closing the cycle.",
    ),
    "G1c_realtime": _E(
        "G1c-realtime",
        "A G1c cycle that includes a real-time edge (one transaction completed before the "
        "next began).",
        "As G1c, with real time closing the cycle.",
    ),
    "G_single": _E(
        "G-single (read skew)",
        "A dependency cycle with exactly one anti-dependency (rw) edge: an operation read a "
        "key before some write that, through write/read dependencies, precedes it.",
        "A poll saw part of another operation's effects but not the rest (a fractured read of "
        "a transaction, or read skew across partitions). Kafka's read_committed gives no "
        "snapshot across partitions, so this is allowed unless the policy forbids it.",
    ),
    "G_nonadjacent": _E(
        "G-nonadjacent",
        "A dependency cycle with two or more anti-dependency (rw) edges, no two of them "
        "adjacent.",
        "Forbidden by snapshot isolation; for Kafka polls across partitions it is read skew, "
        "allowed unless the policy forbids it.",
    ),
    "G2_item": _E(
        "G2-item (anti-dependency cycle)",
        "A dependency cycle with two or more anti-dependency (rw) edges, some adjacent: e.g. "
        "two transactions each read a key before the other's send to it (write skew).",
        "Forbidden by serializability; Kafka transactions do not promise it, so it is allowed "
        "unless the policy forbids it.",
    ),
    "G_single_process": _E(
        "G-single-process",
        "A G-single cycle that includes a process-order edge.",
        "As G-single, with a client's own order closing the cycle.",
    ),
    "G_single_realtime": _E(
        "G-single-realtime",
        "A G-single cycle that includes a real-time edge (one operation completed before the "
        "next began).",
        "As G-single, with real time closing the cycle.",
    ),
    "G_nonadjacent_process": _E(
        "G-nonadjacent-process",
        "A G-nonadjacent cycle that includes a process-order edge.",
        "As G-nonadjacent, with a client's own order closing the cycle.",
    ),
    "G_nonadjacent_realtime": _E(
        "G-nonadjacent-realtime",
        "A G-nonadjacent cycle that includes a real-time edge (one operation completed before the "
        "next began).",
        "As G-nonadjacent, with real time closing the cycle.",
    ),
    "G2_item_process": _E(
        "G2-item-process",
        "A G2-item cycle that includes a process-order edge.",
        "As G2-item, with a client's own order closing the cycle.",
    ),
    "G2_item_realtime": _E(
        "G2-item-realtime",
        "A G2-item cycle that includes a real-time edge (one operation completed before the "
        "next began).",
        "As G2-item, with real time closing the cycle.",
    ),
    "PL_1_cycle_exists": _E(
        "PL-1 cycle exists",
        "The dependency graph has a strongly connected component that read-uncommitted "
        "(PL-1) forbids, but no single cycle was extracted to explain it.",
        "An imprecise form of G0; allowed for Kafka.",
    ),
    "strong_PL_1_cycle_exists": _E(
        "Strong PL-1 cycle exists",
        "As PL-1 cycle exists, counting process and real-time edges.",
        "An imprecise form of G0-process/realtime; allowed for Kafka.",
    ),
    "PL_2_cycle_exists": _E(
        "PL-2 cycle exists",
        "The dependency graph has a component that read-committed (PL-2) forbids, but no "
        "explained cycle was extracted.",
        "An imprecise form of G1c; allowed when write-write dependencies are inferred.",
    ),
    "strong_PL_2_cycle_exists": _E(
        "Strong PL-2 cycle exists",
        "As PL-2 cycle exists, counting process and real-time edges.",
        "An imprecise form of G1c-process/realtime.",
    ),
    "cycle_search_timeout": _E(
        "Cycle search timeout",
        "The cycle search ran out of its time budget on some component of the dependency "
        "graph.",
        "The result for cycles is unknown, not clean.",
    ),
    "empty_transaction_graph": _E(
        "Empty transaction graph",
        "There were no transactions to build a dependency graph from.",
        "Cycle anomalies could not be checked; the result for them is unknown.",
    ),
    "nonlinearizable": _E(
        "Not linearizable",
        "No order of the operations on a key is consistent both with a single register (each "
        "read returns the latest write) and with real time (an operation that finished before "
        "another started comes first). The longest order that works, and the operation that "
        "could not be placed next, are shown.",
        "Clients observed the register in a way no single copy could produce: a stale read, a "
        "lost or resurrected write, or a compare-and-set that succeeded against the wrong "
        "value.",
    ),
}

_ALIASES: Final[dict[str, str]] = {
    "g1a": "G1a",
    "aborted_read": "G1a",
    "lost": "lost_write",
    "lag": "realtime_lag",
    "worst_realtime_lag": "realtime_lag",
    "linearizable": "nonlinearizable",
    "not_linearizable": "nonlinearizable",
}


def canonical(name: str) -> str:
    """The checkers' spelling of an anomaly name (`:lost-write` -> `lost_write`, `g1c-realtime`
    -> `G1c_realtime`); unknown names come back underscored."""
    n = name.strip().lstrip(":").replace("-", "_").replace(" ", "_")
    if n in EXPLANATIONS:
        return n
    low = n.lower()
    if low in _ALIASES:
        return _ALIASES[low]
    for k in EXPLANATIONS:
        if k.lower() == low:
            return k
    return n


def explain(name: str) -> Explanation:
    """The explanation of an anomaly type; a generic one for names nobody wrote up."""
    c = canonical(name)
    e = EXPLANATIONS.get(c)
    if e is not None:
        return e
    return Explanation(
        name,
        f"The checker reported an anomaly of type {name!r}.",
        "No plain-language explanation is written for this type yet; see the examples below.",
    )
