"""Every counterexample the checkers ever found, replayed: it must still break the same
invariant with its bug switched on, and must not break anything once the bug is fixed."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest

from core.config import ProtocolConfig
from spec.bugs import CATALOGUE
from spec.checker import replay
from spec.invariants import check_state, check_step
from spec.model import Model
from spec.trace import load

TRACES = sorted((Path(__file__).parent / "traces").glob("*.jsonl"))
UNFIXED = {b.name for b in CATALOGUE if b.unfixed}


def _first_violation(model: Model, actions: list[tuple[object, ...]]) -> tuple[str, str] | None:
    """Replay as far as the actions stay enabled; the first invariant broken, if any."""
    trace = [(a, w) for a, w in _replay_prefix(model, actions)]
    for (_, a), (_, b) in itertools.pairwise(trace):
        bad = check_step(a, b) or check_state(b)
        if bad:
            return bad
    return None


def _replay_prefix(model: Model, actions: list[tuple[object, ...]]) -> list[tuple[object, object]]:
    for n in range(len(actions), -1, -1):
        try:
            return replay(model, actions[:n])  # type: ignore[return-value]
        except ValueError:
            continue
    return []


def test_there_is_a_trace_for_every_catalogued_bug() -> None:
    assert {p.stem for p in TRACES} >= {b.name for b in CATALOGUE}


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_trace_still_breaks_its_invariant(path: Path) -> None:
    config, bounds, actions, expected = load(path)
    assert expected is not None
    bad = _first_violation(Model(config, bounds), actions)
    assert bad is not None and bad[0] == expected[0], bad


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_trace_is_harmless_once_fixed(path: Path) -> None:
    config, bounds, actions, _ = load(path)
    fixed = ProtocolConfig()
    fixed_bounds = dataclasses.replace(bounds, acks=-1)
    bad = _first_violation(Model(fixed, fixed_bounds), actions)
    if path.stem in UNFIXED:
        # No fix exists in ZooKeeper-era Kafka (KIP-966 is KRaft only): the trace must
        # break the fixed protocol too, documenting the limitation.
        assert bad is not None
        return
    assert bad is None, f"the fixed protocol breaks {bad}"
    assert config != fixed or bounds.acks != -1
