"""The ZooKeeper side of the effect interpreter: one task, one worker thread, one queue.

The core's ZooKeeper effects and the adapter's watch events share one FIFO queue, consumed by
one task that runs each effect on a dedicated thread (kazoo calls block) and feeds its
completion events to the core before it takes the next item. That keeps the adapter's
ordering contract (an operation's events reach the core before any watch event that fired
after it, see `broker.runtime.zk`) and applies ZooKeeper effects in the order the core
emitted them (DESIGN rule 2).

Failures: a registration or election that cannot reach ZooKeeper is retried after a backoff
while the broker runs; a controller write that cannot complete makes the controller resign
(its outcome is unknown, the same as a fenced write); a leader's ISR write that cannot
complete is reported as failed (the leader keeps its ISR and tries again later). Our id
registered by another session is first taken for our own previous session (a crash and a
quick restart) and waited out for the session timeout; after that it is a second broker with
our id: fatal, with a clear error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from broker.runtime.zk import BrokerIdInUse, ZkAdapter, ZkError, ZkUnavailable
from core import effects as fx
from core import events as ev

log = logging.getLogger(__name__)

QUEUE_MAX = 10_000
RETRY_BACKOFF_S = 1.0
ID_WAIT_MARGIN_S = 2.0
T = TypeVar("T")


class ZkDriver:
    def __init__(
        self,
        adapter: ZkAdapter,
        deliver: Callable[[ev.Event], None],
        fatal: Callable[[BaseException], None],
    ) -> None:
        self.adapter = adapter
        self.deliver = deliver
        self.fatal = fatal
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="zk")
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._slots = threading.BoundedSemaphore(QUEUE_MAX)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.session_timeout_s = adapter.session_timeout_s if adapter is not None else 18.0
        self._id_wait_until: float | None = None

    # -- inputs ---------------------------------------------------------------------------

    def sink(self, event: ev.Event) -> None:
        """The adapter's watch sink (called on kazoo's callback thread)."""
        loop = self._loop
        if loop is None or self._closing:
            return
        if not self._slots.acquire(timeout=30.0):
            log.error("ZooKeeper event queue full for 30 s: dropping %r", event)
            return
        try:
            loop.call_soon_threadsafe(self._queue.put_nowait, ("event", event))
        except RuntimeError:  # loop closed
            self._slots.release()

    def submit(self, effect: fx.Effect) -> None:
        """A core effect (on the loop thread)."""
        if self._closing:
            return
        if not self._slots.acquire(blocking=False):
            self.fatal(RuntimeError(f"more than {QUEUE_MAX} ZooKeeper effects queued"))
            return
        self._queue.put_nowait(("effect", effect))

    async def call(self, fn: Callable[[], T]) -> T:
        """Run an adapter call on the ZooKeeper thread (admin reads and writes, in order with
        the core's effects)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn)

    # -- the task -------------------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name="zk-driver")

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _run(self) -> None:
        while True:
            kind, item = await self._queue.get()
            self._slots.release()
            try:
                if kind == "event":
                    self.deliver(item)
                else:
                    await self._execute(item)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a bug: do not let the task die silently
                self.fatal(e)
                return

    async def _execute(self, effect: fx.Effect) -> None:
        try:
            events = await self.call(lambda: self.adapter.execute(effect))
        except BrokerIdInUse as e:
            self._id_in_use(effect, e)
            return
        except ZkError as e:
            self._on_unavailable(effect, e)
            return
        if isinstance(effect, fx.ZkRegisterBroker):
            self._id_wait_until = None
        for e2 in events:
            self.deliver(e2)

    def _id_in_use(self, effect: fx.Effect, err: BrokerIdInUse) -> None:
        """Our id is registered by another session. After a crash and a quick restart that is
        our own previous session, which ZooKeeper expires within the session timeout: wait
        that long (plus a margin) before calling it a second broker with our id."""
        loop = asyncio.get_running_loop()
        if self._id_wait_until is None:
            self._id_wait_until = loop.time() + self.session_timeout_s + ID_WAIT_MARGIN_S
            log.warning("%s; waiting up to %.1f s for a previous session of ours to expire",
                        err, self.session_timeout_s + ID_WAIT_MARGIN_S)
        if loop.time() >= self._id_wait_until:
            self.fatal(err)
            return
        loop.call_later(0.5, self.submit, effect)

    def _on_unavailable(self, effect: fx.Effect, err: ZkError) -> None:
        log.warning("ZooKeeper effect %s failed: %s", type(effect).__name__, err)
        match effect:
            case (fx.ZkRegisterBroker() | fx.ZkElectController() | fx.ZkNotifyIsrChange()
                  | fx.ZkDeleteTopic() | fx.ZkResignController()):
                # A resignation is retried too: a session that outlives the outage keeps
                # /controller, held by a broker that no longer acts as controller, and no one
                # runs again (found by harness/sim, seed 10405 at --time 10). The retry
                # deletes /controller only if this session still holds it.
                loop = asyncio.get_running_loop()
                loop.call_later(RETRY_BACKOFF_S, self.submit, effect)
            case fx.ZkWritePartitionState(by_controller=True):
                # Unknown outcome: the controller cannot trust its view any more. Resign, as
                # a fenced controller does; the next controller reads ZooKeeper afresh.
                self.deliver(ev.PartitionStateWritten(
                    effect.tp, effect.proposed, True, ok=False, fenced=True, current=None,
                    unknown=True))
            case fx.ZkWritePartitionState():
                # No answer before the deadline: the write may still have been applied (the
                # leader writes it again). An adapter closed under us is the broker stopping.
                self.deliver(ev.PartitionStateWritten(
                    effect.tp, effect.proposed, False, ok=False, fenced=False, current=None,
                    unknown=isinstance(err, ZkUnavailable)))
