"""The model's controlled-shutdown action (`Bounds.shutdowns`): explored like every other
action, its invariants hold for the fixed protocol, and a controller that forgets part of
controlled shutdown is caught by them."""

from __future__ import annotations

import pytest

import core.controller as ctl
from core.config import ProtocolConfig
from spec.checker import check
from spec.model import Bounds, Model
from spec.trace import format_trace

BOUNDS = Bounds(brokers=2, records=1, leader_epochs=3, crashes=0, shutdowns=1)


def test_controlled_shutdown_keeps_every_invariant() -> None:
    r = check(Model(ProtocolConfig(), BOUNDS))
    assert r.violation is None, format_trace(r.trace, r.violation)
    assert r.exhausted
    without = check(Model(ProtocolConfig(), Bounds(brokers=2, records=1, leader_epochs=3,
                                                   crashes=0)))
    assert r.states > without.states  # the action adds behaviours


def test_a_stop_after_controlled_shutdown_is_reached() -> None:
    """The search does reach a broker that stopped cleanly (else the invariants would hold
    vacuously)."""
    model = Model(ProtocolConfig(), BOUNDS)
    frontier = [model.initial()]
    seen = set()
    stopped = False
    for _ in range(12):
        nxt = []
        for w in frontier:
            for action, w2 in model.successors(w):
                if action[0] == "shutdown-stop" and any(not n.alive for n in w2.nodes):
                    stopped = True
                if w2 not in seen:
                    seen.add(w2)
                    nxt.append(w2)
        frontier = nxt
        if stopped:
            break
    assert stopped


@pytest.mark.parametrize(
    ("broken", "invariant"),
    [("leadership", "controlled_shutdown_moves_leadership"),
     ("isr", "controlled_shutdown_shrinks_isr")],
)
def test_a_controller_that_skips_part_of_controlled_shutdown_is_caught(
    monkeypatch: pytest.MonkeyPatch, broken: str, invariant: str
) -> None:
    """No historic bug switch relates, so the checks are shown to bite by breaking the
    controller: an election that may keep the shutting-down broker as leader, or an ISR
    write that keeps it."""
    if broken == "leadership":
        # forgets that the asking broker is shutting down: it may be "elected" again
        monkeypatch.setattr(ctl, "controlled_shutdown_leader",
                            lambda assignment, isr, live, shutting: tuple(
                                r for r in assignment if r in live and r in isr))
    else:
        real = ctl._write_election

        def keep_isr(c, ctx, leader, unclean, cfg, excluded=frozenset()):  # type: ignore[no-untyped-def]
            return real(c._replace(shutting_down=()), ctx, leader, unclean, cfg, excluded)

        monkeypatch.setattr(ctl, "_write_election", keep_isr)
    r = check(Model(ProtocolConfig(), BOUNDS), invariants=(invariant,))
    assert r.violation is not None and r.violation[0] == invariant, r.violation
