"""The core's values are frozen, slotted and hashable (DESIGN: state, events, effects and
messages are values, so the model checker can hash, share and compare them)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from core import effects, events, messages, timers


@pytest.mark.parametrize("module", [effects, events, messages, timers], ids=lambda m: m.__name__)
def test_events_effects_messages_and_timer_keys_are_frozen_slotted(module: object) -> None:
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


def test_configuration_values_are_frozen_and_slotted() -> None:
    """The protocol settings, the bug switches and a topic's own settings are part of every
    state the model checker hashes: they are frozen, slotted dataclasses."""
    from core import config

    for c in (config.ProtocolConfig, config.Bugs, config.TopicConfig):
        params = c.__dataclass_params__  # type: ignore[union-attr]
        assert params.frozen, c.__name__
        assert "__slots__" in c.__dict__ and "__dict__" not in dir(c()), c.__name__
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(c(), dataclasses.fields(c)[0].name, None)


def test_requests_the_core_makes_are_unnumbered_until_the_driver_numbers_them() -> None:
    """The core leaves request ids to its driver, which numbers requests from 1 (a
    correlation id per connection, as Kafka's clients do): the core's own requests carry
    0, an id no driver ever assigns, so an unnumbered request is never taken for an
    answered one."""
    assert messages.NO_REQUEST_ID == 0
    from core.types import TopicPartition

    req = messages.FetchRequest(1, TopicPartition("t", 0), 0, 1, -1)
    assert req.request_id == 0
