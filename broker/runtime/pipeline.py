"""Produce requests on one connection, appended in order while earlier ones wait for acks.

Kafka's guarantee per connection is that requests are processed in the order they are sent
and their responses come back in that order. Kafka's broker gets it by reading nothing more
from a connection until the current response is sent, so an acks=all produce holds the
connection for a whole replication round (a follower's fetch, its next fetch reporting the
new log end). With the producer's max.in.flight requests queued behind it, every record then
waits for up to max.in.flight replication rounds once a round takes longer than linger.ms: on
loopback Kafka's round is a millisecond or two; a Python broker's is several (more on a busy
machine), and that queue was most of hiwater's acks=all latency at half load (issue #12).

Here consecutive Produce requests of a connection are handed to the core as soon as they are
read (so their appends happen in request order, as before) and wait for their acks
concurrently; their responses are written strictly in request order (from the step that
acknowledged them, see `ResponsePipeline`; a task only for a write that must wait). Any
other request first waits until every pending produce response is written, then runs alone
as before. So ordering, DelayedProduce (a response waits until the HW covers its batch) and
the order of responses are Kafka's; only the waits overlap. Bounded: at most `depth` produce
requests pending per connection. Not used while produce quotas are on (a throttled response
mutes the connection before the next request is read, KIP-219).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

PRODUCE_PIPELINE_DEPTH = 5  # librdkafka's and the Java producer's default max.in.flight


Watch = Callable[[asyncio.Future[Any], Callable[[asyncio.Future[Any]], None]], bool]


class Pending:
    """A request already carried out whose response waits only for futures (a produce's
    acks: the core's replies); `finish` builds the response once they are all done."""

    __slots__ = ("finish", "futures", "left", "watch")

    def __init__(self, futures: list[asyncio.Future[Any]], finish: Callable[[], Any],
                 watch: Watch | None = None) -> None:
        self.futures = futures
        self.finish = finish
        # registers a hook called as soon as a future is resolved (False: it cannot, then
        # the future's own done-callback is used, a loop turn later)
        self.watch = watch
        self.left = 0


class ResponsePipeline:
    """Pending responses of one connection, written in request order.

    No task per request and no writer task while the writes are synchronous: a response
    goes out from the hook of the last future it waits for (`Pending.watch`: in the step
    that resolved it; else its done-callback, a loop turn later), or at once when it was
    ready on submit. A task runs only for an
    asynchronous write (`write` returned an awaitable), and the later responses wait for it.
    """

    def __init__(self, write: Callable[[Any], Awaitable[None] | None],
                 abort: Callable[[], None] = lambda: None,
                 depth: int = PRODUCE_PIPELINE_DEPTH) -> None:
        self._write = write
        self._abort = abort  # closes the connection: the reader may be waiting for a request
        self.depth = depth
        self._pending: collections.deque[Pending] = collections.deque()
        self._writer: asyncio.Task[None] | None = None  # an asynchronous write in progress
        self._room = asyncio.Event()
        self._room.set()
        self._empty = asyncio.Event()
        self._empty.set()
        self.failed: BaseException | None = None
        self._closed = False  # the connection is gone: nothing more is written

    def __len__(self) -> int:
        return len(self._pending)

    async def submit(self, handler: Awaitable[Any]) -> None:
        """Start `handler` now (its synchronous part runs before anything submitted later);
        its result is written after every earlier one. Waits while `depth` are pending."""
        await self._wait_room()
        task = asyncio.ensure_future(handler)
        self._add(Pending([task], task.result))

    async def submit_pending(self, pending: Pending) -> None:
        """Queue a response whose request was carried out already (no task: `finish` runs
        when its futures are done). Waits while `depth` are pending."""
        await self._wait_room()
        self._add(pending)

    async def _wait_room(self) -> None:
        while len(self._pending) >= self.depth and self.failed is None:
            self._room.clear()
            await self._room.wait()
        self._raise()

    def _add(self, entry: Pending) -> None:
        self._pending.append(entry)
        self._empty.clear()
        waiting = [f for f in entry.futures if not f.done()]
        entry.left = len(waiting)
        if not waiting:
            self._advance()
            return
        done = functools.partial(self._one_done, entry)
        watch = entry.watch
        for f in waiting:
            if watch is None or not watch(f, done):
                f.add_done_callback(done)

    def _one_done(self, entry: Pending, fut: asyncio.Future[Any]) -> None:
        entry.left -= 1
        if entry.left == 0:
            self._advance()

    def _advance(self) -> None:
        """Write every response at the head that is ready, in order."""
        while self._pending and self._writer is None and not self._closed \
                and self.failed is None:
            head = self._pending[0]
            if head.left:
                return
            try:
                r = self._write(head.finish())
            except BaseException as e:
                self._fail(e)
                return
            if r is not None:  # asynchronous: the rest waits for it
                self._writer = asyncio.ensure_future(self._finish_write(r, head))
                return
            self._pending.popleft()
            self._room.set()
        if not self._pending:
            self._empty.set()

    async def _finish_write(self, r: Awaitable[None], head: Pending) -> None:
        try:
            await r
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # the connection is broken: the reader stops too
            self._writer = None
            self._fail(e)
            return
        self._writer = None
        if self._pending and self._pending[0] is head:
            self._pending.popleft()
        self._room.set()
        self._advance()

    def _fail(self, e: BaseException) -> None:
        if self.failed is None:
            self.failed = e
            if not isinstance(e, ConnectionError | OSError | TimeoutError):
                log.error("produce request failed: %r", e, exc_info=e)
            self._abort()
        self._empty.set()
        self._room.set()

    async def flush(self) -> None:
        """Until every pending response is written (or writing failed)."""
        if self._pending:
            await self._empty.wait()
        self._raise()

    def _raise(self) -> None:
        if self.failed is not None:
            raise self.failed

    async def close(self) -> None:
        """Cancel what is pending (the connection is gone). A request that was read is still
        carried out, as in Kafka: a handler not yet started runs its synchronous part (the
        append) first; only the wait for its acknowledgement and its response are dropped."""
        self._closed = True
        futures = [f for e in self._pending for f in e.futures]
        if any(not f.done() for f in futures):
            await asyncio.sleep(0)  # every pending task's first step runs before we resume
        tasks = [*futures, *([self._writer] if self._writer is not None else [])]
        self._pending.clear()
        for t in tasks:
            t.cancel()
        for t in tasks:
            if isinstance(t, asyncio.Task):
                with contextlib.suppress(BaseException):
                    await t
        self._empty.set()
        self._room.set()
