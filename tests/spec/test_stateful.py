"""Hypothesis drives the same cluster model the checker explores: each step takes one of
the enabled actions, and every step is checked against the same invariants."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from core.config import ProtocolConfig
from spec.bugs import by_name
from spec.invariants import check_state, check_step
from spec.model import Bounds, Model
from spec.world import World


class InvariantBroken(AssertionError):
    pass


def machine(config: ProtocolConfig, bounds: Bounds) -> type[RuleBasedStateMachine]:
    model = Model(config, bounds)

    class ClusterMachine(RuleBasedStateMachine):
        world: World

        @initialize()
        def start(self) -> None:
            self.world = model.initial()
            self.trace: list[object] = []

        @rule(pick=st.integers(min_value=0, max_value=10_000))
        def act(self, pick: int) -> None:
            succs = model.successors(self.world)
            if not succs:
                return
            action, nxt = succs[pick % len(succs)]
            self.trace.append(action)
            bad = check_step(self.world, nxt) or check_state(nxt)
            self.world = nxt
            if bad is not None:
                raise InvariantBroken(f"{bad[0]}: {bad[1]} after {self.trace}")

    return ClusterMachine


SETTINGS = settings(max_examples=150, stateful_step_count=30, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck), database=None)


def test_fixed_protocol_keeps_every_invariant() -> None:
    bounds = Bounds(brokers=3, records=2, leader_epochs=3, crashes=1, leader_moves=1)
    run_state_machine_as_test(machine(ProtocolConfig(), bounds), settings=SETTINGS)


@pytest.mark.parametrize("name", ["acks-1", "min-isr-1-lossy-crash", "unclean-election"])
def test_hypothesis_finds_shallow_bugs(name: str) -> None:
    scenario = by_name(name)
    find = settings(SETTINGS, max_examples=1500, stateful_step_count=12)
    with pytest.raises(InvariantBroken):
        run_state_machine_as_test(machine(scenario.config(), scenario.bounds), settings=find)
