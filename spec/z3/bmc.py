"""Bounded model checking of the replication protocol's transition relation with Z3.

The model is hachikuji's `Kip320.tla` (the fixed ZooKeeper-era protocol, Kafka 2.1-2.6) over
`n` replicas, logs of at most `log_size` records and leader epochs `0..max_epoch`, refined
with the code's rules where the code differs (each rule is the Z3 encoding from
`spec.z3.rules`, i.e. the same function as `core.rules`):

* LeaderIncHighWatermark sets the HW to `high_watermark(hw, LEO, ISR followers' LEOs)`, a
  follower's LEO being known only if it follows the leader in the leader's epoch;
* LeaderExpandIsr is guarded by `can_expand_isr(follower LEO, hw, leso)` with the
  leader-epoch start offset `leso` recorded at BecomeLeader (KAFKA-7128);
* LeaderShrinkIsr is guarded by `is_out_of_sync(follower LEO, leader LEO, lag expired)`;
* BecomeFollowerAndTruncate truncates to the point found by the OffsetsForLeaderEpoch exchange
  (`end_offset_for_epoch` on the leader, `divergence_offset` on the follower, repeated), over
  leader-epoch caches kept by `assign_epoch` / `truncate_epochs` (KAFKA-7415: a new leader
  assigns its epoch at its LEO);
* with acks=all, LeaderWrite needs `acks_all_admissible` and LeaderAck needs
  `acks_all_satisfied`; with acks=1 a write is acknowledged at once.

Bug switches (names from `core.config.Bugs`): `truncate_to_hw` (B5), `isr_expand_before_epoch_start`
(B11), `no_fetch_epoch_fencing` (B8), `unfenced_truncation` (B9); `acks=1` gives B1.

Properties: StrongIsr, HW <= LEO (and HW >= 0) on every replica, and acked-record completeness
(every acknowledged record is in the log of the true leader).

Entry points: `check(BmcConfig, max_depth, prefix=()) -> BmcResult`, `format_result(result)`,
`main()` (runs the fixed protocol and every modelled bug, prints traces).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from core.config import Bugs
from spec.z3.predicates import LeadershipPredicates
from spec.z3.rules import (
    FollowerSlot,
    ZBool,
    ZCache,
    ZInt,
    ZOptInt,
    z_acks_all_admissible,
    z_acks_all_satisfied,
    z_assign_epoch,
    z_can_expand_isr,
    z_count,
    z_high_watermark,
    z_is_out_of_sync,
    z_min,
    z_truncate_epochs,
    z_truncation_point,
)

NONE = -1  # no leader
NIL = -1  # no epoch yet
# State variables are signed bit-vectors of this width (values -32..31: offsets, epochs,
# replica ids and record ids all stay far below; record ids grow by one per write, so depths
# stay below 31). Bit-blasting makes the unrolling a SAT problem, much faster than integers.
WIDTH = 6
ACT_WIDTH = 8

SUPPORTED_BUGS = (
    "truncate_to_hw",
    "isr_expand_before_epoch_start",
    "no_fetch_epoch_fencing",
    "unfenced_truncation",
)


@dataclass(frozen=True)
class BmcConfig:
    replicas: int = 3
    log_size: int = 2
    max_epoch: int = 2
    bugs: Bugs = field(default_factory=Bugs)
    acks: int = -1  # -1 (all) or 1
    min_insync_replicas: int = 1
    bitvectors: bool = True  # state as bit-vectors (bit-blasted) or as unbounded Ints
    check_acks: bool = False  # acks=all: model LeaderAck and check acked_on_true_leader

    def __post_init__(self) -> None:
        unsupported = [b for b in self.bugs.enabled() if b not in SUPPORTED_BUGS]
        if unsupported:
            raise ValueError(f"bug switches not modelled by the BMC: {unsupported}")
        if self.acks not in (-1, 1):
            raise ValueError("acks must be -1 (all) or 1")
        if not 2 <= self.replicas <= 4:
            raise ValueError("2..4 replicas")

    @property
    def tracks_acks(self) -> bool:
        return self.acks == 1 or self.check_acks

    @property
    def cache_capacity(self) -> int:
        return self.max_epoch + 1

    def describe(self) -> str:
        bugs = ",".join(self.bugs.enabled()) or "none"
        acks = "1" if self.acks == 1 else "all"
        return (f"n={self.replicas} log_size={self.log_size} max_epoch={self.max_epoch} "
                f"acks={acks} min_isr={self.min_insync_replicas} bugs={bugs}")


# ------------------------------------------------------------------------------ state


class Frame(LeadershipPredicates):
    """The state variables of one time step, by name."""

    def __init__(self, cfg: BmcConfig, t: int) -> None:
        self.cfg = cfg
        self.t = t
        self.vars: dict[str, Any] = {}
        n, ls, cap = cfg.replicas, cfg.log_size, cfg.cache_capacity
        for r in range(n):
            for name in ("leo", "hw", "ep", "ldr", "leso", "cl"):
                self._int(f"{name}.{r}")
            for j in range(n):
                self._bool(f"isr.{r}.{j}")
            for i in range(ls):
                self._int(f"id.{r}.{i}")
                self._int(f"lep.{r}.{i}")
            for k in range(cap):
                self._int(f"ce.{r}.{k}")
                self._int(f"cs.{r}.{k}")
        for name in ("q_ep", "q_ldr", "next_ep", "next_id", "acked_id"):
            self._int(name)
        self._bool("acked")
        for j in range(n):
            self._bool(f"q_isr.{j}")
        for e in range(cfg.max_epoch + 1):
            self._bool(f"rok.{e}")
            self._int(f"rldr.{e}")
            for j in range(n):
                self._bool(f"risr.{e}.{j}")

    def _int(self, name: str) -> None:
        if self.cfg.bitvectors:
            self.vars[name] = z3.BitVec(f"{name}@{self.t}", WIDTH)
        else:
            self.vars[name] = z3.Int(f"{name}@{self.t}")

    def _bool(self, name: str) -> None:
        self.vars[name] = z3.Bool(f"{name}@{self.t}")

    def __getitem__(self, name: str) -> Any:
        return self.vars[name]

    def lit(self, value: int) -> ZInt:
        return z3.BitVecVal(value, WIDTH) if self.cfg.bitvectors else z3.IntVal(value)

    # --- views
    def cache(self, r: int) -> ZCache:
        cap = self.cfg.cache_capacity
        return ZCache(tuple(self[f"ce.{r}.{k}"] for k in range(cap)),
                      tuple(self[f"cs.{r}.{k}"] for k in range(cap)), self[f"cl.{r}"])

    def cell(self, r: int, offset: ZInt, kind: str) -> ZInt:
        """`id` or `lep` (record epoch) of replica r's record at a symbolic offset."""
        out: ZInt = self[f"{kind}.{r}.0"]
        for i in range(1, self.cfg.log_size):
            out = z3.If(offset == i, self[f"{kind}.{r}.{i}"], out)
        return out

    def isr_size(self, r: int) -> ZInt:
        return z_count([self[f"isr.{r}.{j}"] for j in range(self.cfg.replicas)], self.lit(0))


def cache_updates(r: int, cache: ZCache) -> dict[str, Any]:
    out: dict[str, Any] = {f"cl.{r}": cache.length}
    for k in range(cache.capacity):
        out[f"ce.{r}.{k}"] = cache.epochs[k]
        out[f"cs.{r}.{k}"] = cache.starts[k]
    return out


@dataclass(frozen=True)
class Instance:
    label: str
    guard: ZBool
    updates: dict[str, Any]


# ------------------------------------------------------------------------------ actions


def initial(s: Frame) -> ZBool:
    cfg = s.cfg
    parts: list[ZBool] = []
    for r in range(cfg.replicas):
        parts += [s[f"leo.{r}"] == 0, s[f"hw.{r}"] == 0, s[f"ep.{r}"] == NIL,
                  s[f"ldr.{r}"] == NONE, s[f"leso.{r}"] == 0, s[f"cl.{r}"] == 0]
        parts += [z3.Not(s[f"isr.{r}.{j}"]) for j in range(cfg.replicas)]
    parts += [s["q_ep"] == NIL, s["q_ldr"] == NONE, s["next_ep"] == 0, s["next_id"] == 0,
              z3.Not(s["acked"]), s["acked_id"] == NONE]
    parts += [s[f"q_isr.{j}"] for j in range(cfg.replicas)]
    parts += [z3.Not(s[f"rok.{e}"]) for e in range(cfg.max_epoch + 1)]
    return z3.And(parts)


def _controller_update(
    s: Frame, leader: ZInt, isr: Sequence[ZBool]
) -> tuple[ZBool, dict[str, Any]]:
    cfg = s.cfg
    e_new = s["next_ep"]
    upd: dict[str, Any] = {"q_ep": e_new, "q_ldr": leader, "next_ep": e_new + 1}
    for j in range(cfg.replicas):
        upd[f"q_isr.{j}"] = isr[j]
    for e in range(cfg.max_epoch + 1):
        minted = e_new == e
        upd[f"rok.{e}"] = z3.Or(minted, s[f"rok.{e}"])
        upd[f"rldr.{e}"] = z3.If(minted, leader, s[f"rldr.{e}"])
        for j in range(cfg.replicas):
            upd[f"risr.{e}.{j}"] = z3.If(minted, isr[j], s[f"risr.{e}.{j}"])
    return (e_new <= cfg.max_epoch, upd)


def _known_leo(s: Frame, leader: int, f: int) -> ZOptInt:
    """The follower's LEO as the leader knows it from fetches (None unless it fetched in the
    leader's epoch; with no_fetch_epoch_fencing any fetch counts)."""
    if s.cfg.bugs.no_fetch_epoch_fencing:
        known = z3.And(s.presumes(leader), s[f"ldr.{f}"] == leader)
    else:
        known = s.follows_in_epoch(leader, f)
    return ZOptInt(known, s[f"leo.{f}"])


def instances(s: Frame, lag_expired: ZBool, ack_now: ZBool) -> list[Instance]:
    cfg = s.cfg
    bugs = cfg.bugs
    n = cfg.replicas
    out: list[Instance] = []

    # ControllerElectLeader(l): any ISR member other than the current leader, fresh epoch.
    for leader in range(n):
        guard, upd = _controller_update(s, s.lit(leader), [s[f"q_isr.{j}"] for j in range(n)])
        # Symmetry reduction: replicas are interchangeable, so the first leader ever elected
        # can be taken to be replica 0.
        first = z3.Or(s["next_ep"] > 0, leader == 0)
        out.append(Instance(f"ControllerElectLeader({leader})",
                            z3.And(guard, first, s[f"q_isr.{leader}"], s["q_ldr"] != leader),
                            upd))

    # ControllerShrinkIsr(r): broker r fails or shuts down.
    for r in range(n):
        only_r = z3.And([s[f"q_isr.{j}"] == (j == r) for j in range(n)])
        was_leader = s["q_ldr"] == r
        new_isr = [z3.If(z3.And(was_leader, only_r), s[f"q_isr.{j}"],
                         z3.And(s[f"q_isr.{j}"], j != r)) for j in range(n)]
        new_leader = z3.If(was_leader, s.lit(NONE), s["q_ldr"])
        guard, upd = _controller_update(s, new_leader, new_isr)
        out.append(Instance(f"ControllerShrinkIsr({r})",
                            z3.And(guard, z3.Or(was_leader, s[f"q_isr.{r}"])), upd))

    # BecomeLeader(r, e).
    for e in range(cfg.max_epoch + 1):
        for r in range(n):
            cache, fits = z_assign_epoch(s.cache(r), s.lit(e), s[f"leo.{r}"])
            upd = {f"ep.{r}": s.lit(e), f"ldr.{r}": s.lit(r), f"leso.{r}": s[f"leo.{r}"]}
            upd |= {f"isr.{r}.{j}": s[f"risr.{e}.{j}"] for j in range(n)}
            upd |= cache_updates(r, cache)
            guard = z3.And(s[f"rok.{e}"], s[f"rldr.{e}"] == r, s[f"ep.{r}"] < e, fits)
            out.append(Instance(f"BecomeLeader({r}, e{e})", guard, upd))

    # BecomeFollowerAndTruncate(r, e, leader).
    rounds = cfg.cache_capacity + 1
    for e in range(cfg.max_epoch + 1):
        for r in range(n):
            base = z3.And(s[f"rok.{e}"], s[f"ep.{r}"] < e)
            common = {f"ep.{r}": s.lit(e)}
            common |= {f"isr.{r}.{j}": s[f"risr.{e}.{j}"] for j in range(n)}
            upd = dict(common, **{f"ldr.{r}": s.lit(NONE)})
            out.append(Instance(f"BecomeFollower({r}, e{e}, leader none)",
                                z3.And(base, s[f"rldr.{e}"] == NONE), upd))
            for leader in range(n):
                if leader == r:
                    continue
                guard = z3.And(base, s[f"rldr.{e}"] == leader)
                if bugs.truncate_to_hw:
                    offset = z_min(s[f"hw.{r}"], s[f"leo.{r}"])
                    cache = z_truncate_epochs(s.cache(r), offset)
                else:
                    offset, cache, finished = z_truncation_point(
                        s.cache(r), s[f"leo.{r}"], s[f"hw.{r}"], s.cache(leader),
                        s[f"leo.{leader}"], rounds)
                    guard = z3.And(guard, finished)
                    if not bugs.unfenced_truncation:
                        # KIP-320: the leader answers only in exactly the request's epoch.
                        guard = z3.And(guard, s.presumes(leader), s[f"ep.{leader}"] == e)
                upd = dict(common, **{f"ldr.{r}": s.lit(leader), f"leo.{r}": offset,
                                      f"hw.{r}": z_min(offset, s[f"hw.{r}"])})
                upd |= cache_updates(r, cache)
                out.append(Instance(f"BecomeFollowerAndTruncate({r}, e{e}, leader {leader})",
                                    guard, upd))

    # LeaderWrite(r): a presumed leader appends (id, its epoch).
    for r in range(n):
        leo = s[f"leo.{r}"]
        cache, fits = z_assign_epoch(s.cache(r), s[f"ep.{r}"], leo)
        guard = z3.And(s.presumes(r), leo < cfg.log_size, fits)
        if cfg.acks == -1:
            guard = z3.And(guard, z_acks_all_admissible(s.isr_size(r), cfg.min_insync_replicas))
        upd = {f"leo.{r}": leo + 1, "next_id": s["next_id"] + 1}
        for i in range(cfg.log_size):
            upd[f"id.{r}.{i}"] = z3.If(leo == i, s["next_id"], s[f"id.{r}.{i}"])
            upd[f"lep.{r}.{i}"] = z3.If(leo == i, s[f"ep.{r}"], s[f"lep.{r}.{i}"])
        upd |= cache_updates(r, cache)
        if cfg.acks == 1:
            take = z3.And(ack_now, z3.Not(s["acked"]))
            upd["acked"] = z3.Or(s["acked"], take)
            upd["acked_id"] = z3.If(take, s["next_id"], s["acked_id"])
        out.append(Instance(f"LeaderWrite({r})", guard, upd))

    # LeaderAck(r, o) (acks=all): the request for the record at o completes successfully.
    if cfg.acks == -1 and cfg.check_acks:
        for r in range(n):
            for o in range(cfg.log_size):
                _, ok = z_acks_all_satisfied(s[f"hw.{r}"], s.lit(o + 1), s.isr_size(r),
                                             s.lit(cfg.min_insync_replicas))
                guard = z3.And(s.presumes(r), z3.Not(s["acked"]), o < s[f"leo.{r}"], ok)
                out.append(Instance(f"LeaderAck({r}, offset {o})", guard,
                                    {"acked": z3.BoolVal(True), "acked_id": s[f"id.{r}.{o}"]}))

    # FollowerFetch(f, leader): one record from the leader at the follower's LEO.
    for f in range(n):
        for leader in range(n):
            if leader == f:
                continue
            leo_f = s[f"leo.{f}"]
            guard = z3.And(s.presumes(leader), s[f"ldr.{f}"] == leader,
                           leo_f < s[f"leo.{leader}"], leo_f < cfg.log_size)
            if not bugs.no_fetch_epoch_fencing:
                guard = z3.And(guard, s[f"ep.{f}"] == s[f"ep.{leader}"])
            rec_id = s.cell(leader, leo_f, "id")
            rec_ep = s.cell(leader, leo_f, "lep")
            cache, fits = z_assign_epoch(s.cache(f), rec_ep, leo_f)
            upd = {f"leo.{f}": leo_f + 1,
                   f"hw.{f}": z_min(s[f"hw.{leader}"], leo_f + 1)}
            for i in range(cfg.log_size):
                upd[f"id.{f}.{i}"] = z3.If(leo_f == i, rec_id, s[f"id.{f}.{i}"])
                upd[f"lep.{f}.{i}"] = z3.If(leo_f == i, rec_ep, s[f"lep.{f}.{i}"])
            upd |= cache_updates(f, cache)
            out.append(Instance(f"FollowerFetch({f} <- {leader})", z3.And(guard, fits), upd))

    # LeaderIncHighWatermark(r).
    for r in range(n):
        slots = [FollowerSlot(s[f"isr.{r}.{f}"], _known_leo(s, r, f))
                 for f in range(n) if f != r]
        new_hw = z_high_watermark(s[f"hw.{r}"], s[f"leo.{r}"], slots)
        out.append(Instance(f"LeaderIncHighWatermark({r})",
                            z3.And(s.presumes(r), new_hw > s[f"hw.{r}"]),
                            {f"hw.{r}": new_hw}))

    # LeaderShrinkIsr(r, f) and LeaderExpandIsr(r, f): only the true leader writes the ISR.
    for r in range(n):
        for f in range(n):
            if f == r:
                continue
            shrink = z3.And(s.true_leader(r), s[f"isr.{r}.{f}"],
                            z_is_out_of_sync(_known_leo(s, r, f), s[f"leo.{r}"], lag_expired))
            expand = z3.And(s.true_leader(r), z3.Not(s[f"isr.{r}.{f}"]),
                            z_can_expand_isr(_known_leo(s, r, f), s[f"hw.{r}"],
                                             s[f"leso.{r}"],
                                             not bugs.isr_expand_before_epoch_start))
            for label, guard, member in (("LeaderShrinkIsr", shrink, False),
                                         ("LeaderExpandIsr", expand, True)):
                upd = {}
                for j in range(n):
                    value = z3.BoolVal(member) if j == f else s[f"isr.{r}.{j}"]
                    upd[f"isr.{r}.{j}"] = value
                    upd[f"q_isr.{j}"] = value
                out.append(Instance(f"{label}({r}, {f})", guard, upd))
    return out


# ------------------------------------------------------------------------------ properties


def strong_isr(s: Frame) -> ZBool:
    cfg = s.cfg
    parts = []
    for r1 in range(cfg.replicas):
        for r2 in range(cfg.replicas):
            for o in range(cfg.log_size):
                same = z3.And(o < s[f"leo.{r1}"], o < s[f"leo.{r2}"],
                              s[f"id.{r1}.{o}"] == s[f"id.{r2}.{o}"],
                              s[f"lep.{r1}.{o}"] == s[f"lep.{r2}.{o}"])
                parts.append(z3.Implies(
                    z3.And(s.presumes(r1), s[f"q_isr.{r2}"], o < s[f"hw.{r1}"]), same))
    return z3.And(parts)


def hw_within_log(s: Frame) -> ZBool:
    return z3.And([z3.And(s[f"hw.{r}"] >= 0, s[f"hw.{r}"] <= s[f"leo.{r}"])
                   for r in range(s.cfg.replicas)])


def acked_on_true_leader(s: Frame) -> ZBool:
    cfg = s.cfg
    parts = []
    for r in range(cfg.replicas):
        has = z3.Or([z3.And(o < s[f"leo.{r}"], s[f"id.{r}.{o}"] == s["acked_id"])
                     for o in range(cfg.log_size)])
        parts.append(z3.Implies(z3.And(s["acked"], s.true_leader(r)), has))
    return z3.And(parts)


# ------------------------------------------------------------------------------ unrolling


def properties(cfg: BmcConfig) -> dict[str, Callable[[Frame], ZBool]]:
    props: dict[str, Callable[[Frame], ZBool]] = {
        "strong_isr": strong_isr, "hw_within_log": hw_within_log}
    if cfg.tracks_acks:
        props["acked_on_true_leader"] = acked_on_true_leader
    return props


@dataclass(frozen=True)
class BmcResult:
    config: BmcConfig
    max_depth: int
    prefix: tuple[str, ...]
    violated: tuple[str, ...]  # names of the broken properties (empty: none up to max_depth)
    depth: int  # first violating step of the trace, or max_depth when none was found
    trace: tuple[str, ...]
    seconds: float

    @property
    def found(self) -> bool:
        return bool(self.violated)


def _transition(cur: Frame, nxt: Frame, t: int) -> tuple[ZBool, Any, list[Instance]]:
    """One step: exactly the instance selected by `act@t` fires. Encoded as implications
    (selected => guard and updates; a variable no selected instance updates keeps its value),
    which bit-blasts into clauses that propagate well on the selector bits."""
    act = z3.BitVec(f"act@{t}", ACT_WIDTH) if cur.cfg.bitvectors else z3.Int(f"act@{t}")
    insts = instances(cur, z3.Bool(f"lag_expired@{t}"), z3.Bool(f"ack_now@{t}"))
    if len(insts) >= 2 ** (ACT_WIDTH - 1):
        raise ValueError("too many action instances for the action selector width")
    parts: list[ZBool] = [z3.ULT(act, len(insts)) if cur.cfg.bitvectors
                          else z3.And(act >= 0, act < len(insts))]
    updaters: dict[str, list[int]] = {name: [] for name in cur.vars}
    for i, inst in enumerate(insts):
        effects = [nxt[name] == value for name, value in inst.updates.items()]
        parts.append(z3.Implies(act == i, z3.And(inst.guard, *effects)))
        for name in inst.updates:
            updaters[name].append(i)
    for name, var in cur.vars.items():
        changers = updaters[name]
        if changers:
            parts.append(z3.Or(nxt[name] == var, *[act == i for i in changers]))
        else:
            parts.append(nxt[name] == var)
    return (z3.And(parts), act, insts)


def describe_state(model: Any, s: Frame) -> list[str]:
    cfg = s.cfg

    def val(name: str) -> int:
        v = model.eval(s[name], model_completion=True)
        return int(v.as_signed_long() if z3.is_bv(v) else v.as_long())

    def flag(name: str) -> bool:
        return bool(z3.is_true(model.eval(s[name], model_completion=True)))

    def ep(e: int) -> str:
        return "-" if e == NIL else f"e{e}"

    def who(r: int) -> str:
        return "none" if r == NONE else str(r)

    lines = []
    isr = "{" + ",".join(str(j) for j in range(cfg.replicas) if flag(f"q_isr.{j}")) + "}"
    lines.append(f"    quorum: epoch {ep(val('q_ep'))} leader {who(val('q_ldr'))} isr {isr}"
                 + (f"   acked id {val('acked_id')}" if flag("acked") else ""))
    for r in range(cfg.replicas):
        log = " ".join(f"(id{val(f'id.{r}.{i}')},{ep(val(f'lep.{r}.{i}'))})"
                       for i in range(val(f"leo.{r}")))
        cache = " ".join(f"{ep(val(f'ce.{r}.{k}'))}@{val(f'cs.{r}.{k}')}"
                         for k in range(val(f"cl.{r}")))
        local_isr = "{" + ",".join(str(j) for j in range(cfg.replicas)
                                   if flag(f"isr.{r}.{j}")) + "}"
        role = "LEADER" if val(f"ldr.{r}") == r else f"follows {who(val(f'ldr.{r}'))}"
        lines.append(f"    r{r}: {role:<10} epoch {ep(val(f'ep.{r}')):<3} hw {val(f'hw.{r}')} "
                     f"leso {val(f'leso.{r}')} isr {local_isr:<8} log [{log}] cache [{cache}]")
    return lines


def _solver(cfg: BmcConfig) -> Any:
    if cfg.bitvectors:
        # Non-incremental bit-blasting to SAT: far faster here than the incremental SMT core.
        tactic = z3.Then("simplify", "propagate-values", "solve-eqs", "simplify",
                         "bit-blast", "sat")
        return tactic.solver()
    return z3.Solver()


def check(cfg: BmcConfig, max_depth: int, prefix: Sequence[str] = ()) -> BmcResult:
    """Is a state violating a property reachable in at most `max_depth` steps?

    One query: the transition relation unrolled `max_depth` times and "some property fails at
    some step". The trace shown stops at the first failing step (not necessarily the shortest
    possible trace). `prefix` pins the first actions by label (e.g. "ControllerElectLeader(0)")
    to replay or guide a scenario; the rest is left to the solver."""
    start = time.perf_counter()
    frames = [Frame(cfg, 0)]
    parts: list[ZBool] = [initial(frames[0])]
    acts: list[tuple[Any, list[Instance]]] = []
    for k in range(1, max_depth + 1):
        frames.append(Frame(cfg, k))
        rel, act, insts = _transition(frames[k - 1], frames[k], k - 1)
        parts.append(rel)
        acts.append((act, insts))
    if len(prefix) > max_depth:
        raise ValueError("prefix longer than the depth")
    for t, label in enumerate(prefix):
        act, insts = acts[t]
        matches = [i for i, inst in enumerate(insts) if inst.label == label]
        if not matches:
            raise ValueError(f"no action {label!r}")
        parts.append(act == matches[0])
    props = properties(cfg)
    bad = [z3.Not(z3.And([p(f) for p in props.values()])) for f in frames]
    parts.append(z3.Or(bad))
    solver = _solver(cfg)
    solver.add(*parts)
    verdict = solver.check()
    if verdict == z3.unsat:
        return BmcResult(cfg, max_depth, tuple(prefix), (), max_depth, (),
                         time.perf_counter() - start)
    if verdict != z3.sat:
        raise RuntimeError(f"solver gave {verdict}: {solver.reason_unknown()}")
    model = solver.model()
    depth = next(k for k, b in enumerate(bad) if z3.is_true(model.eval(b, model_completion=True)))
    broken = tuple(name for name, p in props.items()
                   if z3.is_false(model.eval(p(frames[depth]), model_completion=True)))
    trace = ["  step 0: Init", *describe_state(model, frames[0])]
    for t, (act, insts) in enumerate(acts[:depth]):
        label = insts[int(model.eval(act, model_completion=True).as_long())].label
        trace.append(f"  step {t + 1}: {label}")
        trace += describe_state(model, frames[t + 1])
    return BmcResult(cfg, max_depth, tuple(prefix), broken, depth, tuple(trace),
                     time.perf_counter() - start)


def format_result(result: BmcResult) -> str:
    head = f"BMC {result.config.describe()}"
    if result.prefix:
        head += f" (first {len(result.prefix)} actions pinned)"
    if not result.found:
        return (f"{head}\n  no violation up to depth {result.max_depth} "
                f"({result.seconds:.2f}s)")
    return (f"{head}\n  VIOLATED {', '.join(result.violated)} at depth {result.depth} "
            f"({result.seconds:.2f}s)\n" + "\n".join(result.trace))


# ------------------------------------------------------------------------------ scenarios

# First actions of the B11 and B8 scenarios (reference §4), used to guide the solver when a
# full search would take minutes; the solver still has to find the remaining steps.
B11_PREFIX = (
    "ControllerElectLeader(0)",
    "BecomeLeader(0, e0)",
    "BecomeFollowerAndTruncate(2, e0, leader 0)",
    "LeaderWrite(0)",
    "LeaderShrinkIsr(0, 1)",
    "ControllerElectLeader(2)",
)
B8_PREFIX = (
    "ControllerElectLeader(0)",
    "ControllerElectLeader(1)",
    "ControllerElectLeader(0)",
    "BecomeLeader(0, e0)",
    "BecomeFollowerAndTruncate(2, e0, leader 0)",
    "BecomeLeader(0, e2)",
    "LeaderWrite(0)",
)


@dataclass(frozen=True)
class Scenario:
    name: str
    config: BmcConfig
    depth: int
    prefix: tuple[str, ...] = ()


def scenarios(full: bool = False) -> tuple[Scenario, ...]:
    """The standard runs: the fixed protocol, then one per modelled bug. With `full`, no
    prefix is pinned (minutes for B11/B8) and the fixed protocol is checked deeper."""
    def bug(name: str, max_epoch: int = 1) -> BmcConfig:
        return BmcConfig(replicas=3, log_size=1, max_epoch=max_epoch, bugs=Bugs(**{name: True}))

    return (
        Scenario("fixed protocol", BmcConfig(replicas=3, log_size=1, max_epoch=1),
                 10 if full else 6),
        Scenario("B1 acks=1", BmcConfig(replicas=2, log_size=1, max_epoch=1, acks=1), 5),
        Scenario("B5 truncate_to_hw", bug("truncate_to_hw"), 10),
        Scenario("B11 isr_expand_before_epoch_start", bug("isr_expand_before_epoch_start"), 11,
                 () if full else B11_PREFIX),
        Scenario("B8 no_fetch_epoch_fencing", bug("no_fetch_epoch_fencing", 2), 12,
                 () if full else B8_PREFIX),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the standard scenarios and print each result with its trace (`--full`: no pinned
    prefixes). Exit status 1 if the fixed protocol shows a violation or a bug is not found."""
    args = list(argv if argv is not None else sys.argv[1:])
    ok = True
    for sc in scenarios(full="--full" in args):
        result = check(sc.config, sc.depth, sc.prefix)
        print(f"# {sc.name}")
        print(format_result(result))
        expect_bug = bool(sc.config.bugs.enabled()) or sc.config.acks == 1
        ok = ok and result.found == expect_bug
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
