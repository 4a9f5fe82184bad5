"""Simulated time: one heap of callbacks ordered by (time, insertion order).

Time is integer microseconds; nothing here reads a clock. Callbacks due at the same time run
in the order they were scheduled, so a zero-delay timer behaves as asyncio's `call_soon`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from heapq import heappop, heappush

US_PER_MS = 1000


class Handle:
    """A scheduled callback; `cancel` makes it a no-op (Node's `Cancellable`)."""

    __slots__ = ("cancelled", "fn")

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Delivery:
    """A callback that carries something from one process to another: a message (on the
    wire, resent, or in a paused broker's backlog), a ZooKeeper operation a broker submitted,
    or a ZooKeeper notification. `src` is the sender (a broker id, or -1 for ZooKeeper) and
    `payload` what it carries, so what is still on its way can be read off the scheduler
    (`Scheduler.queued`) instead of being counted along each path."""

    __slots__ = ("fn", "payload", "src")

    def __init__(self, src: int, payload: object, fn: Callable[[], None]) -> None:
        self.src, self.payload, self.fn = src, payload, fn

    def __call__(self) -> None:
        self.fn()


class Scheduler:
    def __init__(self) -> None:
        self.now_us = 0
        self._heap: list[tuple[int, int, Handle]] = []
        self._seq = 0
        self.events = 0  # callbacks run

    # `at` and `after_us` run once per message and timer: their clamps are written out
    # (what `max(t_us, now)` and `max(0, delay_us)` return, ties included) and `after_us`
    # does not go through `at`.
    def at(self, t_us: int, fn: Callable[[], None]) -> Handle:
        h = Handle(fn)
        self._seq += 1
        now = self.now_us
        heappush(self._heap, (now if now > t_us else t_us, self._seq, h))
        return h

    def after_us(self, delay_us: int, fn: Callable[[], None]) -> Handle:
        h = Handle(fn)
        self._seq += 1
        heappush(self._heap, (self.now_us + (delay_us if delay_us > 0 else 0), self._seq, h))
        return h

    def run_one(self, until_us: int) -> bool:
        """Run the next callback due by `until_us`; False when there is none."""
        heap = self._heap
        while heap:
            t, _, h = heap[0]
            if t > until_us:
                return False
            heappop(heap)
            if h.cancelled:
                continue
            self.now_us = t
            h.cancelled = True
            self.events += 1
            h.fn()
            return True
        return False

    def advance(self, t_us: int) -> None:
        """Idle time passes to `t_us` (after `run_one(t_us)` found nothing due by then)."""
        if self._heap and self._heap[0][0] < t_us and not self._heap[0][2].cancelled:
            raise ValueError("a callback is due before the time advanced to")
        self.now_us = max(self.now_us, t_us)

    def pending(self) -> int:
        return len(self._heap)

    def queued(self) -> Iterator[Callable[[], None]]:
        """Every callback still to run (in no particular order)."""
        return (h.fn for _, _, h in self._heap if not h.cancelled)
