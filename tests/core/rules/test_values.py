"""The core's values are frozen, slotted and hashable (DESIGN: state, events, effects and
messages are values, so the model checker can hash, share and compare them)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from core import effects, events, messages


@pytest.mark.parametrize("module", [effects, events, messages], ids=lambda m: m.__name__)
def test_every_event_effect_and_message_is_a_frozen_slotted_dataclass(module: object) -> None:
    classes = [c for _, c in inspect.getmembers(module, inspect.isclass)
               if c.__module__ == module.__name__ and dataclasses.is_dataclass(c)]  # type: ignore[attr-defined]
    assert len(classes) >= 5
    for c in classes:
        params = c.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen, c.__name__
        assert "__slots__" in c.__dict__, c.__name__
        assert c.__hash__ is not None, c.__name__


def test_messages_are_ordered_so_the_model_can_keep_the_network_sorted() -> None:
    """The model checker keeps messages in flight as a sorted multiset (one state per
    multiset, not per arrival order): every message type must be orderable."""
    classes = [c for _, c in inspect.getmembers(messages, inspect.isclass)
               if c.__module__ == messages.__name__ and dataclasses.is_dataclass(c)]
    for c in classes:
        assert c.__dataclass_params__.order, c.__name__  # type: ignore[attr-defined]
