"""The effect interpreter's ports: what `Node` needs from the world, as small Protocols.

`Node` (broker/runtime/node.py) carries out the core's effects through these and nothing
else, so one interpreter runs in two worlds (stateright's one `process_commands`, several
runners; TigerBeetle's production replica inside the VOPR):

| port        | live broker (`broker.runtime.server`)       | simulator (`harness.sim`)      |
|-------------|----------------------------------------------|--------------------------------|
| `Clock`     | `AsyncioClock`: the loop's timers, wall time | the simulator's event heap     |
| `Transport` | `peers.Peers` + the request handlers' waiters| simulated links                |
| `ZkEffects` | `zkdriver.ZkDriver` (kazoo on a thread)      | the simulated ZooKeeper        |
| store       | `LogManager` over `RealFS`                   | `LogManager` over `SimFS`      |

The store's own port is `broker.store.fs.FS`; Node reaches the store through a `LogManager`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

from core import effects as fx
from core.messages import Message


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds (segment timestamps, retention)."""
        ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        """Run `callback` once after `delay_ms`. A delay <= 0 runs it as soon as the current
        work is done, after every earlier zero-delay callback (FIFO), before any later one."""
        ...


class Transport(Protocol):
    def send(self, dst: int, message: Message) -> None:
        """A request to peer broker `dst` (fire and forget: answers come back as events)."""
        ...

    def respond(self, dst: int, message: Message) -> None:
        """The answer to a request broker `dst` sent us (FetchResponse,
        OffsetForLeaderEpochResponse, ControlledShutdownResponse)."""
        ...


class ZkEffects(Protocol):
    def submit(self, effect: fx.Effect) -> None:
        """Carry out a Zk* effect; its completion events come back through `Node.handle`."""
        ...


class AsyncioClock:
    """The running asyncio loop's timers and the OS wall clock (the live broker)."""

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        loop = asyncio.get_running_loop()
        # A zero-delay timer goes straight to the ready queue: it runs in the loop's next
        # iteration, in the order it was set, before any task that yields after setting it
        # (the Fetcher's round assembly relies on that when timers are not inline), and never
        # waits on the clock. The live broker's Node runs zero-delay timers inline instead
        # (`Node(inline_timers=True)`), so this path serves Nodes built without it.
        if delay_ms <= 0:
            return loop.call_soon(callback)
        return loop.call_later(delay_ms / 1000.0, callback)


class CallbackTransport:
    """A Transport from two callables (the live broker: `Peers.send` for requests, the
    handlers' reply waiters for responses)."""

    def __init__(self, send: Callable[[int, Message], None],
                 respond: Callable[[int, Message], None]) -> None:
        self._send = send
        self._respond = respond

    def send(self, dst: int, message: Message) -> None:
        self._send(dst, message)

    def respond(self, dst: int, message: Message) -> None:
        self._respond(dst, message)


class CallbackZk:
    """A ZkEffects from a callable (the live broker: `ZkDriver.submit`)."""

    def __init__(self, submit: Callable[[fx.Effect], None]) -> None:
        self._submit = submit

    def submit(self, effect: fx.Effect) -> None:
        self._submit(effect)


def running_loop(cache: list[asyncio.AbstractEventLoop]) -> asyncio.AbstractEventLoop:
    """asyncio.get_running_loop(), looked up again only when the cached loop (`cache`, of one
    object that lives on one loop at a time) is closed: get_running_loop() makes a getpid()
    system call on every call in CPython 3.11 (its fork check, dropped in 3.12), several per
    acks=all round (bench/README.md, "uvloop as the broker's event loop")."""
    if cache:
        loop = cache[0]
        if not loop.is_closed():
            return loop
        cache.clear()
    loop = asyncio.get_running_loop()
    cache.append(loop)
    return loop
