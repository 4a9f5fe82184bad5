"""An attempt at an inductive invariant proof of StrongIsr for unbounded offsets and epochs.

Model: the fixed protocol of `spec.z3.bmc` (hachikuji `Kip320.tla` refined by the code's
rules), but with nothing bounded: logs are Z3 arrays `Int -> Int` (record id, record epoch)
with an Int length, epochs and offsets are unbounded Ints, the LeaderAndIsr requests are
arrays indexed by epoch. The replica count is fixed (2 or 3).

Rules used (same encodings as everywhere else): `z_high_watermark` (LeaderIncHighWatermark),
`z_can_expand_isr` (LeaderExpandIsr, with the KAFKA-7128 epoch-start check),
`z_is_out_of_sync` (LeaderShrinkIsr). Truncation goes to the first point of divergence between
the follower's and the leader's logs: `spec.z3.proofs` proves
(`truncation_exchange_finds_first_divergence`) that the OffsetsForLeaderEpoch exchange over
epoch caches (`end_offset_for_epoch` + `divergence_offset`) computes exactly that point for logs
that satisfy log matching, which is one of the invariant's conjuncts below. Epoch caches
themselves are not part of this state (they would need a quantified encoding of `assign_epoch`).

The candidate invariant is StrongIsr strengthened by the auxiliary conjuncts in `CONJUNCTS`.
`attempt_inductive_proof()` checks initiation, then consecution for every action instance:
`Inv(s) /\\ Step_a(s, s') /\\ ~Inv(s')` is UNSAT (proved), SAT (a counterexample to induction,
with the conjuncts it breaks) or unknown (solver timeout / incomplete quantifier reasoning).

Status (z3 4.x/5.4 on the development machine):

* 2 replicas: initiation and all 20 action instances (9 action kinds) proved, about 1 s in
  all. So StrongIsr is an inductive consequence of `CONJUNCTS` for two replicas, for every
  log length and epoch, in this model.
* 3 replicas: ControllerElectLeader, ControllerShrinkIsr, BecomeLeader, BecomeFollower (no
  leader), LeaderWrite, FollowerFetch, LeaderIncHighWatermark, LeaderShrinkIsr and
  LeaderExpandIsr proved; BecomeFollowerAndTruncate with a leader is "unknown": the solver
  neither proves nor refutes preservation of strong_isr / committed_everywhere within the
  timeout (no CTI found either). Closing it probably needs a conjunct saying that a stale
  leader a follower truncates against still holds every committed record of the epochs
  before its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import z3

from core.config import Bugs
from spec.z3.predicates import LeadershipPredicates
from spec.z3.rules import (
    FollowerSlot,
    ZBool,
    ZInt,
    ZOptInt,
    z_can_expand_isr,
    z_high_watermark,
    z_is_out_of_sync,
    z_min,
)

NONE = -1
NIL = -1
TIMEOUT_MS = 20_000
ENABLED_TIMEOUT_MS = 2_000


class State(LeadershipPredicates):
    def __init__(self, n: int, tag: str) -> None:
        self.n = n
        self.tag = tag
        self.vars: dict[str, Any] = {}
        for r in range(n):
            self.vars[f"id.{r}"] = z3.Array(f"id.{r}{tag}", z3.IntSort(), z3.IntSort())
            self.vars[f"lep.{r}"] = z3.Array(f"lep.{r}{tag}", z3.IntSort(), z3.IntSort())
            for name in ("leo", "hw", "ep", "ldr", "leso"):
                self.vars[f"{name}.{r}"] = z3.Int(f"{name}.{r}{tag}")
            for j in range(n):
                self.vars[f"isr.{r}.{j}"] = z3.Bool(f"isr.{r}.{j}{tag}")
        for name in ("q_ep", "q_ldr", "next_ep", "next_id"):
            self.vars[name] = z3.Int(f"{name}{tag}")
        for j in range(n):
            self.vars[f"q_isr.{j}"] = z3.Bool(f"q_isr.{j}{tag}")
            self.vars[f"risr.{j}"] = z3.Array(f"risr.{j}{tag}", z3.IntSort(), z3.BoolSort())
        self.vars["rldr"] = z3.Array(f"rldr{tag}", z3.IntSort(), z3.IntSort())

    def __getitem__(self, name: str) -> Any:
        return self.vars[name]

    def rec(self, r: int, i: ZInt) -> tuple[ZInt, ZInt]:
        return (z3.Select(self[f"id.{r}"], i), z3.Select(self[f"lep.{r}"], i))

    def same(self, r1: int, r2: int, i: ZInt) -> ZBool:
        a, b = self.rec(r1, i), self.rec(r2, i)
        return z3.And(i < self[f"leo.{r1}"], i < self[f"leo.{r2}"], a[0] == b[0], a[1] == b[1])


# ------------------------------------------------------------------------------ invariant

_I = z3.Int("i")
_J = z3.Int("j")


def _forall_offsets(body: ZBool) -> ZBool:
    """Universally quantify `body` over the offset variable `_I`."""
    return z3.ForAll([_I], body)


def strong_isr(s: State) -> ZBool:
    """HK StrongIsr: below a presumed leader's HW every quorum-ISR member holds its records."""
    return z3.And([
        _forall_offsets(z3.Implies(
            z3.And(s.presumes(r1), s[f"q_isr.{r2}"], _I >= 0, s[f"hw.{r1}"] > _I),
            s.same(r1, r2, _I)))
        for r1 in range(s.n) for r2 in range(s.n)
    ])


def committed_everywhere(s: State) -> ZBool:
    """StrongIsr generalised to every replica's HW (followers learn the HW from a leader)."""
    return z3.And([
        _forall_offsets(z3.Implies(
            z3.And(s[f"q_isr.{r2}"], _I >= 0, s[f"hw.{r1}"] > _I), s.same(r1, r2, _I)))
        for r1 in range(s.n) for r2 in range(s.n)
    ])


def type_ok(s: State) -> ZBool:
    parts = [s["next_ep"] >= 0, s["q_ep"] == s["next_ep"] - 1, s["next_id"] >= 0,
             z3.Or(s["q_ldr"] == NONE, *[s["q_ldr"] == r for r in range(s.n)])]
    for r in range(s.n):
        parts += [s[f"hw.{r}"] >= 0, s[f"hw.{r}"] <= s[f"leo.{r}"],
                  s[f"leso.{r}"] >= 0, s[f"leso.{r}"] <= s[f"leo.{r}"],
                  s[f"ep.{r}"] >= NIL, s[f"ep.{r}"] < s["next_ep"],
                  z3.Or(s[f"ldr.{r}"] == NONE, *[s[f"ldr.{r}"] == j for j in range(s.n)])]
    return z3.And(parts)


def leaders_follow_requests(s: State) -> ZBool:
    """A replica's leader is the leader named by the request of its epoch; a presumed leader's
    local ISR is the quorum ISR while it is the true leader."""
    parts = []
    for r in range(s.n):
        parts.append(z3.Implies(s[f"ep.{r}"] >= 0,
                                s[f"ldr.{r}"] == z3.Select(s["rldr"], s[f"ep.{r}"])))
        parts.append(z3.Implies(s[f"ep.{r}"] == NIL, s[f"ldr.{r}"] == NONE))
        parts.append(z3.Implies(s.true_leader(r), z3.And(
            [s[f"isr.{r}.{j}"] == s[f"q_isr.{j}"] for j in range(s.n)])))
    parts.append(z3.Implies(s["q_ep"] >= 0, s["q_ldr"] == z3.Select(s["rldr"], s["q_ep"])))
    # Only the true leader rewrites the quorum ISR after the controller minted the epoch.
    parts.append(z3.Implies(
        z3.And(s["q_ep"] >= 0, *[z3.Not(s.true_leader(r)) for r in range(s.n)]),
        z3.And([s[f"q_isr.{j}"] == z3.Select(s[f"risr.{j}"], s["q_ep"]) for j in range(s.n)])))
    parts.append(z3.Implies(s["q_ep"] == NIL, s["q_ldr"] == NONE))
    return z3.And(parts)


def record_epochs(s: State) -> ZBool:
    """Record epochs are below the replica's epoch and non-decreasing along a log; record ids
    were issued; a presumed leader's records from its epoch start on carry its epoch."""
    parts = []
    for r in range(s.n):
        leo = s[f"leo.{r}"]
        rid, rep = s.rec(r, _I)
        parts.append(_forall_offsets(z3.Implies(
            z3.And(_I >= 0, leo > _I),
            z3.And(rep >= 0, rep <= s[f"ep.{r}"], rid >= 0, rid < s["next_id"]))))
        parts.append(z3.ForAll([_I, _J], z3.Implies(
            z3.And(_I >= 0, _I < _J, leo > _J), s.rec(r, _I)[1] <= s.rec(r, _J)[1])))
        parts.append(_forall_offsets(z3.Implies(
            z3.And(s.presumes(r), _I >= 0, leo > _I),
            (rep == s[f"ep.{r}"]) == (s[f"leso.{r}"] <= _I))))
    return z3.And(parts)


def log_matching(s: State) -> ZBool:
    """Same record at an offset => same records at every smaller offset."""
    return z3.And([
        z3.ForAll([_I, _J], z3.Implies(z3.And(_J >= 0, _J <= _I, s.same(r1, r2, _I)),
                                       s.same(r1, r2, _J)))
        for r1 in range(s.n) for r2 in range(s.n) if r1 < r2
    ])


def epoch_owned_by_leader(s: State) -> ZBool:
    """A presumed leader is the only source of records of its epoch: any such record anywhere
    is in the leader's log at the same offset."""
    return z3.And([
        _forall_offsets(z3.Implies(
            z3.And(s.presumes(ld), _I >= 0, s[f"leo.{r}"] > _I,
                   s.rec(r, _I)[1] == s[f"ep.{ld}"]),
            s.same(ld, r, _I)))
        for ld in range(s.n) for r in range(s.n) if ld != r
    ])


def followers_are_prefixes(s: State) -> ZBool:
    """A follower in its leader's epoch holds a prefix of the leader's log."""
    return z3.And([
        z3.And(
            z3.Implies(s.follows_in_epoch(ld, f), s[f"leo.{f}"] <= s[f"leo.{ld}"]),
            _forall_offsets(z3.Implies(
                z3.And(s.follows_in_epoch(ld, f), _I >= 0, s[f"leo.{f}"] > _I),
                s.same(ld, f, _I))))
        for ld in range(s.n) for f in range(s.n) if ld != f
    ])


def leader_in_isr(s: State) -> ZBool:
    """HK LeaderInIsr, guarded: the quorum leader (if any) is in the quorum ISR."""
    return z3.And([z3.Implies(s["q_ldr"] == r, s[f"q_isr.{r}"]) for r in range(s.n)])


def record_epochs_were_led(s: State) -> ZBool:
    """A record of epoch x exists only once the leader named for x has reached epoch x."""
    parts = []
    for r in range(s.n):
        rep = s.rec(r, _I)[1]
        led = z3.Or([z3.And(z3.Select(s["rldr"], rep) == ld, s[f"ep.{ld}"] >= rep)
                     for ld in range(s.n)])
        parts.append(_forall_offsets(z3.Implies(
            z3.And(_I >= 0, s[f"leo.{r}"] > _I), z3.And(rep < s["next_ep"], led))))
    return z3.And(parts)


def hw_guard(s: State) -> ZBool:
    """A presumed leader can only advance its HW over quorum-ISR members: either its local
    ISR contains the quorum ISR, or some member of its local ISR has moved to a later epoch
    (and so blocks every further advance: it will never fetch in this epoch again)."""
    parts = []
    for ld in range(s.n):
        covers = z3.And([z3.Implies(s[f"q_isr.{m}"], s[f"isr.{ld}.{m}"]) for m in range(s.n)])
        blocked = z3.Or([z3.And(s[f"isr.{ld}.{f}"], s[f"ep.{f}"] > s[f"ep.{ld}"])
                         for f in range(s.n) if f != ld])
        parts.append(z3.Implies(s.presumes(ld), z3.Or(covers, blocked)))
    return z3.And(parts)


def followers_behind_leader(s: State) -> ZBool:
    """A replica following L is at an epoch L has already reached (it truncated against L in
    that epoch, and epochs only grow)."""
    return z3.And([z3.Implies(s[f"ldr.{f}"] == ld, s[f"ep.{ld}"] >= s[f"ep.{f}"])
                   for f in range(s.n) for ld in range(s.n) if ld != f])


_E = z3.Int("e")


def isr_history(s: State) -> ZBool:
    """For every minted epoch e: the quorum ISR is still within the ISR of e's request, or a
    member of that ISR has moved past e, or e's leader has already taken epoch e. (After e was
    minted only leaders of epochs >= e expand the ISR, and each of them was in e's ISR.)"""
    within = z3.And([z3.Implies(s[f"q_isr.{m}"], z3.Select(s[f"risr.{m}"], _E))
                     for m in range(s.n)])
    moved = z3.Or([z3.And(z3.Select(s[f"risr.{f}"], _E), s[f"ep.{f}"] > _E)
                   for f in range(s.n)])
    taken = z3.Or([z3.And(z3.Select(s["rldr"], _E) == ld, s[f"ep.{ld}"] >= _E)
                   for ld in range(s.n)])
    return z3.ForAll([_E], z3.Implies(z3.And(_E >= 0, s["q_ep"] >= _E),
                                      z3.Or(within, moved, taken)))


def hw_within_true_leader(s: State) -> ZBool:
    """No replica's HW is beyond what the true leader knows to be committed: max(its HW, the
    start offset of its epoch). (A stale leader cannot advance its HW once the true leader,
    which sits in its ISR, has moved to a later epoch.)"""
    return z3.And([
        z3.Implies(s.true_leader(ld),
                   z3.Or(s[f"hw.{r}"] <= s[f"hw.{ld}"], s[f"hw.{r}"] <= s[f"leso.{ld}"]))
        for ld in range(s.n) for r in range(s.n) if r != ld
    ])


CONJUNCTS: dict[str, Callable[[State], ZBool]] = {
    "strong_isr": strong_isr,
    "committed_everywhere": committed_everywhere,
    "type_ok": type_ok,
    "leaders_follow_requests": leaders_follow_requests,
    "record_epochs": record_epochs,
    "log_matching": log_matching,
    "epoch_owned_by_leader": epoch_owned_by_leader,
    "followers_are_prefixes": followers_are_prefixes,
    "leader_in_isr": leader_in_isr,
    "record_epochs_were_led": record_epochs_were_led,
    "hw_guard": hw_guard,
    "followers_behind_leader": followers_behind_leader,
    "isr_history": isr_history,
    "hw_within_true_leader": hw_within_true_leader,
}


def invariant(s: State) -> ZBool:
    return z3.And([c(s) for c in CONJUNCTS.values()])


# ------------------------------------------------------------------------------ actions


def initial(s: State) -> ZBool:
    parts = [s["q_ep"] == NIL, s["q_ldr"] == NONE, s["next_ep"] == 0, s["next_id"] == 0]
    for r in range(s.n):
        parts += [s[f"leo.{r}"] == 0, s[f"hw.{r}"] == 0, s[f"ep.{r}"] == NIL,
                  s[f"ldr.{r}"] == NONE, s[f"leso.{r}"] == 0]
        parts += [z3.Not(s[f"isr.{r}.{j}"]) for j in range(s.n)]
    parts += [s[f"q_isr.{j}"] for j in range(s.n)]
    return z3.And(parts)


@dataclass(frozen=True)
class Action:
    kind: str
    label: str
    guard: ZBool
    updates: dict[str, Any]


def _controller_update(s: State, leader: ZInt, isr: Sequence[ZBool]) -> dict[str, Any]:
    e = s["next_ep"]
    upd: dict[str, Any] = {"q_ep": e, "q_ldr": leader, "next_ep": e + 1,
                           "rldr": z3.Store(s["rldr"], e, leader)}
    for j in range(s.n):
        upd[f"q_isr.{j}"] = isr[j]
        upd[f"risr.{j}"] = z3.Store(s[f"risr.{j}"], e, isr[j])
    return upd


def actions(s: State, lag_expired: ZBool, epoch: ZInt, trunc: ZInt,
            bugs: Bugs | None = None) -> list[Action]:
    """Action instances; `epoch` is the (symbolic) request epoch a replica processes and `trunc`
    the (symbolic) truncation offset constrained by the first-divergence condition. `bugs` may
    switch on `no_fetch_epoch_fencing` or `isr_expand_before_epoch_start` (to show that the
    invariant then stops being inductive)."""
    bugs = bugs if bugs is not None else Bugs()
    unsupported = [b for b in bugs.enabled()
                   if b not in ("no_fetch_epoch_fencing", "isr_expand_before_epoch_start")]
    if unsupported:
        raise ValueError(f"bug switches not modelled here: {unsupported}")

    def fetches(ld: int, f: int) -> ZBool:
        if bugs.no_fetch_epoch_fencing:
            return z3.And(s.presumes(ld), s[f"ldr.{f}"] == ld)
        return s.follows_in_epoch(ld, f)

    n = s.n
    out: list[Action] = []
    quorum_isr = [s[f"q_isr.{j}"] for j in range(n)]
    for ld in range(n):
        out.append(Action("ControllerElectLeader", f"ControllerElectLeader({ld})",
                          z3.And(s[f"q_isr.{ld}"], s["q_ldr"] != ld),
                          _controller_update(s, z3.IntVal(ld), quorum_isr)))
    for r in range(n):
        only_r = z3.And([s[f"q_isr.{j}"] == (j == r) for j in range(n)])
        was = s["q_ldr"] == r
        isr = [z3.If(z3.And(was, only_r), s[f"q_isr.{j}"], z3.And(s[f"q_isr.{j}"], j != r))
               for j in range(n)]
        out.append(Action("ControllerShrinkIsr", f"ControllerShrinkIsr({r})",
                          z3.Or(was, s[f"q_isr.{r}"]),
                          _controller_update(s, z3.If(was, z3.IntVal(NONE), s["q_ldr"]), isr)))
    valid_request = z3.And(epoch >= 0, epoch < s["next_ep"])
    for r in range(n):
        upd = {f"ep.{r}": epoch, f"ldr.{r}": z3.IntVal(r), f"leso.{r}": s[f"leo.{r}"]}
        upd |= {f"isr.{r}.{j}": z3.Select(s[f"risr.{j}"], epoch) for j in range(n)}
        out.append(Action("BecomeLeader", f"BecomeLeader({r})",
                          z3.And(valid_request, z3.Select(s["rldr"], epoch) == r,
                                 epoch > s[f"ep.{r}"]), upd))
    for r in range(n):
        base = z3.And(valid_request, epoch > s[f"ep.{r}"])
        common = {f"ep.{r}": epoch, f"leso.{r}": z3.IntVal(0)}
        common |= {f"isr.{r}.{j}": z3.Select(s[f"risr.{j}"], epoch) for j in range(n)}
        out.append(Action("BecomeFollowerAndTruncate", f"BecomeFollower({r}, no leader)",
                          z3.And(base, z3.Select(s["rldr"], epoch) == NONE),
                          dict(common, **{f"ldr.{r}": z3.IntVal(NONE)})))
        for ld in range(n):
            if ld == r:
                continue
            first_divergence = z3.And(
                trunc >= 0, trunc <= s[f"leo.{r}"], trunc <= s[f"leo.{ld}"],
                z3.ForAll([_I], z3.Implies(z3.And(_I >= 0, trunc > _I), s.same(r, ld, _I))),
                z3.Or(trunc == s[f"leo.{r}"], trunc == s[f"leo.{ld}"],
                      z3.Not(s.same(r, ld, trunc))))
            guard = z3.And(base, z3.Select(s["rldr"], epoch) == ld, s.presumes(ld),
                           s[f"ep.{ld}"] == epoch, first_divergence)
            upd = dict(common, **{f"ldr.{r}": z3.IntVal(ld), f"leo.{r}": trunc,
                                  f"hw.{r}": z_min(trunc, s[f"hw.{r}"])})
            out.append(Action("BecomeFollowerAndTruncate",
                              f"BecomeFollowerAndTruncate({r}, leader {ld})", guard, upd))
    for r in range(n):
        leo = s[f"leo.{r}"]
        out.append(Action("LeaderWrite", f"LeaderWrite({r})", s.presumes(r), {
            f"leo.{r}": leo + 1, "next_id": s["next_id"] + 1,
            f"id.{r}": z3.Store(s[f"id.{r}"], leo, s["next_id"]),
            f"lep.{r}": z3.Store(s[f"lep.{r}"], leo, s[f"ep.{r}"])}))
    for f in range(n):
        for ld in range(n):
            if ld == f:
                continue
            leo_f = s[f"leo.{f}"]
            rid, rep = s.rec(ld, leo_f)
            out.append(Action("FollowerFetch", f"FollowerFetch({f} <- {ld})",
                              z3.And(fetches(ld, f), leo_f < s[f"leo.{ld}"]), {
                                  f"leo.{f}": leo_f + 1,
                                  f"hw.{f}": z_min(s[f"hw.{ld}"], leo_f + 1),
                                  f"id.{f}": z3.Store(s[f"id.{f}"], leo_f, rid),
                                  f"lep.{f}": z3.Store(s[f"lep.{f}"], leo_f, rep)}))
    for r in range(n):
        slots = [FollowerSlot(s[f"isr.{r}.{f}"],
                              ZOptInt(fetches(r, f), s[f"leo.{f}"]))
                 for f in range(n) if f != r]
        new_hw = z_high_watermark(s[f"hw.{r}"], s[f"leo.{r}"], slots)
        out.append(Action("LeaderIncHighWatermark", f"LeaderIncHighWatermark({r})",
                          z3.And(s.presumes(r), new_hw > s[f"hw.{r}"]), {f"hw.{r}": new_hw}))
    for r in range(n):
        for f in range(n):
            if f == r:
                continue
            known = ZOptInt(fetches(r, f), s[f"leo.{f}"])
            shrink = z3.And(s.true_leader(r), s[f"isr.{r}.{f}"],
                            z_is_out_of_sync(known, s[f"leo.{r}"], lag_expired))
            expand = z3.And(s.true_leader(r), z3.Not(s[f"isr.{r}.{f}"]),
                            z_can_expand_isr(known, s[f"hw.{r}"], s[f"leso.{r}"],
                                             not bugs.isr_expand_before_epoch_start))
            for kind, guard, member in (("LeaderShrinkIsr", shrink, False),
                                        ("LeaderExpandIsr", expand, True)):
                upd = {}
                for j in range(n):
                    value = z3.BoolVal(member) if j == f else s[f"isr.{r}.{j}"]
                    upd[f"isr.{r}.{j}"] = value
                    upd[f"q_isr.{j}"] = value
                out.append(Action(kind, f"{kind}({r}, {f})", guard, upd))
    return out


def step(s: State, t: State, action: Action) -> ZBool:
    return z3.And(action.guard, *[t[name] == action.updates.get(name, var)
                                  for name, var in s.vars.items()])


# ------------------------------------------------------------------------------ report


@dataclass(frozen=True)
class ActionResult:
    kind: str
    label: str
    status: str  # "proved" | "cti" | "unknown" | "vacuous"
    seconds: float
    broken: tuple[str, ...] = ()  # conjuncts not preserved (a CTI for each)
    undecided: tuple[str, ...] = ()  # conjuncts the solver could not decide in time
    # Is the action enabled in some invariant state? "no" makes a proof vacuous; "unknown"
    # when the solver cannot build a model of the quantified invariant in time.
    enabled: str = "unknown"


@dataclass(frozen=True)
class InductiveReport:
    replicas: int
    conjuncts: tuple[str, ...]
    initiation: str
    results: tuple[ActionResult, ...]

    def by_kind(self) -> dict[str, str]:
        """Per action kind: "proved" if every instance is, else "cti" if some instance has a
        counterexample to induction, else "unknown"."""
        out: dict[str, str] = {}
        for r in self.results:
            prev = out.get(r.kind, "proved")
            if "cti" in (prev, r.status):
                out[r.kind] = "cti"
            elif "vacuous" in (prev, r.status):
                out[r.kind] = "vacuous"
            elif "unknown" in (prev, r.status):
                out[r.kind] = "unknown"
            else:
                out[r.kind] = "proved"
        return out

    def format(self) -> str:
        lines = [f"Inductive invariant attempt, {self.replicas} replicas, "
                 f"conjuncts: {', '.join(self.conjuncts)}",
                 f"  initiation: {self.initiation}"]
        for r in self.results:
            extra = f"  breaks: {', '.join(r.broken)}" if r.broken else ""
            if r.undecided:
                extra += f"  undecided: {', '.join(r.undecided)}"
            if r.status == "proved":
                extra += f"  (enabled in an invariant state: {r.enabled})"
            lines.append(f"  {r.status:<8} {r.label:<44} {r.seconds:6.2f}s{extra}")
        lines.append("  by action: " + ", ".join(f"{k}={v}" for k, v in self.by_kind().items()))
        return "\n".join(lines)


def _per_conjunct(s: State, t: State, action: Action,
                  timeout_ms: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    broken, undecided = [], []
    for name, conjunct in CONJUNCTS.items():
        solver = z3.Solver()
        solver.set("timeout", timeout_ms)
        solver.add(invariant(s), step(s, t, action), z3.Not(conjunct(t)))
        verdict = solver.check()
        if verdict == z3.sat:
            broken.append(name)
        elif verdict != z3.unsat:
            undecided.append(name)
    return (tuple(broken), tuple(undecided))


def attempt_inductive_proof(replicas: int = 2, timeout_ms: int = TIMEOUT_MS,
                            only: Sequence[str] | None = None,
                            bugs: Bugs | None = None, explain: bool = True) -> InductiveReport:
    """Check initiation and consecution of the candidate invariant per action instance
    (`only`: restrict to these action kinds). A consecution proof counts only if the action
    is not disabled in every invariant state (else the status is "vacuous"). With `explain`, an
    action that is not proved is re-checked conjunct by conjunct to name what breaks."""
    s, t = State(replicas, ""), State(replicas, "'")
    init_solver = z3.Solver()
    init_solver.set("timeout", timeout_ms)
    init_solver.add(initial(s), z3.Not(invariant(s)))
    verdict = init_solver.check()
    initiation = "proved" if verdict == z3.unsat else "fails" if verdict == z3.sat else "unknown"
    lag, epoch, trunc = z3.Bool("lag_expired"), z3.Int("request_epoch"), z3.Int("truncate_to")
    results = []
    for action in actions(s, lag, epoch, trunc, bugs):
        if only is not None and action.kind not in only:
            continue
        solver = z3.Solver()
        solver.set("timeout", timeout_ms)
        solver.add(invariant(s), step(s, t, action), z3.Not(invariant(t)))
        start = time.perf_counter()
        verdict = solver.check()
        seconds = time.perf_counter() - start
        if verdict == z3.unsat:
            enabled = z3.Solver()
            enabled.set("timeout", ENABLED_TIMEOUT_MS)
            enabled.add(invariant(s), step(s, t, action))
            found = enabled.check()
            status = "vacuous" if found == z3.unsat else "proved"
            results.append(ActionResult(action.kind, action.label, status, seconds,
                                        enabled="yes" if found == z3.sat else
                                        "no" if found == z3.unsat else "unknown"))
        else:
            # Which conjuncts fail to be preserved: one query per conjunct (model evaluation
            # of quantified conjuncts is not reliable enough to tell).
            broken, undecided = (_per_conjunct(s, t, action, timeout_ms) if explain
                                 else ((), ()))
            status = "cti" if verdict == z3.sat or broken else "unknown"
            results.append(ActionResult(action.kind, action.label, status,
                                        time.perf_counter() - start, broken, undecided))
    return InductiveReport(replicas, tuple(CONJUNCTS), initiation, tuple(results))


if __name__ == "__main__":
    print(attempt_inductive_proof().format())
