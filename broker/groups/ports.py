"""The group coordinator's ports: the ``__consumer_offsets`` log and the clock.

The coordinator touches neither the log nor the network nor the OS clock itself.  The broker
runtime gives it

* an ``OffsetsLog``: acks=all appends of key/value records to a ``__consumer_offsets`` partition,
  and a read of everything a partition holds (to load it when this broker becomes its leader);
* a ``Clock``: wall-clock milliseconds (commit timestamps) and one-shot timers (session,
  rebalance, initial-delay and pending-sync timeouts).

``RealClock`` runs timers on the running asyncio loop; ``SimClock`` is a manual clock for tests
and the simulator (``advance`` fires due timers in deadline order).  ``MemoryOffsetsLog`` is an
in-memory log for tests and the simulator: one list of records per partition, errors injectable.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "Cancellable",
    "Clock",
    "MemoryOffsetsLog",
    "OffsetsLog",
    "RealClock",
    "SimClock",
]


class OffsetsLog(Protocol):
    """The ``__consumer_offsets`` topic as the coordinator sees it.

    Contract:

    * ``append`` appends all ``records`` (key, value; ``None`` value = tombstone) to partition
      ``partition`` as one batch with acks=all and returns once the append is committed (0) or
      failed (a Kafka error code: NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
      NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR,
      MESSAGE_TOO_LARGE, ...).  The coordinator maps these codes as Kafka's coordinator does.
    * Concurrent appends to one partition land in the log in the order of the ``append`` calls
      (the leader appends locally before its first ``await``); the coordinator relies on this to
      keep the latest commit of a key when two commits of it are in flight, as Kafka relies on
      the appended batch offset.
    * ``read`` yields every record the partition currently holds, in offset order (after
      compaction, only the latest record of a key may be left: either is fine).  It is called
      when this broker has become the partition's leader, before any append to it.
    """

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> int: ...

    def read(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]: ...


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (commit and state timestamps)."""
        ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        """Run ``callback`` once, ``delay_ms`` from now, on the coordinator's event loop."""
        ...


class RealClock:
    """The OS wall clock and the running asyncio loop's timers."""

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000.0, callback)


@dataclass(eq=False, slots=True)
class _SimTimer:
    deadline_ms: int
    seq: int
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: _SimTimer) -> bool:
        return (self.deadline_ms, self.seq) < (other.deadline_ms, other.seq)


class SimClock:
    """A manual clock: time moves only by ``advance``, which fires due timers in order.

    Timers with the same deadline fire in the order they were set.  A timer set by a callback
    for a deadline inside the advanced window fires in the same ``advance``.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms
        self._timers: list[_SimTimer] = []
        self._seq = itertools.count()

    def time_ms(self) -> int:
        return self._now_ms

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        timer = _SimTimer(self._now_ms + max(delay_ms, 0), next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        return timer

    @property
    def pending(self) -> int:
        """Armed (not cancelled) timers."""
        return sum(1 for t in self._timers if not t.cancelled)

    def next_deadline_ms(self) -> int | None:
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0].deadline_ms if self._timers else None

    def advance(self, ms: int) -> int:
        """Move time forward by ``ms`` firing every due timer; returns how many fired."""
        if ms < 0:
            raise ValueError("time cannot go backwards")
        end = self._now_ms + ms
        fired = 0
        while self._timers and self._timers[0].deadline_ms <= end:
            timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now_ms = max(self._now_ms, timer.deadline_ms)
            timer.cancelled = True
            timer.callback()
            fired += 1
        self._now_ms = end
        return fired


@dataclass
class MemoryOffsetsLog:
    """An in-memory ``OffsetsLog``: per-partition record lists; ``fail_with`` injects errors.

    ``fail_with[partition] = code`` makes appends to that partition return ``code`` (nothing
    appended); ``gate`` (an ``asyncio.Event``), when set to an unset event, holds every append
    until it is set, to test replies that wait for the append.
    """

    partitions: dict[int, list[tuple[bytes, bytes | None]]] = field(default_factory=dict)
    fail_with: dict[int, int] = field(default_factory=dict)
    gate: asyncio.Event | None = None
    appends: int = 0

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> int:
        code = self.fail_with.get(partition, 0)
        if code:
            return code
        self.partitions.setdefault(partition, []).extend(records)  # lands before any await
        self.appends += 1
        if self.gate is not None:
            await self.gate.wait()
        return 0

    def read(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]:
        return list(self.partitions.get(partition, ()))
