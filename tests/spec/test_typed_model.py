"""The model's interpreter treats effects as the broker's does (an unknown one is an error),
timer keys are typed in its actions, and traces saved with the old string-tuple timer keys
still load."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

from core import effects as fx
from core import events as ev
from core.config import ProtocolConfig
from core.timers import (
    FetchTimeoutTimer,
    FetchTimer,
    LeaderImbalanceTimer,
    ProduceTimeoutTimer,
    ReplicaLagTimer,
)
from core.types import TopicPartition
from spec.checker import replay
from spec.model import Bounds, Model, _Builder
from spec.trace import _legacy_timer_label, describe_action, load, save

TRACES = Path(__file__).parent / "traces"
TP = TopicPartition("t", 0)


@dataclass(frozen=True, slots=True)
class Unknown:
    """An effect type the interpreters were never taught."""


def test_an_unknown_effect_is_an_error_in_the_model() -> None:
    model = Model(ProtocolConfig(), Bounds())
    bld = _Builder(model.initial())
    queue: deque[tuple[int, ev.Event]] = deque()
    with pytest.raises(AssertionError):
        model._apply(bld, 0, Unknown(), queue)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot apply"):
        model._apply(bld, 0, fx.ZkDeleteTopic("t"), queue)
    model._apply(bld, 0, fx.DeletePartition(TP), queue)  # known, no model consequence


@pytest.mark.parametrize(("old", "new"), [
    ("('fetch', TopicPartition(topic='t', partition=0))", FetchTimer(TP)),
    ("('fetch_timeout', TopicPartition(topic='t', partition=0))", FetchTimeoutTimer(TP)),
    ("('lag', TopicPartition(topic='t', partition=0), 2)", ReplicaLagTimer(TP, 2)),
    ("('produce_timeout', TopicPartition(topic='t', partition=0), 5)", ProduceTimeoutTimer(TP, 5)),
    ("('rebalance',)", LeaderImbalanceTimer()),
])
def test_legacy_timer_labels_read_as_typed_keys(old: str, new: object) -> None:
    assert _legacy_timer_label(old) == repr(new)
    assert _legacy_timer_label(repr(new)) == repr(new)  # a new label is left alone


def test_a_stored_legacy_trace_loads_and_replays_with_typed_timer_labels() -> None:
    path = TRACES / "truncate-to-hw.jsonl"
    assert "('fetch'" in path.read_text()  # stored before timer keys had types
    config, bounds, actions, _ = load(path)
    timer_actions = [a for a in actions if a[0] == "timer"]
    assert timer_actions and all(str(a[2]).endswith(")") and not str(a[2]).startswith("(")
                                 for a in timer_actions)
    trace = replay(Model(config, bounds), actions)
    assert len(trace) == len(actions) + 1
    assert "replica fetcher's next fetch" in describe_action(
        next(a for a in actions if "FetchTimer(" in str(a[2])))


def test_timer_actions_name_the_typed_key_and_round_trip(tmp_path: Path) -> None:
    model = Model(ProtocolConfig(), Bounds(brokers=2, records=1))
    w = model.initial()
    actions = []
    for _ in range(12):  # elect a controller, make leaders, until a timer is armed
        succs = model.successors(w)
        timed = [(a, s) for a, s in succs if a[0] == "timer"]
        a, w = (timed or succs)[0]
        actions.append(a)
        if timed:
            break
    assert actions[-1][0] == "timer"
    label = actions[-1][2]
    assert isinstance(label, str) and label.split("(")[0] in {
        "FetchTimer", "FetchTimeoutTimer", "ReplicaLagTimer"}
    path = tmp_path / "t.jsonl"
    save(path, model.config, model.bounds, actions, None)
    assert json.loads(path.read_text().splitlines()[-1])[2] == label
    _, _, loaded, _ = load(path)
    assert loaded == actions and replay(model, loaded)[-1][1] == w
