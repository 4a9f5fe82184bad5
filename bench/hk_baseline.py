"""Baseline for the model-checker benchmark: a plain breadth-first search of the actions of
hachikuji/kafka-specification's Kip320.tla (the fixed ZooKeeper-era protocol), written
directly over tuples, as the reference document's [BFS] measurements were made.

It is the yardstick the issue names ("737,794 states in 56 s at 3 replicas, 2 records, 3
epochs"): the same kind of search over a much simpler model, with no core, no controller
process, no ZooKeeper, no crashes. Our checker's states per second are reported against it.

State: (logs, replicas, quorum, requests, next_id)
  logs[r]      tuple of (id, epoch)
  replicas[r]  (hw, leader_epoch, leader, isr_mask)   leader -1 = none
  quorum       (epoch, leader, isr_mask)              epoch -1 = none yet
  requests     tuple of quorum states, indexed by epoch (each epoch minted once)
"""

from __future__ import annotations

import time
from collections import deque

NONE = -1


def _members(mask: int, n: int) -> list[int]:
    return [r for r in range(n) if mask >> r & 1]


def successors(s: tuple, n: int, log_size: int, max_records: int, max_epoch: int) -> list:
    logs, reps, quorum, requests, next_id = s
    q_epoch, q_leader, q_isr = quorum
    out = []

    def with_quorum(leader: int, isr: int) -> None:
        e = len(requests)
        if e > max_epoch:
            return
        q = (e, leader, isr)
        out.append((logs, reps, q, (*requests, q), next_id))

    # ControllerElectLeader: any ISR member other than the current leader
    for r in _members(q_isr, n) if q_epoch >= 0 else range(n):
        if r != q_leader:
            with_quorum(r, q_isr if q_epoch >= 0 else (1 << n) - 1)
    # ControllerShrinkIsr
    if q_epoch >= 0:
        for r in _members(q_isr, n):
            if q_isr == 1 << r:
                if q_leader == r:
                    with_quorum(NONE, q_isr)
            else:
                with_quorum(NONE if q_leader == r else q_leader, q_isr & ~(1 << r))
    for r in range(n):
        hw, ep, ld, isr = reps[r]
        log = logs[r]
        # BecomeLeader / FencedBecomeFollowerAndTruncate, from any request of a newer epoch
        for req in requests:
            e, leader, risr = req
            if e <= ep or leader == NONE:
                continue
            if leader == r:
                new = list(reps)
                new[r] = (hw, e, r, risr)
                out.append((logs, tuple(new), quorum, requests, next_id))
            else:
                lh, le, ll, _ = reps[leader]
                if ll != leader or le != e:
                    continue  # the leader must presume leadership in exactly this epoch
                llog = logs[leader]
                k = 0
                while k < min(len(log), len(llog)) and log[k] == llog[k]:
                    k += 1
                new_logs = list(logs)
                new_logs[r] = log[:k]
                new = list(reps)
                new[r] = (min(hw, k), e, leader, 0)
                out.append((tuple(new_logs), tuple(new), quorum, requests, next_id))
        if ld != r:
            # FencedFollowerFetch
            if ld != NONE:
                lh, le, ll, _ = reps[ld]
                llog = logs[ld]
                if ll == ld and le == ep and len(log) < len(llog):
                    new_logs = list(logs)
                    new_logs[r] = (*log, llog[len(log)])
                    new = list(reps)
                    new[r] = (min(lh, len(log) + 1), ep, ld, isr)
                    out.append((tuple(new_logs), tuple(new), quorum, requests, next_id))
            continue
        # r presumes leadership
        if len(log) < log_size and next_id < max_records:
            new_logs = list(logs)
            new_logs[r] = (*log, (next_id, ep))
            out.append((tuple(new_logs), reps, quorum, requests, next_id + 1))
        followers_ok = all(
            reps[f][2] == r and reps[f][1] == ep and len(logs[f]) > hw
            for f in _members(isr, n) if f != r
        )
        if hw < len(log) and followers_ok:
            new = list(reps)
            new[r] = (hw + 1, ep, ld, isr)
            out.append((logs, tuple(new), quorum, requests, next_id))
        true_leader = q_leader == r and q_epoch == ep
        if not true_leader:
            continue
        for f in range(n):
            if f == r:
                continue
            caught = reps[f][2] == r and reps[f][1] == ep
            if isr >> f & 1 and (not caught or len(logs[f]) < len(log)):
                new_isr = isr & ~(1 << f)  # FencedLeaderShrinkIsr
            elif not isr >> f & 1 and caught and len(logs[f]) >= hw and (
                hw == len(log) or log[hw][1] == ep
            ) and logs[f][:hw] == log[:hw]:
                new_isr = isr | 1 << f  # FencedLeaderExpandIsr
            else:
                continue
            new = list(reps)
            new[r] = (hw, ep, ld, new_isr)
            out.append((logs, tuple(new), (q_epoch, q_leader, new_isr), requests, next_id))
    return out


def strong_isr(s: tuple, n: int) -> bool:
    logs, reps, quorum, _, _ = s
    for r in range(n):
        hw, _, ld, _ = reps[r]
        if ld != r or hw == 0:
            continue
        for m in _members(quorum[2], n):
            if logs[m][:hw] != logs[r][:hw]:
                return False
    return True


def explore(n: int, log_size: int, max_records: int, max_epoch: int,
            time_limit_s: float = 600.0) -> tuple[int, float, bool]:
    """(distinct states, seconds, exhausted) of a BFS checking StrongIsr on every state."""
    init = (tuple(() for _ in range(n)), tuple((0, NONE, NONE, 0) for _ in range(n)),
            (NONE, NONE, 0), (), 0)
    seen = {init}
    queue = deque([init])
    start = time.perf_counter()
    while queue:
        s = queue.popleft()
        for nxt in successors(s, n, log_size, max_records, max_epoch):
            if nxt not in seen:
                if not strong_isr(nxt, n):
                    raise AssertionError("the fixed protocol broke StrongIsr")
                seen.add(nxt)
                queue.append(nxt)
        if time.perf_counter() - start > time_limit_s:
            return len(seen), time.perf_counter() - start, False
    return len(seen), time.perf_counter() - start, True


if __name__ == "__main__":
    states, seconds, done = explore(3, 2, 2, 2)
    print(f"{states} states in {seconds:.1f} s ({states / seconds:,.0f}/s), exhausted={done}")
