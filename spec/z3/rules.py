"""Z3 encodings of the tiny integer rules in `core/rules`.

Every function here builds Z3 terms from Z3 terms and mirrors one function of `core.rules`
branch for branch, so that a Hypothesis differential test (`tests/z3/test_rules_differential.py`)
can keep the two equal, `spec.z3.proofs` can prove properties of the encodings for unbounded
integers, and `spec.z3.bmc` / `spec.z3.inductive` can use the very same terms inside the
protocol's transition relation.

Conventions:

* an optional integer (`int | None` in the Python rule) is a `ZOptInt`: a Bool `present` and an
  Int `value` that only matters when `present` holds;
* a leader-epoch cache (`tuple[EpochEntry, ...]` in Python) is a `ZCache` of fixed capacity:
  `epochs[i]`, `starts[i]` for `i < capacity` and an Int `length`; entries at `i >= length` are
  ignored. Encodings that filter the cache (`z_truncate_epochs`, `z_assign_epoch`) rely on the
  cache being well formed (epochs and start offsets strictly increasing), which `core.rules.epochs`
  maintains and which `z_cache_well_formed` states.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import z3

# z3 ships no type information: terms are `Any` under these names.
ZInt = Any
ZBool = Any

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


def lit(value: int, like: ZInt) -> ZInt:
    """An integer literal of the same sort as `like`: the encodings are generic over Int
    (proofs, unbounded) and signed bit-vectors (bounded model checking, bit-blasted)."""
    if z3.is_bv(like):
        return z3.BitVecVal(value, like.size())
    return z3.IntVal(value)


def z_count(conditions: Sequence[ZBool], like: ZInt) -> ZInt:
    """Number of true conditions, in the sort of `like`."""
    total: ZInt = lit(0, like)
    for c in conditions:
        total = total + z3.If(c, lit(1, like), lit(0, like))
    return total


def z_min(a: ZInt, b: ZInt) -> ZInt:
    return z3.If(a <= b, a, b)


def z_max(a: ZInt, b: ZInt) -> ZInt:
    return z3.If(a >= b, a, b)


def as_bool(value: bool | ZBool) -> ZBool:
    """A Python bool as a Z3 Bool; Z3 terms pass through."""
    if isinstance(value, bool):
        return z3.BoolVal(value)
    return value


@dataclass(frozen=True)
class ZOptInt:
    """`int | None` as a pair (present, value)."""

    present: ZBool
    value: ZInt

    @staticmethod
    def fresh(name: str) -> ZOptInt:
        return ZOptInt(z3.Bool(f"{name}_present"), z3.Int(f"{name}_value"))

    @staticmethod
    def some(value: ZInt) -> ZOptInt:
        return ZOptInt(z3.BoolVal(True), value)

    @staticmethod
    def none() -> ZOptInt:
        return ZOptInt(z3.BoolVal(False), z3.IntVal(0))


@dataclass(frozen=True)
class FollowerSlot:
    """One remote replica as the leader sees it when computing the high watermark.

    `in_isr` says whether the slot takes part (the Python function gets only the ISR followers);
    `leo` is the follower's log end offset as learnt by the leader in its current epoch
    (`leo.present` false is the Python `None`)."""

    in_isr: ZBool
    leo: ZOptInt

    @staticmethod
    def fresh(name: str) -> FollowerSlot:
        return FollowerSlot(z3.Bool(f"{name}_in_isr"), ZOptInt.fresh(f"{name}_leo"))


# --------------------------------------------------------------------------------------------
# core.rules.hw


def z_high_watermark(
    current_hw: ZInt, leader_leo: ZInt, followers: Sequence[FollowerSlot]
) -> ZInt:
    """`core.rules.hw.high_watermark` over the followers whose `in_isr` holds."""
    blocked = z3.Or([z3.And(f.in_isr, z3.Not(f.leo.present)) for f in followers])
    candidate: ZInt = leader_leo
    for f in followers:
        candidate = z3.If(z3.And(f.in_isr, f.leo.value < candidate), f.leo.value, candidate)
    return z3.If(blocked, current_hw, z_max(current_hw, candidate))


# --------------------------------------------------------------------------------------------
# core.rules.acks


def z_acks_all_admissible(isr_size: ZInt, min_insync_replicas: ZInt) -> ZBool:
    """`core.rules.acks.acks_all_admissible`."""
    return isr_size >= min_insync_replicas


def z_acks_all_satisfied(
    high_watermark: ZInt, required_offset: ZInt, isr_size: ZInt, min_insync_replicas: ZInt
) -> tuple[ZBool, ZBool]:
    """`core.rules.acks.acks_all_satisfied`: `(done, ok)`."""
    done = high_watermark >= required_offset
    ok = z3.And(done, isr_size >= min_insync_replicas)
    return (done, ok)


# --------------------------------------------------------------------------------------------
# core.rules.isr


def z_can_expand_isr(
    follower_leo: ZOptInt,
    leader_hw: ZInt,
    leader_epoch_start_offset: ZInt,
    check_epoch_start: bool | ZBool = True,
) -> ZBool:
    """`core.rules.isr.can_expand_isr`."""
    check = as_bool(check_epoch_start)
    return z3.And(
        follower_leo.present,
        follower_leo.value >= leader_hw,
        z3.Not(z3.And(check, follower_leo.value < leader_epoch_start_offset)),
    )


def z_is_out_of_sync(follower_leo: ZOptInt, leader_leo: ZInt, lag_time_expired: ZBool) -> ZBool:
    """`core.rules.isr.is_out_of_sync`."""
    caught_up = z3.And(follower_leo.present, follower_leo.value == leader_leo)
    return z3.And(z3.Not(caught_up), lag_time_expired)


# --------------------------------------------------------------------------------------------
# core.rules.epochs


@dataclass(frozen=True)
class ZCache:
    """A leader-epoch cache of fixed capacity: entries `(epochs[i], starts[i])`, `i < length`."""

    epochs: tuple[ZInt, ...]
    starts: tuple[ZInt, ...]
    length: ZInt

    @property
    def capacity(self) -> int:
        return len(self.epochs)

    @staticmethod
    def fresh(name: str, capacity: int) -> ZCache:
        return ZCache(
            tuple(z3.Int(f"{name}_epoch_{i}") for i in range(capacity)),
            tuple(z3.Int(f"{name}_start_{i}") for i in range(capacity)),
            z3.Int(f"{name}_length"),
        )

    @staticmethod
    def of(entries: Sequence[tuple[int, int]], capacity: int) -> ZCache:
        """A concrete cache (padding entries are zeros)."""
        if len(entries) > capacity:
            raise ValueError("more entries than capacity")
        pad = [(0, 0)] * (capacity - len(entries))
        full = [*entries, *pad]
        return ZCache(
            tuple(z3.IntVal(e) for e, _ in full),
            tuple(z3.IntVal(s) for _, s in full),
            z3.IntVal(len(entries)),
        )

    def last_epoch(self) -> ZInt:
        """Epoch of the last entry (meaningful only when `length > 0`)."""
        out: ZInt = self.epochs[0]
        for i in range(1, self.capacity):
            out = z3.If(self.length == i + 1, self.epochs[i], out)
        return out

    def last_start(self) -> ZInt:
        out: ZInt = self.starts[0]
        for i in range(1, self.capacity):
            out = z3.If(self.length == i + 1, self.starts[i], out)
        return out

    def equals(self, other: ZCache) -> ZBool:
        """Same length and same live entries."""
        parts = [self.length == other.length]
        for i in range(self.capacity):
            live = i < self.length
            parts.append(z3.Implies(live, self.epochs[i] == other.epochs[i]))
            parts.append(z3.Implies(live, self.starts[i] == other.starts[i]))
        return z3.And(parts)


def z_cache_well_formed(cache: ZCache, log_end_offset: ZInt | None = None) -> ZBool:
    """Length within capacity, epochs >= 0 and start offsets >= 0, both strictly increasing;
    with a log end offset, every start offset is at most it."""
    parts = [cache.length >= 0, cache.length <= cache.capacity]
    for i in range(cache.capacity):
        live = i < cache.length
        parts.append(z3.Implies(live, z3.And(cache.epochs[i] >= 0, cache.starts[i] >= 0)))
        if log_end_offset is not None:
            parts.append(z3.Implies(live, cache.starts[i] <= log_end_offset))
        if i + 1 < cache.capacity:
            nxt = i + 1 < cache.length
            parts.append(z3.Implies(nxt, cache.epochs[i] < cache.epochs[i + 1]))
            parts.append(z3.Implies(nxt, cache.starts[i] < cache.starts[i + 1]))
    return z3.And(parts)


def z_latest_epoch(cache: ZCache) -> ZInt:
    """`core.rules.epochs.latest_epoch`."""
    return z3.If(cache.length > 0, cache.last_epoch(), lit(UNDEFINED_EPOCH, cache.length))


def z_end_offset_for_epoch(
    cache: ZCache, requested_epoch: ZInt, log_end_offset: ZInt
) -> tuple[ZInt, ZInt]:
    """`core.rules.epochs.end_offset_for_epoch`: `(epoch, end_offset)`.

    Exact for any cache (sorted or not): the first entry with a larger epoch decides, and the
    "floor" is the entry just before it, as in the Python loop."""
    undefined = (lit(UNDEFINED_EPOCH, cache.length), lit(UNDEFINED_OFFSET, cache.length))
    # The loop: first i (< length) with epochs[i] > requested. Built from the back so that the
    # smallest such i wins.
    epoch: ZInt = undefined[0]
    offset: ZInt = undefined[1]
    for i in reversed(range(cache.capacity)):
        hit = z3.And(i < cache.length, cache.epochs[i] > requested_epoch)
        found_epoch = requested_epoch if i == 0 else cache.epochs[i - 1]
        epoch = z3.If(hit, found_epoch, epoch)
        offset = z3.If(hit, cache.starts[i], offset)
    is_undefined = z3.Or(requested_epoch == UNDEFINED_EPOCH, cache.length <= 0)
    is_latest = requested_epoch == cache.last_epoch()
    epoch = z3.If(is_undefined, undefined[0], z3.If(is_latest, requested_epoch, epoch))
    offset = z3.If(is_undefined, undefined[1], z3.If(is_latest, log_end_offset, offset))
    return (epoch, offset)


def z_truncate_epochs(cache: ZCache, end_offset: ZInt) -> ZCache:
    """`core.rules.epochs.truncate_epochs` for a well-formed cache: the kept entries (start
    offset below `end_offset`) are a prefix, so only the length changes."""
    kept = z_count([z3.And(i < cache.length, cache.starts[i] < end_offset)
                    for i in range(cache.capacity)], cache.length)
    return ZCache(cache.epochs, cache.starts, kept)


def z_assign_epoch(cache: ZCache, epoch: ZInt, start_offset: ZInt) -> tuple[ZCache, ZBool]:
    """`core.rules.epochs.assign_epoch` for a well-formed cache: `(new cache, fits)`.

    The kept entries (epoch and start offset both smaller) are a prefix of length `k`; the new
    entry goes to index `k`. `fits` is false when that index is beyond the capacity (the
    encoding cannot represent the result; callers must require `fits`)."""
    unchanged = z3.And(cache.length > 0, cache.last_epoch() == epoch,
                       cache.last_start() <= start_offset)
    k = z_count([z3.And(i < cache.length, cache.epochs[i] < epoch, cache.starts[i] < start_offset)
                 for i in range(cache.capacity)], cache.length)
    epochs = tuple(z3.If(z3.And(z3.Not(unchanged), k == i), epoch, cache.epochs[i])
                   for i in range(cache.capacity))
    starts = tuple(z3.If(z3.And(z3.Not(unchanged), k == i), start_offset, cache.starts[i])
                   for i in range(cache.capacity))
    length = z3.If(unchanged, cache.length, k + 1)
    fits = z3.Or(unchanged, k < cache.capacity)
    return (ZCache(epochs, starts, length), fits)


# --------------------------------------------------------------------------------------------
# core.rules.truncation


def z_divergence_offset(
    follower_cache: ZCache,
    follower_leo: ZInt,
    follower_hw: ZInt,
    leader_epoch: ZInt,
    leader_end_offset: ZInt,
) -> tuple[ZInt, ZBool]:
    """`core.rules.truncation.divergence_offset`: `(truncation_offset, done)`."""
    f_epoch, f_end = z_end_offset_for_epoch(follower_cache, leader_epoch, follower_leo)
    offset = z3.If(
        leader_end_offset == UNDEFINED_OFFSET,
        z_min(follower_hw, follower_leo),
        z3.If(
            z3.Or(leader_epoch == UNDEFINED_EPOCH, f_epoch == UNDEFINED_EPOCH),
            z_min(leader_end_offset, follower_leo),
            z3.If(
                f_epoch == leader_epoch,
                z_min(z_min(f_end, leader_end_offset), follower_leo),
                z_min(f_end, follower_leo),
            ),
        ),
    )
    done = z3.Or(
        leader_end_offset == UNDEFINED_OFFSET,
        leader_epoch == UNDEFINED_EPOCH,
        f_epoch == UNDEFINED_EPOCH,
        f_epoch == leader_epoch,
    )
    return (offset, done)


def z_truncation_point(
    follower_cache: ZCache,
    follower_leo: ZInt,
    follower_hw: ZInt,
    leader_cache: ZCache,
    leader_leo: ZInt,
    rounds: int,
) -> tuple[ZInt, ZCache, ZBool]:
    """The whole OffsetsForLeaderEpoch exchange, `rounds` round trips unrolled.

    Each round the follower asks for its latest epoch, the leader answers with
    `z_end_offset_for_epoch` on its own cache, and the follower applies `z_divergence_offset`;
    when not done it truncates (log and cache) and asks again. Returns the final truncation
    offset, the follower's truncated cache and whether the exchange finished within `rounds`.
    """
    leo: ZInt = follower_leo
    cache = follower_cache
    finished: ZBool = z3.BoolVal(False)
    for _ in range(rounds):
        asked = z_latest_epoch(cache)
        l_epoch, l_end = z_end_offset_for_epoch(leader_cache, asked, leader_leo)
        offset, done = z_divergence_offset(cache, leo, follower_hw, l_epoch, l_end)
        truncated = z_truncate_epochs(cache, offset)
        new_leo = z3.If(finished, leo, offset)
        cache = ZCache(cache.epochs, cache.starts,
                       z3.If(finished, cache.length, truncated.length))
        leo = new_leo
        finished = z3.Or(finished, done)
    return (leo, cache, finished)
