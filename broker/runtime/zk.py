"""ZooKeeper adapter (kazoo): the broker's ZooKeeper effects in, core events out.

This is the real counterpart of the abstract ZooKeeper in `spec/model.py` (`_zk_register`,
`_zk_elect`, `_zk_write`, `_expire`, the notifications), with Kafka's (2.x, ZooKeeper mode)
znode layout and data formats:

    /brokers/ids/<id>                          ephemeral, JSON registration (v5); its czxid is
                                               the broker epoch (KIP-380)
    /controller                                ephemeral {"version":1,"brokerid":N,"timestamp":..}
    /controller_epoch                          persistent integer; its znode version fences
                                               controller writes (KAFKA-6082)
    /brokers/topics/<t>                        {"version":2,"partitions":{"0":[1,2,3]},...}
    /brokers/topics/<t>/partitions/<p>/state   {"controller_epoch":..,"leader":..,"version":1,
                                               "leader_epoch":..,"isr":[..]}; znode version =
                                               the partition's zkVersion
    /isr_change_notification/isr_change_NNNNNNNNNN   sequential {"version":1,"partitions":[..]}
    /admin/delete_topics, /config/topics/<t>, /config/changes, /brokers/seqid

Operations (blocking; each returns the core event for its completion):

    register_broker()           -> BrokerRegistered(czxid)      (BrokerIdInUse if another
                                                                  session holds the id)
    elect_controller()          -> ControllerElection(...)
    resign_controller()         -> None
    write_partition_state(...)  -> PartitionStateWritten(...)
    notify_isr_change(tps)      -> None
    create_topic(topic, assignment)
    execute(effect)             -> tuple of completion events, in the order the core must see
                                   them (the same events `spec.model` produces for the effect)

Watches become core events handed to `sink` (any callable taking an `Event`; `QueueSink` for
threads, `AsyncioSink` for an event loop, both bounded with backpressure):

    /controller (every broker)                 -> ControllerChanged(id or NO_LEADER)
    /brokers/ids children (controller only)    -> BrokersChanged(live brokers with czxids)
    /brokers/topics children (controller only) -> TopicsChanged(snapshots of new topics)
    /isr_change_notification (controller only)-> IsrChanged(snapshots); notifications deleted
    session expiry (kazoo LOST)                -> SessionExpired()

Concurrency. kazoo runs a connection thread and one callback thread; watch handlers and
session-state handling all run, serialized, on the callback thread, and the sink is called
there. The operations are blocking calls with bounded retries; from asyncio use
`await adapter.aexecute(effect)`, which is `asyncio.to_thread(adapter.execute, effect)`. We
chose `to_thread` over kazoo's `*_async` API because the operations are multi-step
(read-modify-multi-reread with retry on connection loss) and read as straight-line code in
the blocking style; kazoo's async results are not asyncio futures anyway.

Ordering contract for the caller: feed an operation's returned events to the core before
taking the next event from the sink (apply effects in order, DESIGN rule 2). Controller-only
watches are armed by the reads that build the election snapshot, so any change after the
snapshot arrives through the sink after the `ControllerElection`.

Bounds: connecting (`connect_timeout_s`) raises `ZkUnavailable`; each operation retries on
connection loss until `op_timeout_s`, then raises `ZkUnavailable`; the sinks block the callback
thread at most `put_timeout_s` when full, then drop the event, log an error and count it in
`ZkAdapter.dropped_events`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import Callback

from broker.config import topic_replication_config
from core import effects as fx
from core.config import TopicConfig
from core.events import (
    BrokerRegistered,
    BrokersChanged,
    ControllerChanged,
    ControllerElection,
    Event,
    IsrChanged,
    PartitionSnapshot,
    PartitionStateWritten,
    SessionExpired,
    TopicsChanged,
    TopicsDeleted,
)
from core.types import NO_LEADER, LeaderIsr, LiveBroker, TopicPartition

log = logging.getLogger(__name__)

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ISR_CHANGES = "/isr_change_notification"
ISR_CHANGE_PREFIX = ISR_CHANGES + "/isr_change_"
DELETE_TOPICS = "/admin/delete_topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CLUSTER_ID = "/cluster/id"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
PERSISTENT_PATHS = (
    BROKER_IDS,
    BROKER_TOPICS,
    BROKER_SEQID,
    ISR_CHANGES,
    DELETE_TOPICS,
    CONFIG_TOPICS,
    CONFIG_CHANGES,
)

_RETRYABLE = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)

T = TypeVar("T")
Sink = Callable[[Event], None]


# ----------------------------------------------------------------------------------------
# errors


class ZkError(RuntimeError):
    """Base class of the adapter's errors."""


class ZkUnavailable(ZkError):
    """ZooKeeper could not be reached (or an operation could not complete) within the bound."""


class BrokerIdInUse(ZkError):
    """`/brokers/ids/<id>` is held by another live session (another broker with our id)."""

    def __init__(self, broker_id: int, owner_session: int, our_session: int | None) -> None:
        self.broker_id = broker_id
        self.owner_session = owner_session
        super().__init__(
            f"broker.id {broker_id} is already registered in ZooKeeper by another live session "
            f"(owner session 0x{owner_session:x}, ours "
            f"{'none' if our_session is None else f'0x{our_session:x}'}); "
            "another broker is running with the same broker.id"
        )


class ZkEventOverflow(ZkError):
    """The event sink stayed full for longer than its bound."""


# ----------------------------------------------------------------------------------------
# sinks: thread-safe, bounded hand-off of watch events to the broker's loop


class QueueSink:
    """Hands events to a thread through a bounded `queue.Queue` (backpressure, then error)."""

    def __init__(self, maxsize: int = 1024, put_timeout_s: float = 30.0) -> None:
        self.queue: queue.Queue[Event] = queue.Queue(maxsize)
        self.put_timeout_s = put_timeout_s

    def __call__(self, event: Event) -> None:
        try:
            self.queue.put(event, timeout=self.put_timeout_s)
        except queue.Full:
            raise ZkEventOverflow(f"event queue full for {self.put_timeout_s}s") from None

    def get(self, timeout: float | None = None) -> Event:
        return self.queue.get(timeout=timeout)


class AsyncioSink:
    """Hands events to an asyncio loop: `loop.call_soon_threadsafe` onto an `asyncio.Queue`,
    bounded by a semaphore the producing (kazoo) thread waits on, at most `put_timeout_s`.

    Consume with `await sink.get()` on the loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        maxsize: int = 1024,
        put_timeout_s: float = 30.0,
    ) -> None:
        self.loop = loop
        self.put_timeout_s = put_timeout_s
        self._slots = threading.BoundedSemaphore(maxsize)
        self._queue: asyncio.Queue[Event] = asyncio.Queue()  # bounded by _slots

    def __call__(self, event: Event) -> None:
        if not self._slots.acquire(timeout=self.put_timeout_s):
            raise ZkEventOverflow(f"event queue full for {self.put_timeout_s}s")
        try:
            self.loop.call_soon_threadsafe(self._queue.put_nowait, event)
        except RuntimeError:  # loop closed
            self._slots.release()
            raise

    async def get(self) -> Event:
        event = await self._queue.get()
        self._slots.release()
        return event

    def get_nowait(self) -> Event:
        event = self._queue.get_nowait()
        self._slots.release()
        return event

    def qsize(self) -> int:
        return self._queue.qsize()


# ----------------------------------------------------------------------------------------
# data formats (Kafka's JSON)


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def broker_registration_json(
    host: str, port: int, rack: str | None = None, listener: str = "PLAINTEXT"
) -> bytes:
    d: dict[str, object] = {
        "listener_security_protocol_map": {listener: "PLAINTEXT"},
        "endpoints": [f"{listener}://{host}:{port}"],
        "jmx_port": -1,
        "features": {},
        "host": host,
        "timestamp": _now_ms(),
        "port": port,
        "version": 5,
    }
    if rack is not None:
        d["rack"] = rack
    return _dumps(d)


def controller_json(broker_id: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()})


def parse_controller(data: bytes) -> int:
    try:
        return int(json.loads(data)["brokerid"])
    except (ValueError, KeyError, TypeError):
        return int(data)  # very old format: a bare integer


def partition_state_json(s: LeaderIsr) -> bytes:
    return _dumps(
        {
            "controller_epoch": s.controller_epoch,
            "leader": s.leader,
            "version": 1,
            "leader_epoch": s.leader_epoch,
            "isr": list(s.isr),
        }
    )


def parse_partition_state(data: bytes, zk_version: int) -> LeaderIsr:
    d = json.loads(data)
    return LeaderIsr(
        leader=int(d["leader"]),
        leader_epoch=int(d["leader_epoch"]),
        isr=tuple(int(b) for b in d["isr"]),
        controller_epoch=int(d["controller_epoch"]),
        zk_version=zk_version,
    )


def topic_json(assignment: Mapping[int, Sequence[int]]) -> bytes:
    return _dumps(
        {
            "version": 2,
            "partitions": {str(p): list(r) for p, r in sorted(assignment.items())},
            "adding_replicas": {},
            "removing_replicas": {},
        }
    )


def parse_topic(data: bytes) -> dict[int, tuple[int, ...]]:
    d = json.loads(data)
    return {int(p): tuple(int(b) for b in r) for p, r in d["partitions"].items()}


def isr_change_json(tps: Iterable[TopicPartition]) -> bytes:
    return _dumps(
        {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in sorted(tps)]}
    )


def parse_isr_change(data: bytes) -> list[TopicPartition]:
    d = json.loads(data)
    return [TopicPartition(str(x["topic"]), int(x["partition"])) for x in d["partitions"]]


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{BROKER_TOPICS}/{tp.topic}/partitions/{tp.partition}/state"


# ----------------------------------------------------------------------------------------
# bounded calls


class _BoundedClient:
    """kazoo's blocking calls wait forever while disconnected (requests queue until the
    connection is back); this proxy issues the `*_async` form and waits at most until the
    current operation's deadline, then raises `OperationTimeoutError` (retryable, so the
    operation ends in `ZkUnavailable`). A request that timed out may still be applied later,
    when the connection is back: its outcome is unknown, as with any timed-out request."""

    def __init__(self, zk: Any, deadline: Callable[[], float]) -> None:
        self._zk = zk
        self._deadline = deadline

    def _wait(self, res: Any) -> Any:
        left = self._deadline() - time.monotonic()
        try:
            return res.get(timeout=max(left, 0.001))
        except KazooTimeoutError:
            raise OperationTimeoutError("no answer from ZooKeeper before the deadline") from None

    def create(self, *args: Any, **kw: Any) -> Any:
        return self._wait(self._zk.create_async(*args, **kw))

    def ensure_path(self, path: str) -> Any:
        return self._wait(self._zk.ensure_path_async(path))

    def get(self, path: str, watch: Any = None) -> Any:
        return self._wait(self._zk.get_async(path, watch=watch))

    def exists(self, path: str, watch: Any = None) -> Any:
        return self._wait(self._zk.exists_async(path, watch=watch))

    def get_children(self, path: str, watch: Any = None) -> Any:
        return self._wait(self._zk.get_children_async(path, watch=watch))

    def delete(self, path: str, version: int = -1) -> Any:
        return self._wait(self._zk.delete_async(path, version=version))

    def set(self, path: str, value: bytes, version: int = -1) -> Any:
        return self._wait(self._zk.set_async(path, value, version=version))

    def transaction(self) -> Any:
        return self._zk.transaction()

    def commit(self, tx: Any) -> Any:
        return self._wait(tx.commit_async())


# ----------------------------------------------------------------------------------------
# the adapter


class ZkAdapter:
    """One broker's ZooKeeper session. See the module docstring."""

    def __init__(
        self,
        hosts: str,
        broker_id: int,
        *,
        sink: Sink | None = None,
        host: str = "127.0.0.1",
        port: int = 9092,
        rack: str | None = None,
        session_timeout_s: float = 6.0,
        connect_timeout_s: float = 5.0,
        op_timeout_s: float = 10.0,
    ) -> None:
        self.hosts = hosts
        self.broker_id = broker_id
        self.sink: Sink = sink if sink is not None else QueueSink()
        self.host = host
        self.port = port
        self.rack = rack
        self.session_timeout_s = session_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.op_timeout_s = op_timeout_s
        self.dropped_events = 0
        self._zk: Any = None
        self._closing = False
        self._lock = threading.RLock()  # guards the controller-role fields below
        self._controller_gen = 0  # bumped whenever the controller role starts or ends
        self._is_controller = False
        self._known_topics: set[str] = set()
        self._last_live: tuple[LiveBroker, ...] | None = None
        self._last_controller: int | None = None
        self._watches_dropped = False
        self._tls = threading.local()

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> ZkAdapter:
        """Connect (bounded), create Kafka's persistent paths, watch `/controller`."""
        kz = KazooClient(
            hosts=self.hosts,
            timeout=self.session_timeout_s,
            connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0},
        )
        kz.add_listener(self._on_state)
        self._closing = False
        try:
            kz.start(timeout=self.connect_timeout_s)
        except KazooTimeoutError:
            raise ZkUnavailable(
                f"ZooKeeper at {self.hosts} not reachable within {self.connect_timeout_s}s"
            ) from None
        self._zk = kz
        zk = self._client()
        try:
            self._retry(lambda _r: [zk.ensure_path(p) for p in PERSISTENT_PATHS])
            # Arm the /controller watch without reporting: registering reports the current
            # controller (ControllerChanged after BrokerRegistered, as spec.model does); a
            # value reported now would reach the core late and stale.
            self._retry(lambda _r: self._controller_changed(emit_if_same=False, emit=False))
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """End the session (ephemeral nodes go at once); bounded by kazoo's close wait."""
        zk, self._zk = self._zk, None
        self._closing = True
        self._drop_controller_role()
        if zk is not None:
            try:
                zk.stop()
            finally:
                zk.close()

    def __enter__(self) -> ZkAdapter:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def client(self) -> Any:
        """The underlying `KazooClient` (tests, diagnostics)."""
        return self._raw()

    @property
    def session_id(self) -> int | None:
        cid = self._raw().client_id
        return None if cid is None else int(cid[0])

    @property
    def is_controller(self) -> bool:
        return self._is_controller

    def _raw(self) -> Any:
        if self._zk is None:
            raise ZkError("adapter not started (or closed)")
        return self._zk

    def _client(self) -> _BoundedClient:
        return _BoundedClient(self._raw(), self._deadline)

    def _deadline(self) -> float:
        """The current operation's deadline (set by `_retry`; watch work on the callback
        thread gets `op_timeout_s` per call)."""
        d: float | None = getattr(self._tls, "deadline", None)
        return d if d is not None else time.monotonic() + self.op_timeout_s

    # -- effect interpreter entry points ------------------------------------------------

    def execute(self, effect: object) -> tuple[Event, ...]:
        """Carry out one ZooKeeper effect; return its completion events in order."""
        match effect:
            case fx.ZkRegisterBroker(broker_id=b):
                self._check_id(b)
                registered = self.register_broker()
                # As in spec.model._zk_register: the broker hears who the controller is now
                # (NO_LEADER makes it run for controller).
                return (registered, ControllerChanged(self.read_controller()))
            case fx.ZkElectController(broker_id=b):
                self._check_id(b)
                return (self.elect_controller(),)
            case fx.ZkResignController(broker_id=b):
                self._check_id(b)
                self.resign_controller()
                return ()
            case fx.ZkWritePartitionState():
                return (
                    self.write_partition_state(
                        effect.tp,
                        effect.proposed,
                        effect.expected_zk_version,
                        effect.controller_epoch_zk_version,
                        effect.by_controller,
                    ),
                )
            case fx.ZkNotifyIsrChange(tp=tp):
                self.notify_isr_change((tp,))
                return ()
            case fx.ZkDeleteTopic(topic=topic):
                self.delete_topic_znodes(topic)
                return ()
        raise TypeError(f"not a ZooKeeper effect: {effect!r}")

    async def aexecute(self, effect: object) -> tuple[Event, ...]:
        """`execute` on a worker thread (`asyncio.to_thread`)."""
        return await asyncio.to_thread(self.execute, effect)

    def _check_id(self, b: int) -> None:
        if b != self.broker_id:
            raise ValueError(f"effect for broker {b} given to the adapter of {self.broker_id}")

    # -- operations ----------------------------------------------------------------------

    def register_broker(self) -> BrokerRegistered:
        """Create ephemeral `/brokers/ids/<id>`; its czxid is the broker epoch. If the node
        exists and our session owns it (a retry after connection loss, or registering
        twice), that is ours; another session's node raises `BrokerIdInUse`."""
        path = f"{BROKER_IDS}/{self.broker_id}"
        data = broker_registration_json(self.host, self.port, self.rack)

        def attempt(_retried: bool) -> int:
            zk = self._client()
            try:
                _, stat = zk.create(path, data, ephemeral=True, makepath=True, include_data=True)
                return int(stat.czxid)
            except NodeExistsError:
                try:
                    _, stat = zk.get(path)
                except NoNodeError:
                    raise ConnectionLoss("registration vanished; retry") from None
                if int(stat.ephemeralOwner) == self.session_id:
                    return int(stat.czxid)
                raise BrokerIdInUse(self.broker_id, int(stat.ephemeralOwner),
                                    self.session_id) from None

        return BrokerRegistered(self._retry(attempt))

    def read_controller(self) -> int:
        def attempt(_retried: bool) -> int:
            try:
                data, _ = self._client().get(CONTROLLER)
            except NoNodeError:
                return NO_LEADER
            return parse_controller(data)

        return self._retry(attempt)

    def read_controller_epoch(self) -> tuple[int, int]:
        """(epoch, znode version) of `/controller_epoch`, creating it as 0 if missing."""

        def attempt(_retried: bool) -> tuple[int, int]:
            zk = self._client()
            try:
                data, stat = zk.get(CONTROLLER_EPOCH)
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    zk.create(CONTROLLER_EPOCH, b"0")
                data, stat = zk.get(CONTROLLER_EPOCH)
            return int(data), int(stat.version)

        return self._retry(attempt)

    def elect_controller(self) -> ControllerElection:
        """Kafka's `registerControllerAndIncrementControllerEpoch`: read `/controller_epoch`
        (epoch e, version v), then one multi: create ephemeral `/controller` and set
        `/controller_epoch` to e+1 at version v. Only a registered broker (its
        `/brokers/ids/<id>` owned by this session) runs, as in the model. The winner gets the
        live brokers and every partition's assignment and state, and its controller watches
        are armed by those very reads."""
        return self._retry(self._elect_once)

    def _lost(self) -> ControllerElection:
        epoch, version = self.read_controller_epoch()
        return ControllerElection(False, self.read_controller(), epoch, version, (), ())

    def _elect_once(self, retried: bool) -> ControllerElection:
        zk = self._client()
        me = self.broker_id
        try:
            data, _ = zk.get(CONTROLLER)
            current = parse_controller(data)
        except NoNodeError:
            current = NO_LEADER
        if current == me and not retried:
            # We hold /controller but the core asks to run again: it dropped its controller
            # role (e.g. on a stale ControllerChanged). Release it and hold a new election,
            # which bumps the epoch and so fences anything the dropped role still has in
            # flight; never leave a /controller whose broker is not acting as controller.
            cstat = zk.exists(CONTROLLER)
            if cstat is not None and int(cstat.ephemeralOwner) == self.session_id:
                with contextlib.suppress(NoNodeError, BadVersionError):
                    zk.delete(CONTROLLER, version=cstat.version)
                current = NO_LEADER
        if current != NO_LEADER and not (retried and current == me):
            return self._lost()
        epoch, version = self.read_controller_epoch()
        reg = zk.exists(f"{BROKER_IDS}/{me}")
        if reg is None or int(reg.ephemeralOwner) != self.session_id:
            return self._lost()
        if current == me:  # our earlier attempt committed before the connection dropped
            cstat = zk.exists(CONTROLLER)
            if cstat is None or int(cstat.ephemeralOwner) != self.session_id:
                return self._lost()
            return self._become_controller(epoch, version)
        tx = zk.transaction()
        tx.create(CONTROLLER, controller_json(me), ephemeral=True)
        tx.set_data(CONTROLLER_EPOCH, str(epoch + 1).encode(), version=version)
        results = zk.commit(tx)
        if any(isinstance(r, Exception) for r in results):
            return self._lost()
        return self._become_controller(epoch + 1, int(results[1].version))

    def _become_controller(self, epoch: int, epoch_zk_version: int) -> ControllerElection:
        with self._lock:
            self._controller_gen += 1
            gen = self._controller_gen
            self._is_controller = True
            self._known_topics = set()
            self._last_live = None
        live = self._read_live_brokers(gen)
        notes = self._list_isr_changes(gen)  # listed before the states are read
        topics = self._list_topics(gen)
        self._known_topics = set(topics)
        partitions = self.partition_snapshots(topics, live)
        self._delete_isr_changes(notes)  # covered by the snapshot
        self._last_live = live
        # Deletions pending from before the election reach the core after the election
        # event (through the sink), and later ones through the watch armed here.
        self._deletions_changed(gen)
        return ControllerElection(True, self.broker_id, epoch, epoch_zk_version, live,
                                  partitions)

    def resign_controller(self) -> None:
        """Delete `/controller` if this broker (this session) still holds it."""
        self._drop_controller_role()

        def attempt(_retried: bool) -> None:
            zk = self._client()
            try:
                data, stat = zk.get(CONTROLLER)
            except NoNodeError:
                return
            if parse_controller(data) != self.broker_id:
                return
            if int(stat.ephemeralOwner) != self.session_id:
                return
            with contextlib.suppress(NoNodeError, BadVersionError):
                zk.delete(CONTROLLER, version=stat.version)

        self._retry(attempt)

    def write_partition_state(
        self,
        tp: TopicPartition,
        proposed: LeaderIsr,
        expected_zk_version: int,
        controller_epoch_zk_version: int | None,
        by_controller: bool,
    ) -> PartitionStateWritten:
        """Conditional write of the partition's state znode, as one transaction: first
        `check /controller_epoch` at `controller_epoch_zk_version` (when given, KAFKA-6082),
        then `set_data` at `expected_zk_version` (or `create` when it is -1). Failure:
        `fenced` if the epoch check failed, `current` is what ZooKeeper holds now."""
        path = partition_state_path(tp)
        data = partition_state_json(proposed)

        def result(ok: bool, fenced: bool, current: LeaderIsr | None) -> PartitionStateWritten:
            return PartitionStateWritten(tp, proposed, by_controller, ok, fenced, current)

        def attempt(retried: bool) -> PartitionStateWritten:
            zk = self._client()
            if expected_zk_version == -1:
                zk.ensure_path(path.rsplit("/", 1)[0])
            tx = zk.transaction()
            if controller_epoch_zk_version is not None:
                tx.check(CONTROLLER_EPOCH, controller_epoch_zk_version)
            if expected_zk_version == -1:
                tx.create(path, data)
            else:
                tx.set_data(path, data, version=expected_zk_version)
            results = zk.commit(tx)
            if not any(isinstance(r, Exception) for r in results):
                return result(True, False, None)
            fenced = controller_epoch_zk_version is not None and _failed(results[0])
            current = self.read_partition_state(tp)
            if retried and not fenced and current is not None and _same(current, proposed) and (
                current.zk_version == expected_zk_version + 1
            ):
                # Our own write, committed before the connection dropped (Kafka compares
                # the data the same way on a BadVersion after a retry).
                return result(True, False, None)
            return result(False, fenced, current)

        return self._retry(attempt)

    def read_partition_state(self, tp: TopicPartition) -> LeaderIsr | None:
        return self._read_partition_state(tp)[0]

    def _read_partition_state(self, tp: TopicPartition) -> tuple[LeaderIsr | None, int]:
        """The state and the zxid of its last write (mzxid; -1 when there is no state)."""
        try:
            data, stat = self._client().get(partition_state_path(tp))
        except NoNodeError:
            return None, -1
        return parse_partition_state(data, int(stat.version)), int(stat.mzxid)

    def notify_isr_change(self, tps: Iterable[TopicPartition]) -> str:
        """Create a sequential `/isr_change_notification/isr_change_` node (what a leader does
        after it changed a partition's ISR); returns its path."""
        data = isr_change_json(tps)
        return self._retry(
            lambda _r: str(self._client().create(ISR_CHANGE_PREFIX, data, sequence=True,
                                                 makepath=True))
        )

    def create_topic(
        self, topic: str, assignment: Mapping[int, Sequence[int]],
        config: Mapping[str, str] | None = None,
    ) -> None:
        """Create the topic's config and assignment znodes (what `kafka-topics --create`
        does in ZooKeeper mode); the controller sees it through its `/brokers/topics` watch.
        Raises `kazoo.exceptions.NodeExistsError` if the topic exists."""
        cfg = _dumps({"version": 1, "config": dict(config or {})})

        def attempt(_retried: bool) -> None:
            zk = self._client()
            with contextlib.suppress(NodeExistsError):
                zk.create(f"{CONFIG_TOPICS}/{topic}", cfg, makepath=True)
            zk.create(topic_path(topic), topic_json(assignment), makepath=True)

        self._retry(attempt)

    def broker_endpoint(self, broker_id: int) -> tuple[str, int, str | None] | None:
        """(host, port, rack) from `/brokers/ids/<id>`, or None when not registered."""
        try:
            data, _ = self._retry(lambda _r: self._client().get(f"{BROKER_IDS}/{broker_id}"))
        except NoNodeError:
            return None
        d = json.loads(data)
        rack = d.get("rack")
        return str(d["host"]), int(d["port"]), None if rack is None else str(rack)

    def topic_config(self, topic: str) -> dict[str, str]:
        """Per-topic config overrides from `/config/topics/<t>` (empty when none)."""
        try:
            data, _ = self._retry(lambda _r: self._client().get(f"{CONFIG_TOPICS}/{topic}"))
        except NoNodeError:
            return {}
        cfg = json.loads(data).get("config", {})
        return {str(k): str(v) for k, v in cfg.items()}

    def list_topics(self) -> list[str]:
        return sorted(self._retry(lambda _r: self._client().get_children(BROKER_TOPICS)))

    def cluster_id(self) -> str:
        """`/cluster/id` (Kafka's `{"version":"1","id":...}`), created on first use."""
        import base64
        import uuid

        def attempt(_retried: bool) -> str:
            zk = self._client()
            try:
                data, _ = zk.get(CLUSTER_ID)
            except NoNodeError:
                new = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
                with contextlib.suppress(NodeExistsError):
                    zk.create(CLUSTER_ID, _dumps({"version": "1", "id": new}), makepath=True)
                data, _ = zk.get(CLUSTER_ID)
            return str(json.loads(data)["id"])

        return self._retry(attempt)

    def allocate_producer_ids(self, block_size: int = 1000) -> tuple[int, int]:
        """Claim the next block of producer ids, [start, end], with a conditional update of
        `/latest_producer_id_block` (Kafka's ProducerIdManager in ZooKeeper mode)."""

        def attempt(_retried: bool) -> tuple[int, int]:
            zk = self._client()
            try:
                data, stat = zk.get(PRODUCER_ID_BLOCK)
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    zk.create(PRODUCER_ID_BLOCK, b"", makepath=True)
                raise ConnectionLoss("created the producer id block node; retry") from None
            start = 0
            if data:
                start = int(json.loads(data)["block_end"]) + 1
            end = start + block_size - 1
            block = _dumps({"version": 1, "broker": self.broker_id,
                            "block_start": str(start), "block_end": str(end)})
            try:
                zk.set(PRODUCER_ID_BLOCK, block, version=stat.version)
            except BadVersionError:
                raise ConnectionLoss("producer id block taken concurrently; retry") from None
            return start, end

        return self._retry(attempt)

    def mark_topic_for_deletion(self, topic: str) -> None:
        """`/admin/delete_topics/<t>` (what `kafka-topics --delete` writes)."""
        self._retry(lambda _r: self._client().create(f"{DELETE_TOPICS}/{topic}", b"",
                                                     makepath=True))

    def topic_assignment(self, topic: str) -> dict[int, tuple[int, ...]] | None:
        try:
            data, _ = self._client().get(topic_path(topic))
        except NoNodeError:
            return None
        return parse_topic(data)

    def topic_replication_config(self, topic: str) -> TopicConfig:
        """The replication settings of `/config/topics/<t>` (`min.insync.replicas`,
        `unclean.leader.election.enable`); an invalid value (written by another tool) is
        logged and left to the broker default, as Kafka's LogConfig validation would."""
        overrides = self.topic_config(topic)
        try:
            return topic_replication_config(overrides)
        except ValueError as e:
            log.error("broker %d: topic %s has an invalid config (%s): broker defaults apply",
                      self.broker_id, topic, e)
            return TopicConfig()

    def partition_snapshots(self, topics: Iterable[str], live: Iterable[LiveBroker] = ()
                            ) -> tuple[PartitionSnapshot, ...]:
        """Assignment, state and topic config of every partition of `topics`, sorted; with
        the `live` brokers (as read) registered since each state's last write: their czxid,
        the broker epoch, is above the state's mzxid."""
        live = tuple(live)
        out: list[PartitionSnapshot] = []
        for t in sorted(set(topics)):
            assignment = self.topic_assignment(t)
            if assignment is None:
                continue
            config = self.topic_replication_config(t)
            for p, replicas in sorted(assignment.items()):
                tp = TopicPartition(t, p)
                state, mzxid = self._read_partition_state(tp)
                since = () if state is None else tuple(
                    sorted(b.broker_id for b in live if b.broker_epoch > mzxid))
                out.append(PartitionSnapshot(tp, replicas, state, config, since))
        return tuple(out)

    def live_brokers(self) -> tuple[LiveBroker, ...]:
        return self._read_live_brokers(None)

    # -- watches -------------------------------------------------------------------------

    def _emit(self, event: Event) -> None:
        try:
            self.sink(event)
        except Exception:
            self.dropped_events += 1
            log.error("broker %d: ZooKeeper event dropped: %r", self.broker_id, event,
                      exc_info=True)

    def _guard(self, fn: Callable[[], None]) -> None:
        """Run watch work on the callback thread; connection trouble is repaired by the
        re-arm after reconnection, so it is only logged."""
        try:
            fn()
        except (ConnectionLoss, SessionExpiredError, ConnectionClosedError,
                OperationTimeoutError) as e:
            self._watches_dropped = True
            log.info("broker %d: watch work interrupted: %r", self.broker_id, e)
        except ZkError as e:
            log.info("broker %d: watch work skipped: %s", self.broker_id, e)
        except Exception:
            log.exception("broker %d: watch handler failed", self.broker_id)

    def _controller_watcher(self, event: Any) -> None:
        if event.type == "NONE" or self._closing:
            return  # the connection dropped; re-armed on reconnection
        self._guard(lambda: self._controller_changed(emit_if_same=True))

    def _controller_changed(self, emit_if_same: bool, emit: bool = True) -> None:
        zk = self._client()
        stat = zk.exists(CONTROLLER, watch=self._controller_watcher)
        cid = NO_LEADER
        if stat is not None:
            try:
                data, _ = zk.get(CONTROLLER)
                cid = parse_controller(data)
            except NoNodeError:
                cid = NO_LEADER  # the exists watch fires on the deletion too
        if cid != self.broker_id and self._is_controller:
            self._drop_controller_role()
        if emit and (emit_if_same or cid != self._last_controller):
            self._emit(ControllerChanged(cid))
        self._last_controller = cid

    def _drop_controller_role(self) -> None:
        with self._lock:
            if self._is_controller:
                self._controller_gen += 1
            self._is_controller = False

    def _current(self, gen: int | None) -> bool:
        return gen is None or (self._is_controller and gen == self._controller_gen)

    def _children_watcher(self, gen: int, handler: Callable[[int], None]) -> Callable[[Any], None]:
        def watcher(event: Any) -> None:
            if event.type == "NONE" or self._closing or not self._current(gen):
                return
            self._guard(lambda: handler(gen))

        return watcher

    def _read_live_brokers(self, gen: int | None) -> tuple[LiveBroker, ...]:
        zk = self._client()
        watch = None if gen is None else self._children_watcher(gen, self._brokers_changed)
        ids = zk.get_children(BROKER_IDS, watch=watch)
        live: list[LiveBroker] = []
        for child in ids:
            try:
                b = int(child)
            except ValueError:
                continue
            stat = zk.exists(f"{BROKER_IDS}/{child}")
            if stat is not None:
                live.append(LiveBroker(b, int(stat.czxid)))
        return tuple(sorted(live))

    def _brokers_changed(self, gen: int) -> None:
        live = self._read_live_brokers(gen)
        if self._current(gen) and live != self._last_live:
            self._last_live = live
            self._emit(BrokersChanged(live))

    def _list_topics(self, gen: int) -> list[str]:
        watch = self._children_watcher(gen, self._topics_changed)
        return sorted(self._client().get_children(BROKER_TOPICS, watch=watch))

    def _topics_changed(self, gen: int) -> None:
        topics = self._list_topics(gen)
        new = [t for t in topics if t not in self._known_topics]
        self._known_topics = set(topics)
        if not new or not self._current(gen):
            return
        snaps = self.partition_snapshots(new)
        if snaps:
            self._emit(TopicsChanged(snaps))

    def _deletions_changed(self, gen: int) -> None:
        watch = self._children_watcher(gen, self._deletions_changed)
        marked = sorted(self._client().get_children(DELETE_TOPICS, watch=watch))
        if marked and self._current(gen):
            self._emit(TopicsDeleted(tuple(marked)))

    def delete_topic_znodes(self, topic: str) -> None:
        """What the controller removes once a topic is deleted (ZooKeeper mode): the
        assignment with its partition states, the config, and the deletion marker."""

        def attempt(_retried: bool) -> None:
            zk = self._raw()
            for path in (topic_path(topic), f"{CONFIG_TOPICS}/{topic}",
                         f"{DELETE_TOPICS}/{topic}"):
                with contextlib.suppress(NoNodeError):
                    zk.delete(path, recursive=True)

        self._retry(attempt)

    def _list_isr_changes(self, gen: int) -> list[str]:
        watch = self._children_watcher(gen, self._isr_changed)
        children = self._client().get_children(ISR_CHANGES, watch=watch)
        return sorted(c for c in children if c.startswith("isr_change_"))

    def _delete_isr_changes(self, notes: Iterable[str]) -> None:
        zk = self._client()
        for n in notes:
            with contextlib.suppress(NoNodeError):
                zk.delete(f"{ISR_CHANGES}/{n}")

    def _isr_changed(self, gen: int) -> None:
        """Kafka's `IsrChangeNotification` handling: read every notification, snapshot the
        partitions they name, delete them."""
        notes = self._list_isr_changes(gen)
        if not notes:
            return
        zk = self._client()
        tps: set[TopicPartition] = set()
        for n in notes:
            try:
                data, _ = zk.get(f"{ISR_CHANGES}/{n}")
            except NoNodeError:
                continue
            try:
                tps.update(parse_isr_change(data))
            except (ValueError, KeyError, TypeError):
                log.warning("broker %d: malformed ISR notification %s", self.broker_id, n)
        snaps: list[PartitionSnapshot] = []
        assignments: dict[str, dict[int, tuple[int, ...]] | None] = {}
        for tp in sorted(tps):
            if tp.topic not in assignments:
                assignments[tp.topic] = self.topic_assignment(tp.topic)
            a = assignments[tp.topic]
            if a is None or tp.partition not in a:
                continue
            snaps.append(PartitionSnapshot(tp, a[tp.partition], self.read_partition_state(tp)))
        if self._current(gen):
            self._delete_isr_changes(notes)
            if snaps:
                self._emit(IsrChanged(tuple(snaps)))

    # -- session -------------------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        """kazoo state listener (connection thread: must not block). The work goes to the
        callback thread, serialized with the watch handlers."""
        if self._closing:
            return
        zk = self._zk
        handler = zk.handler if zk is not None else None
        if state == KazooState.LOST:
            self._watches_dropped = True
            if handler is not None:
                handler.dispatch_callback(Callback("session", self._on_session_lost, ()))
        elif state == KazooState.SUSPENDED:
            self._watches_dropped = True
        elif state == KazooState.CONNECTED and self._watches_dropped and handler is not None:
            handler.dispatch_callback(Callback("session", self._on_reconnected, ()))

    def _on_session_lost(self) -> None:
        if self._closing:
            return
        self._drop_controller_role()
        self._last_controller = None
        log.warning("broker %d: ZooKeeper session expired", self.broker_id)
        self._emit(SessionExpired())

    def _on_reconnected(self) -> None:
        """Same session after a disconnection, or a new one after expiry: kazoo forgot every
        watch, so re-arm them and report what changed meanwhile."""
        if self._closing or not self._watches_dropped:
            return
        self._watches_dropped = False

        def rearm() -> None:
            self._controller_changed(emit_if_same=False)
            gen = self._controller_gen
            if self._is_controller:
                self._brokers_changed(gen)
                self._topics_changed(gen)
                self._deletions_changed(gen)
                self._isr_changed(gen)

        self._guard(rearm)

    # -- retries -------------------------------------------------------------------------

    def _retry(self, fn: Callable[[bool], T]) -> T:
        """Run `fn(retried)`, retrying on connection loss (and on an expired session, which
        kazoo replaces with a new one) until `op_timeout_s`."""
        deadline = time.monotonic() + self.op_timeout_s
        outer: float | None = getattr(self._tls, "deadline", None)
        if outer is not None:  # nested: the outer operation's bound holds
            deadline = min(deadline, outer)
        self._tls.deadline = deadline
        try:
            return self._retry_until(fn, deadline)
        finally:
            self._tls.deadline = outer

    def _retry_until(self, fn: Callable[[bool], T], deadline: float) -> T:
        delay = 0.05
        retried = False
        while True:
            try:
                return fn(retried)
            except _RETRYABLE as e:
                if self._zk is None:
                    raise ZkError("adapter closed") from e
                if time.monotonic() + delay > deadline:
                    raise ZkUnavailable(
                        f"ZooKeeper at {self.hosts}: operation did not complete within "
                        f"{self.op_timeout_s}s ({type(e).__name__})"
                    ) from e
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
                retried = True
            except ConnectionClosedError as e:
                raise ZkError("adapter closed") from e


def _failed(r: object) -> bool:
    return isinstance(r, Exception) and not isinstance(r, RolledBackError)


def _same(a: LeaderIsr, b: LeaderIsr) -> bool:
    return (a.leader, a.leader_epoch, a.isr, a.controller_epoch) == (
        b.leader, b.leader_epoch, b.isr, b.controller_epoch)


__all__ = [
    "AsyncioSink",
    "BrokerIdInUse",
    "KazooException",
    "QueueSink",
    "Sink",
    "ZkAdapter",
    "ZkError",
    "ZkEventOverflow",
    "ZkUnavailable",
]
