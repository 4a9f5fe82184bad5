"""Differential tests: each Z3 encoding in spec.z3.rules equals its Python rule in core.rules.

Every encoding is built once over symbolic inputs (exactly the terms the proofs and the model
checks use); each Hypothesis example substitutes concrete values, simplifies to a constant
and compares with the Python function.
"""

from __future__ import annotations

from typing import Any

import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from core.rules.acks import acks_all_admissible, acks_all_satisfied
from core.rules.epochs import EpochEntry, assign_epoch, end_offset_for_epoch, truncate_epochs
from core.rules.hw import high_watermark
from core.rules.isr import can_expand_isr, is_out_of_sync
from core.rules.truncation import divergence_offset
from spec.z3.rules import (
    FollowerSlot,
    ZCache,
    ZOptInt,
    z_acks_all_admissible,
    z_acks_all_satisfied,
    z_assign_epoch,
    z_can_expand_isr,
    z_divergence_offset,
    z_end_offset_for_epoch,
    z_high_watermark,
    z_is_out_of_sync,
    z_latest_epoch,
    z_truncate_epochs,
)

EXAMPLES = settings(max_examples=150, deadline=None)
CAPACITY = 4
SMALL = st.integers(min_value=-3, max_value=12)
OFFSET = st.integers(min_value=0, max_value=12)


def concrete(term: Any, bindings: dict[Any, int | bool]) -> int | bool:
    """Substitute concrete values for the symbolic inputs and simplify to a Python value."""
    pairs = [
        (var, z3.BoolVal(value) if isinstance(value, bool) else z3.IntVal(value))
        for var, value in bindings.items()
    ]
    out = z3.simplify(z3.substitute(term, *pairs)) if pairs else z3.simplify(term)
    if z3.is_true(out):
        return True
    if z3.is_false(out):
        return False
    assert z3.is_int_value(out), f"not a constant after substitution: {out}"
    return int(out.as_long())


# ------------------------------------------------------------------------------ high watermark

HW_SLOTS = 4
_hw_current, _hw_leo = z3.Ints("hw_current hw_leader_leo")
_hw_slots = [FollowerSlot.fresh(f"hw_f{i}") for i in range(HW_SLOTS)]
_hw_term = z_high_watermark(_hw_current, _hw_leo, _hw_slots)


@EXAMPLES
@given(
    current=OFFSET,
    leader_leo=OFFSET,
    isr=st.lists(st.one_of(st.none(), OFFSET), max_size=HW_SLOTS),
    padding=st.lists(st.tuples(st.booleans(), OFFSET), min_size=HW_SLOTS, max_size=HW_SLOTS),
)
def test_high_watermark(
    current: int, leader_leo: int, isr: list[int | None], padding: list[tuple[bool, int]]
) -> None:
    bindings: dict[Any, int | bool] = {_hw_current: current, _hw_leo: leader_leo}
    for i, slot in enumerate(_hw_slots):
        if i < len(isr):
            leo = isr[i]
            bindings[slot.in_isr] = True
            bindings[slot.leo.present] = leo is not None
            bindings[slot.leo.value] = 0 if leo is None else leo
        else:  # slots outside the ISR carry arbitrary values that must not matter
            bindings[slot.in_isr] = False
            bindings[slot.leo.present] = padding[i][0]
            bindings[slot.leo.value] = padding[i][1]
    assert concrete(_hw_term, bindings) == high_watermark(current, leader_leo, tuple(isr))


# ------------------------------------------------------------------------------ acks

_a_size, _a_min, _a_hw, _a_req = z3.Ints("a_size a_min a_hw a_req")
_a_admissible = z_acks_all_admissible(_a_size, _a_min)
_a_done, _a_ok = z_acks_all_satisfied(_a_hw, _a_req, _a_size, _a_min)


@EXAMPLES
@given(size=SMALL, min_isr=SMALL, hw=SMALL, required=SMALL)
def test_acks(size: int, min_isr: int, hw: int, required: int) -> None:
    bindings: dict[Any, int | bool] = {_a_size: size, _a_min: min_isr, _a_hw: hw, _a_req: required}
    assert concrete(_a_admissible, bindings) == acks_all_admissible(size, min_isr)
    expected = acks_all_satisfied(hw, required, size, min_isr)
    assert (concrete(_a_done, bindings), concrete(_a_ok, bindings)) == expected


# ------------------------------------------------------------------------------ ISR guards

_i_leo = ZOptInt.fresh("i_leo")
_i_hw, _i_leso, _i_leader_leo = z3.Ints("i_hw i_leso i_leader_leo")
_i_check, _i_expired = z3.Bools("i_check i_expired")
_i_expand = z_can_expand_isr(_i_leo, _i_hw, _i_leso, _i_check)
_i_out = z_is_out_of_sync(_i_leo, _i_leader_leo, _i_expired)


@EXAMPLES
@given(
    follower_leo=st.one_of(st.none(), SMALL),
    hw=SMALL,
    leso=SMALL,
    leader_leo=SMALL,
    check=st.booleans(),
    expired=st.booleans(),
)
def test_isr_guards(
    follower_leo: int | None, hw: int, leso: int, leader_leo: int, check: bool, expired: bool
) -> None:
    bindings: dict[Any, int | bool] = {
        _i_leo.present: follower_leo is not None,
        _i_leo.value: 0 if follower_leo is None else follower_leo,
        _i_hw: hw,
        _i_leso: leso,
        _i_leader_leo: leader_leo,
        _i_check: check,
        _i_expired: expired,
    }
    assert concrete(_i_expand, bindings) == can_expand_isr(follower_leo, hw, leso, check)
    assert concrete(_i_out, bindings) == is_out_of_sync(follower_leo, leader_leo, expired)


# ------------------------------------------------------------------------------ epoch caches


@st.composite
def caches(draw: st.DrawFn, max_len: int = CAPACITY) -> tuple[EpochEntry, ...]:
    """Well-formed caches: epochs and start offsets strictly increasing, both >= 0."""
    n = draw(st.integers(min_value=0, max_value=max_len))
    epochs = sorted(draw(st.sets(st.integers(min_value=0, max_value=9), min_size=n, max_size=n)))
    starts = sorted(draw(st.sets(st.integers(min_value=0, max_value=9), min_size=n, max_size=n)))
    return tuple(EpochEntry(e, s) for e, s in zip(epochs, starts, strict=True))


@st.composite
def raw_caches(draw: st.DrawFn) -> tuple[EpochEntry, ...]:
    """Arbitrary (possibly unsorted) caches: end_offset_for_epoch is encoded exactly for all."""
    entries = draw(st.lists(st.tuples(SMALL, SMALL), max_size=CAPACITY))
    return tuple(EpochEntry(e, s) for e, s in entries)


_c = ZCache.fresh("c", CAPACITY)
_c_req, _c_leo, _c_hw, _c_lep, _c_lend = z3.Ints("c_req c_leo c_hw c_lep c_lend")
_c_eo = z_end_offset_for_epoch(_c, _c_req, _c_leo)
_c_latest = z_latest_epoch(_c)
_c_trunc = z_truncate_epochs(_c, _c_req)
_c_assigned, _c_fits = z_assign_epoch(_c, _c_lep, _c_lend)
_c_div = z_divergence_offset(_c, _c_leo, _c_hw, _c_lep, _c_lend)


def cache_bindings(cache: tuple[EpochEntry, ...]) -> dict[Any, int | bool]:
    out: dict[Any, int | bool] = {_c.length: len(cache)}
    for i in range(CAPACITY):
        epoch, start = cache[i] if i < len(cache) else (77, 88)  # junk beyond the length
        out[_c.epochs[i]] = epoch
        out[_c.starts[i]] = start
    return out


def read_cache(cache: ZCache, bindings: dict[Any, int | bool]) -> tuple[EpochEntry, ...]:
    length = concrete(cache.length, bindings)
    assert isinstance(length, int) and not isinstance(length, bool)
    return tuple(
        EpochEntry(int(concrete(cache.epochs[i], bindings)),
                   int(concrete(cache.starts[i], bindings)))
        for i in range(length)
    )


@EXAMPLES
@given(cache=st.one_of(caches(), raw_caches()), requested=SMALL, leo=SMALL)
def test_end_offset_for_epoch(cache: tuple[EpochEntry, ...], requested: int, leo: int) -> None:
    bindings = cache_bindings(cache) | {_c_req: requested, _c_leo: leo}
    got = (concrete(_c_eo[0], bindings), concrete(_c_eo[1], bindings))
    assert got == end_offset_for_epoch(cache, requested, leo)
    latest = cache[-1].epoch if cache else -1
    assert concrete(_c_latest, bindings) == latest


@EXAMPLES
@given(cache=caches(), end=st.integers(min_value=-1, max_value=11))
def test_truncate_epochs(cache: tuple[EpochEntry, ...], end: int) -> None:
    bindings = cache_bindings(cache) | {_c_req: end}
    assert read_cache(_c_trunc, bindings) == truncate_epochs(cache, end)


@EXAMPLES
@given(cache=caches(), epoch=st.integers(min_value=0, max_value=10),
       start=st.integers(min_value=0, max_value=10))
def test_assign_epoch(cache: tuple[EpochEntry, ...], epoch: int, start: int) -> None:
    bindings = cache_bindings(cache) | {_c_lep: epoch, _c_lend: start}
    expected = assign_epoch(cache, epoch, start)
    fits = concrete(_c_fits, bindings)
    assert fits == (len(expected) <= CAPACITY)
    if fits:
        assert read_cache(_c_assigned, bindings) == expected


@EXAMPLES
@given(
    cache=st.one_of(caches(), raw_caches()),
    leo=SMALL,
    hw=SMALL,
    leader_epoch=SMALL,
    leader_end=SMALL,
)
def test_divergence_offset(
    cache: tuple[EpochEntry, ...], leo: int, hw: int, leader_epoch: int, leader_end: int
) -> None:
    bindings = cache_bindings(cache) | {
        _c_leo: leo, _c_hw: hw, _c_lep: leader_epoch, _c_lend: leader_end,
    }
    got = (concrete(_c_div[0], bindings), concrete(_c_div[1], bindings))
    assert got == divergence_offset(cache, leo, hw, leader_epoch, leader_end)
