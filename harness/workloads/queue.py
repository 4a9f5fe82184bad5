"""Jepsen's queue workload (`jepsen.tests.kafka` + the jepsen-io/redpanda client) on real
Kafka clients.

**Data model.** Integer keys, each one topic-partition: key k is partition `k % partitions`
of topic `t<k // partitions>` (RQ: 2 partitions per topic, RF 3). Topics are created through
the admin API: the initial keys' topics at setup, later ones by the first client sending to
them (RQ `create-topic!`), with `replication_factor`, `partitions` and `topic_configs`.

**Operations** (history values as `harness.history` documents them):
`send [["send", k, v], ...]`, `poll [["poll"], ...]`, `txn` (a mixed batch), `assign [k...]`,
`subscribe [k...]`, `crash`, and in the final phase `debug-topic-partitions [k...]` and
`end-offsets [k...]` (-> `[[k, low, high, leader_epoch], ...]`).

**Generator** (`QueueGen`; K `workload` l.2538, Elle `wr-txns`):
- `key_count` active keys (10), picked with Elle's exponential distribution over the slots
  of the active-key vector (`key_dist_base` 2: slot i+1 is twice as likely as slot i, as
  `elle.txn/rand-key-i` computes it) or uniformly; micro-ops are reads or writes 50/50;
  batches have `min_txn_length`..`max_txn_length` micro-ops (1..1 without transactions, as
  Jepsen; larger values give mixed non-transactional batches, whose polls come before their
  sends so a batch never reads its own sends — the checker's `precommitted_read` presumes a
  transaction);
- values are per-key counters 1, 2, 3, ... so no value is ever sent twice to a key; slot i's
  key is retired once it has had its quota of `1 + zipf(max_writes_per_key)` writes and is
  replaced by `max(active) + 1` (key rotation);
- writes become `["send", k, v]`, reads `["poll"]`; `f` is `send`, `poll` or `txn`;
- with probability `sub_p` (1/64) an `assign`/`subscribe` (random among `sub_via`) of the keys
  the pending op touches is inserted before it; a third of those also take the keys with
  sent-but-unpolled offsets (`poll-unseen`);
- `crash_clients`: a `crash` every `crash_client_interval_s / concurrency` seconds on average;
- ops are staggered over the whole test at `rate` per second (Jepsen `stagger`: uniform gaps
  in [0, 2/rate)).

**Workers.** `concurrency` threads; thread t starts as process t and, after an op ends `info`
(or `end_process`), closes its client and continues as process `p + concurrency` with a
fresh client (Jepsen `with-next-process`).

**Final phase** (RCORE `gen/phases`; K `final-polls`): after the main phase, `before_final()`
(the campaign heals every fault there), then `recovery_wait_s` (10 s), then each thread,
within `final_time_limit_s` (200 s), repeats rounds of at most `final_round_s` (10 s):
`crash` (a fresh client) -> `debug-topic-partitions` of every key -> `assign` every key with
`seek_to_beginning` -> `poll` ops with `poll_ms` = `final_poll_ms` (1000), staggered by
`final_poll_interval_s` (0.2 s), until its polls have reached, for every key, the highest
offset any op saw (sends and polls, `ok` ones and the known offsets of `info` ones). Beyond
Jepsen: about every `final_end_offset_interval_s` it also asks the end offsets of the keys
left (`end-offsets [k...]`, ListOffsets at the leaders); a key whose end offset is stable at
one leader epoch, at or below its target, and read up to, is done there, and the completion
says so (`truncated [[k, end], ...]`): the partition lost that offset, and the checker reports
the committed writes at or past the end (`harness.workloads.final_reads`).

`run_queue(bootstrap, opts, recorder, stop, deadline)` runs both phases; `stop` ends the
main phase early (the final phase still runs), `abort` ends everything.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from harness.checkers.policy import QueuePolicy
from harness.clients import ClientSettings, KeyMap, QueueClient, TopicRegistry, open_client
from harness.clients.base import Completion, EndOffset, exception_text, wait_until
from harness.history import END_OFFSETS_F, FAIL, INFO, OK, Op
from harness.workloads.final_reads import TruncationGate
from harness.workloads.recorder import Recorder

log = logging.getLogger(__name__)

SUB_VIA: Final = ("assign", "subscribe")
KEY_DISTS: Final = ("exponential", "uniform")


@dataclass(frozen=True)
class QueueOpts:
    """Options of the queue workload; names follow Jepsen's CLI (`--rate`, `--concurrency`,
    `--sub-via`, `--crash-clients`, `--max-writes-per-key`, ...) with `_` for `-`."""

    client: str = "confluent"
    concurrency: int = 3
    rate: float = 100.0
    # generator
    key_count: int = 10
    key_dist: str = "exponential"
    key_dist_base: float = 2.0
    max_writes_per_key: int = 1024
    min_txn_length: int = 1
    max_txn_length: int = 1
    txn: bool = False
    sub_via: tuple[str, ...] = ("assign",)
    sub_p: float = 1 / 64
    crash_clients: bool = False
    crash_client_interval_s: float = 30.0
    seed: int | None = None
    # topics
    topic_prefix: str = "t"
    partitions: int = 2
    replication_factor: int = 3
    topic_configs: Mapping[str, str] = field(default_factory=dict)
    # producer
    acks: str = "all"
    idempotence: bool = True
    retries: int = 1000
    delivery_timeout_ms: int = 10_000
    request_timeout_ms: int = 3_000
    send_timeout_s: float = 10.0
    # consumer
    poll_ms: int = 100
    isolation_level: str = "read_committed"
    auto_offset_reset: str = "earliest"
    enable_auto_commit: bool = False
    max_poll_records: int = 500
    # final phase
    final_phase: bool = True
    recovery_wait_s: float = 10.0
    final_time_limit_s: float = 200.0
    final_round_s: float = 10.0
    final_poll_ms: int = 1000
    final_poll_interval_s: float = 0.2
    # a key whose partition ends (stably, at its leader's epoch) below its target is done
    # once read to that end (harness.workloads.final_reads); False: wait for the target
    final_end_offsets: bool = True
    final_end_offset_interval_s: float = 1.0
    final_end_confirmations: int = 3
    final_end_stable_s: float = 3.0
    # a worker's op in flight when the phase ends gets this long to finish
    join_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.txn:
            raise ValueError("transactions are not implemented by the hiwater broker; "
                             "use max_txn_length > 1 for mixed non-transactional batches")
        if not self.sub_via or any(s not in SUB_VIA for s in self.sub_via):
            raise ValueError(f"sub_via must be a non-empty subset of {SUB_VIA}")
        if self.key_dist not in KEY_DISTS:
            raise ValueError(f"key_dist must be one of {KEY_DISTS}")
        if self.concurrency < 1 or self.rate <= 0 or self.key_count < 1:
            raise ValueError("concurrency, rate and key_count must be positive")
        if not 1 <= self.min_txn_length <= self.max_txn_length:
            raise ValueError("need 1 <= min_txn_length <= max_txn_length")
        if self.max_writes_per_key < 1:
            raise ValueError("max_writes_per_key must be >= 1")
        if self.key_dist == "exponential" and self.key_dist_base <= 1:
            raise ValueError("key_dist_base must be > 1")
        if self.final_end_confirmations < 2 or self.final_end_offset_interval_s <= 0:
            raise ValueError("final_end_confirmations must be >= 2 and "
                             "final_end_offset_interval_s > 0")

    @property
    def keymap(self) -> KeyMap:
        return KeyMap(self.topic_prefix, self.partitions)

    def client_settings(self, bootstrap: str) -> ClientSettings:
        return ClientSettings(
            bootstrap=bootstrap,
            keymap=self.keymap,
            replication_factor=self.replication_factor,
            topic_configs=dict(self.topic_configs),
            acks=self.acks,
            idempotence=self.idempotence,
            retries=self.retries,
            delivery_timeout_ms=self.delivery_timeout_ms,
            request_timeout_ms=self.request_timeout_ms,
            send_timeout_s=self.send_timeout_s,
            isolation_level=self.isolation_level,
            auto_offset_reset=self.auto_offset_reset,
            enable_auto_commit=self.enable_auto_commit,
            max_poll_records=self.max_poll_records,
            commit_on_poll="subscribe" in self.sub_via,
            poll_ms=self.poll_ms,
        )

    def policy(self, ignore: Sequence[str] = ()) -> QueuePolicy:
        """The checker policy this configuration implies."""
        return QueuePolicy.of(self.sub_via, ww_deps=True, ignore=ignore)


# ---------------------------------------------------------------------------------------
# randomness (jepsen.random / elle.txn)

ZIPF_DEFAULT_SKEW: Final = 1.0001


def zipf(rng: random.Random, n: int, skew: float = ZIPF_DEFAULT_SKEW) -> int:
    """A Zipfian integer in [0, n) (jepsen.random/zipf: rejection sampling)."""
    if n <= 0:
        return 0
    if skew == 1.0:
        raise ValueError("skew 1.0 is a singularity; use 1.0001")
    t = (n ** (1 - skew) - skew) / (1 - skew)
    for _ in range(10_000):
        tp = t * rng.random()
        inv_b = tp if tp <= 1 else (tp * (1 - skew) + skew) ** (1 / (1 - skew))
        x = int(1 + inv_b)
        ratio_top = x ** (-skew)
        ratio_bottom = (1.0 if x <= 1 else inv_b ** (-skew)) / t
        if rng.random() < ratio_top / (t * ratio_bottom):
            return min(x - 1, n - 1)
    return 0  # pragma: no cover - acceptance is ~certain long before


def key_dist_scale(base: float, count: int) -> float:
    return (base ** count - 1) * base / (base - 1)


def rand_key_index(rng: random.Random, dist: str, base: float, scale: float, n: int) -> int:
    """elle.txn/rand-key-i: an index into the active keys."""
    if dist == "uniform":
        return rng.randrange(n)
    i = math.floor(math.log(rng.random() * scale + base) / math.log(base) - 1)
    return min(max(i, 0), n - 1)


# ---------------------------------------------------------------------------------------
# the generator


@dataclass
class OpSpec:
    """An op to invoke: `f`, `value` and the invocation's extra keys."""

    f: str
    value: Any
    extra: dict[str, Any] = field(default_factory=dict)


def op_max_offsets(op: Op) -> dict[int, int]:
    """K `op->max-offsets`: key -> highest offset an ok/info op sent or polled."""
    out: dict[int, int] = {}
    if op.type not in (OK, INFO) or op.f not in ("send", "poll", "txn"):
        return out
    for mop in op.value or ():
        if mop[0] == "send" and len(mop) > 2 and isinstance(mop[2], list | tuple):
            o = mop[2][0]
            if o is not None and o > out.get(mop[1], -1):
                out[mop[1]] = o
        elif mop[0] == "poll" and len(mop) > 1 and isinstance(mop[1], Mapping):
            for k, pairs in mop[1].items():
                for o, _v in pairs:
                    if o is not None and o > out.get(k, -1):
                        out[k] = o
    return out


def _max_sent_polled(op: Op) -> tuple[dict[int, int], dict[int, int]]:
    sent: dict[int, int] = {}
    polled: dict[int, int] = {}
    for mop in op.value or ():
        if mop[0] == "send" and len(mop) > 2 and isinstance(mop[2], list | tuple):
            o = mop[2][0]
            if o is not None:
                sent[mop[1]] = max(sent.get(mop[1], 0), o)
        elif mop[0] == "poll" and len(mop) > 1 and isinstance(mop[1], Mapping):
            for k, pairs in mop[1].items():
                for o, _v in pairs:
                    if o is not None and o > polled.get(k, -1):
                        polled[k] = o
    return sent, polled


class QueueGen:
    """The main-phase generator; thread-safe (`next_op` / `update` under one lock)."""

    def __init__(self, opts: QueueOpts, rng: random.Random | None = None) -> None:
        self.opts = opts
        self.rng = rng if rng is not None else random.Random(opts.seed)
        self._lock = threading.Lock()
        n = opts.key_count
        self.active: list[int] = list(range(n))
        self.max_writes: list[int] = [1 + zipf(self.rng, opts.max_writes_per_key)
                                      for _ in range(n)]
        self.next_value: dict[int, int] = {}
        self.scale = key_dist_scale(opts.key_dist_base, n) if opts.key_dist == \
            "exponential" else 0.0
        self._pending: OpSpec | None = None
        self._pending_keys: list[int] = []
        # poll-unseen: key -> max offset sent / polled by ok ops (trimmed when caught up)
        self._sent: dict[int, int] = {}
        self._polled: dict[int, int] = {}
        #: track-key-offsets: key -> highest offset any ok/info op saw
        self._offsets: dict[int, int] = {}
        self.retired: list[int] = []
        self._next_crash: float | None = None

    # -- Elle's wr-txns, one transaction ------------------------------------------------------

    def _fresh_key(self, i: int) -> None:
        k = self.active[i]
        self.retired.append(k)
        self.next_value.pop(k, None)
        self.active[i] = max(self.active) + 1
        self.max_writes[i] = 1 + zipf(self.rng, self.opts.max_writes_per_key)

    def _wr_txn(self) -> list[tuple[str, int, int | None]]:
        o = self.opts
        length = self.rng.randint(o.min_txn_length, o.max_txn_length)
        txn: list[tuple[str, int, int | None]] = []
        for _ in range(100_000):
            if len(txn) >= length:
                break
            f = self.rng.choice(("r", "w"))
            i = rand_key_index(self.rng, o.key_dist, o.key_dist_base, self.scale,
                               len(self.active))
            k = self.active[i]
            if f == "w":
                v = self.next_value.get(k, 1)
                if v > self.max_writes[i]:
                    self._fresh_key(i)
                    continue
                self.next_value[k] = v + 1
                txn.append(("w", k, v))
            else:
                txn.append(("r", k, None))
        return txn

    def _txn_op(self) -> tuple[OpSpec, list[int]]:
        txn = self._wr_txn()
        keys = list(dict.fromkeys(k for _, k, _ in txn))
        if not self.opts.txn and len(txn) > 1:
            txn = [m for m in txn if m[0] == "r"] + [m for m in txn if m[0] == "w"]
        mops: list[list[Any]] = [["send", k, v] if f == "w" else ["poll"] for f, k, v in txn]
        fs = {m[0] for m in mops}
        f = "poll" if fs == {"poll"} else "send" if fs == {"send"} else "txn"
        return OpSpec(f, mops), keys

    # -- the pipeline ----------------------------------------------------------------------

    def next_op(self, now: float | None = None) -> OpSpec:
        """The next op to invoke (`now`: time.monotonic(), for the crash schedule)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            o = self.opts
            if o.crash_clients:
                dt = 2 * o.crash_client_interval_s / o.concurrency
                if self._next_crash is None:
                    self._next_crash = now + self.rng.uniform(0, dt)
                if now >= self._next_crash:
                    self._next_crash = now + self.rng.uniform(0, dt)
                    return OpSpec("crash", None)
            if self._pending is None:
                self._pending, self._pending_keys = self._txn_op()
            if self.rng.random() < o.sub_p:
                f = self.rng.choice(o.sub_via)
                keys = list(self._pending_keys)
                if self.rng.random() < 1 / 3 and self._sent:
                    keys = list(dict.fromkeys([*keys, *sorted(self._sent)]))
                return OpSpec(f, keys)
            op, self._pending = self._pending, None
            return op

    def update(self, op: Op) -> None:
        """Feed a completion back (poll-unseen and track-key-offsets)."""
        if op.type not in (OK, INFO) or op.f not in ("send", "poll", "txn"):
            return
        with self._lock:
            for k, off in op_max_offsets(op).items():
                if off > self._offsets.get(k, -1):
                    self._offsets[k] = off
            if op.type != OK:
                return
            sent, polled = _max_sent_polled(op)
            for k, off in sent.items():
                self._sent[k] = max(self._sent.get(k, 0), off)
            for k, off in polled.items():
                self._polled[k] = max(self._polled.get(k, -1), off)
            for k in list(set(self._sent) | set(self._polled)):
                if self._polled.get(k, -1) >= self._sent.get(k, -1):
                    self._sent.pop(k, None)
                    self._polled.pop(k, None)

    def max_offsets(self) -> dict[int, int]:
        """key -> the highest offset seen: the final polls' targets."""
        with self._lock:
            return dict(self._offsets)


class Stagger:
    """Jepsen's `stagger` over the whole test: each op is scheduled a uniform random
    [0, 2 * dt) after the previous one (or after now, when the schedule is behind)."""

    def __init__(self, dt_s: float, rng: random.Random) -> None:
        self.dt = 2 * dt_s
        self.rng = rng
        self._next: float | None = None
        self._lock = threading.Lock()

    def next_time(self, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        with self._lock:
            t = now if self._next is None or self._next < now else self._next
            self._next = t + self.rng.uniform(0, self.dt)
            return t


# ---------------------------------------------------------------------------------------
# workers


@dataclass
class QueueRun:
    """What a run did, beside the history."""

    opts: QueueOpts
    targets: dict[int, int] = field(default_factory=dict)
    #: thread -> keys whose targets its final polls did not reach
    unreached: dict[int, dict[int, int]] = field(default_factory=dict)
    #: thread -> keys it finished at a confirmed end offset below their targets (k -> end)
    truncated: dict[int, dict[int, int]] = field(default_factory=dict)
    main_start_ns: int = 0
    main_end_ns: int = 0
    final_start_ns: int | None = None
    final_end_ns: int | None = None
    processes: dict[int, int] = field(default_factory=dict)  # thread -> last process
    errors: list[str] = field(default_factory=list)

    @property
    def final_complete(self) -> bool:
        """Every final-phase thread read every key up to its target, or up to the end of
        its partition when that end is confirmed below the target (`truncated`)."""
        return self.final_start_ns is not None and not any(self.unreached.values())


class Worker:
    """One thread's current process and client."""

    def __init__(self, thread: int, opts: QueueOpts, settings: ClientSettings,
                 recorder: Recorder, topics: TopicRegistry,
                 client_factory: Callable[[str, ClientSettings, int, TopicRegistry],
                                          QueueClient]) -> None:
        self.thread = thread
        self.process = thread
        self.opts = opts
        self.settings = settings
        self.recorder = recorder
        self.topics = topics
        self.client_factory = client_factory
        self.client: QueueClient | None = None

    def close_client(self) -> None:
        if self.client is not None:
            c, self.client = self.client, None
            try:
                c.close()
            except Exception as e:  # closing is best effort and bounded
                log.debug("close %s: %s", c.client_id, e)

    def run_op(self, spec: OpSpec,
               annotate: Callable[[Completion], Mapping[str, Any]] | None = None) -> Op:
        """Invoke one op under the current process and record it; renumbers after info.
        `annotate` adds extra keys to the client's completion before it is recorded."""
        rec = self.recorder
        if spec.f == "crash" and self.client is None:
            # nothing to tear down: no need to open a client only to crash it
            inv = rec.invoke(self.process, spec.f, spec.value, spec.extra or None)
            done = rec.complete(inv, INFO, spec.value, spec.extra or None)
            self.process = rec.process_after(done)
            return done
        if self.client is None:
            try:
                self.client = self.client_factory(self.opts.client, self.settings,
                                                  self.process, self.topics)
            except Exception as e:
                inv = rec.invoke(self.process, spec.f, spec.value, spec.extra or None)
                return rec.complete(inv, FAIL, spec.value,
                                    {**spec.extra, "error": ["no-client", exception_text(e)]})
        inv = rec.invoke(self.process, spec.f, spec.value, spec.extra or None)
        try:
            comp = self.client.invoke(spec.f, spec.value, spec.extra)
        except Exception as e:  # a bug in the client: Jepsen's interpreter says info
            log.exception("process %s: %s crashed", self.process, spec.f)
            comp = Completion(INFO, spec.value, {"error": f"indeterminate: "
                                                          f"{exception_text(e)}"})
        if annotate is not None:
            comp.extra.update(annotate(comp))
        done = rec.complete(inv, comp.type, comp.value, {**spec.extra, **comp.extra} or None)
        if comp.ends_process:
            self.close_client()
            self.process = rec.process_after(done)
        return done


def default_client_factory(name: str, settings: ClientSettings, process: int,
                           topics: TopicRegistry) -> QueueClient:
    return open_client(name, settings, process, topics)


def create_topics(opts: QueueOpts, settings: ClientSettings, keys: Sequence[int],
                  topics: TopicRegistry, *, attempts: int = 10,
                  client_factory: Callable[..., QueueClient] = default_client_factory
                  ) -> None:
    """Create the keys' topics (existing ones are fine), retrying a bounded number of
    times; raises the last error when a topic could not be created."""
    client = client_factory(opts.client, settings, -1, topics)
    try:
        for topic in opts.keymap.topics(keys):
            for attempt in range(attempts):
                try:
                    client.ensure_topic(topic)
                    break
                except Exception:
                    if attempt == attempts - 1:
                        raise
                    time.sleep(0.5)
    finally:
        client.close()


def _main_worker(w: Worker, gen: QueueGen, stagger: Stagger, stop: threading.Event,
                 deadline: float, abort: threading.Event, run: QueueRun) -> None:
    try:
        for _ in range(10**9):
            if stop.is_set() or abort.is_set() or time.monotonic() >= deadline:
                break
            spec = gen.next_op()
            t = stagger.next_time()
            if not wait_until(min(t, deadline), stop) or time.monotonic() >= deadline:
                break
            if abort.is_set():
                break
            done = w.run_op(spec)
            gen.update(done)
    except Exception as e:  # pragma: no cover - a harness bug; keep the others running
        log.exception("worker %s", w.thread)
        run.errors.append(f"worker {w.thread}: {exception_text(e)}")


def end_offsets_of(op_value: Any) -> dict[int, EndOffset]:
    """The answers of an ok `end-offsets` completion: `[[k, low, high, epoch], ...]`."""
    return {row[0]: EndOffset(row[1], row[2], row[3]) for row in op_value or ()}


def ask_end_offsets(w: Worker, gate: TruncationGate, remaining: dict[int, int],
                    read_to: Mapping[int, int]) -> dict[int, int]:
    """One `end-offsets` op for the keys still to read; the gate sees every answer (a key
    without one, or a failed op, ends that key's streak) and the keys it confirms are
    recorded on the completion (`truncated [[k, end], ...]`) and returned (k -> end)."""
    asked = sorted(remaining)

    def decide(comp: Completion) -> dict[str, Any]:
        now = time.monotonic()
        answers = end_offsets_of(comp.value) if comp.type == OK else {}
        done = []
        for k in asked:
            gate.observe(k, answers.get(k), now)
            e = gate.confirmed_end(k, remaining[k], read_to.get(k, -1))
            if e is not None:
                done.append([k, e])
        return {"truncated": done} if done else {}

    op = w.run_op(OpSpec(END_OFFSETS_F, asked), annotate=decide)
    return {k: e for k, e in op.get("truncated") or ()} if op.type == OK else {}


def _final_worker(w: Worker, targets: dict[int, int], opts: QueueOpts, end: float,
                  abort: threading.Event, rng: random.Random, run: QueueRun) -> None:
    remaining = dict(targets)
    keys = sorted(targets)
    gate = TruncationGate(opts.final_end_confirmations, opts.final_end_stable_s)
    read_to: dict[int, int] = {}  # key -> the highest offset this thread's final polls read
    truncated: dict[int, int] = {}
    try:
        for _ in range(100_000):
            if not remaining or abort.is_set() or time.monotonic() >= end:
                break
            round_end = min(time.monotonic() + opts.final_round_s, end)
            w.run_op(OpSpec("crash", None))
            w.run_op(OpSpec("debug-topic-partitions", keys))
            a = w.run_op(OpSpec("assign", keys, {"seek_to_beginning": True}))
            if a.type != OK:
                wait_until(min(time.monotonic() + 1.0, round_end), abort)
                continue
            next_ask = time.monotonic()
            for _ in range(100_000):
                if not remaining or abort.is_set() or time.monotonic() >= round_end:
                    break
                if opts.final_end_offsets and time.monotonic() >= next_ask:
                    next_ask = time.monotonic() + opts.final_end_offset_interval_s
                    for k, e in ask_end_offsets(w, gate, remaining, read_to).items():
                        truncated[k] = e
                        del remaining[k]
                    if not remaining:
                        break
                done = w.run_op(OpSpec("poll", [["poll"]], {"poll_ms": opts.final_poll_ms}))
                if done.type == OK:
                    for k, o in op_max_offsets(done).items():
                        read_to[k] = max(read_to.get(k, -1), o)
                        if k in remaining and remaining[k] <= o:
                            del remaining[k]
                            gate.forget(k)
                elif w.client is None:  # the process ended: next round, fresh client
                    break
                pause = rng.uniform(0, 2 * opts.final_poll_interval_s)
                wait_until(min(time.monotonic() + pause, round_end), abort)
    except Exception as e:  # pragma: no cover - a harness bug
        log.exception("final worker %s", w.thread)
        run.errors.append(f"final worker {w.thread}: {exception_text(e)}")
    finally:
        run.unreached[w.thread] = remaining
        if truncated:
            run.truncated[w.thread] = truncated


def _join(threads: Sequence[threading.Thread], timeout_s: float) -> list[str]:
    end = time.monotonic() + timeout_s
    stuck = []
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
        if t.is_alive():
            stuck.append(t.name)
    return stuck


def final_phase(bootstrap: str, opts: QueueOpts, recorder: Recorder,
                targets: Mapping[int, int], workers: Sequence[Worker] | None = None,
                *, abort: threading.Event | None = None, run: QueueRun | None = None,
                topics: TopicRegistry | None = None,
                client_factory: Callable[..., QueueClient] = default_client_factory
                ) -> QueueRun:
    """The final polls alone (without the recovery wait): every worker reads every key of
    `targets` from the beginning until its polls reach the target offsets, bounded by
    `final_time_limit_s`. `workers` continue their process numbering; by default there
    are `concurrency` fresh ones (processes 0..concurrency-1, which must then be unused)."""
    abort = abort or threading.Event()
    run = run or QueueRun(opts)
    settings = opts.client_settings(bootstrap)
    topics = topics or TopicRegistry()
    if workers is None:
        workers = [Worker(t, opts, settings, recorder, topics, client_factory)
                   for t in range(opts.concurrency)]
    rng = random.Random(None if opts.seed is None else opts.seed + 1)
    run.targets = dict(targets)
    run.final_start_ns = recorder.elapsed_ns()
    end = time.monotonic() + opts.final_time_limit_s
    threads = [threading.Thread(target=_final_worker, name=f"queue-final-{w.thread}",
                                args=(w, dict(targets), opts, end, abort,
                                      random.Random(rng.random()), run), daemon=True)
               for w in workers]
    for t in threads:
        t.start()
    stuck = _join(threads, opts.final_time_limit_s + opts.join_timeout_s)
    if stuck:
        run.errors.append(f"final-phase threads still running: {stuck}")
    for w in workers:
        w.close_client()
        run.processes[w.thread] = w.process
    run.final_end_ns = recorder.elapsed_ns()
    return run


def run_queue(
    bootstrap: str,
    opts: QueueOpts,
    recorder: Recorder,
    stop: threading.Event,
    deadline: float,
    *,
    before_final: Callable[[], None] | None = None,
    abort: threading.Event | None = None,
    client_factory: Callable[..., QueueClient] = default_client_factory,
) -> QueueRun:
    """Run the queue workload: setup, the main phase until `deadline` (a `time.monotonic()`
    value) or `stop`, then (with `opts.final_phase`) `before_final()`, the recovery wait and
    the final polls. `abort` ends everything promptly. Ops go to `recorder`, whose
    `concurrency` must equal `opts.concurrency` (process numbering)."""
    if recorder.concurrency != opts.concurrency:
        raise ValueError(f"recorder concurrency {recorder.concurrency} != "
                         f"opts.concurrency {opts.concurrency}")
    abort = abort or threading.Event()
    run = QueueRun(opts)
    settings = opts.client_settings(bootstrap)
    topics = TopicRegistry()
    create_topics(opts, settings, range(opts.key_count), topics,
                  client_factory=client_factory)
    rng = random.Random(opts.seed)
    gen = QueueGen(opts, random.Random(rng.random()))
    stagger = Stagger(1.0 / opts.rate, random.Random(rng.random()))
    workers = [Worker(t, opts, settings, recorder, topics, client_factory)
               for t in range(opts.concurrency)]
    run.main_start_ns = recorder.elapsed_ns()
    threads = [threading.Thread(target=_main_worker, name=f"queue-{w.thread}",
                                args=(w, gen, stagger, stop, deadline, abort, run),
                                daemon=True)
               for w in workers]
    for t in threads:
        t.start()
    # the workers check stop/abort at least every 0.5 s and finish their op in flight
    for _ in range(10**7):
        if all(not t.is_alive() for t in threads):
            break
        if abort.is_set() or stop.is_set() or time.monotonic() >= deadline:
            break
        if abort.wait(0.2):
            break
    stuck = _join(threads, opts.join_timeout_s)
    if stuck:
        run.errors.append(f"main-phase threads still running: {stuck}")
    run.main_end_ns = recorder.elapsed_ns()
    for w in workers:
        run.processes[w.thread] = w.process
    run.targets = gen.max_offsets()
    if not opts.final_phase or abort.is_set():
        for w in workers:
            w.close_client()
        return run
    if before_final is not None:
        before_final()
    log.info("waiting %.1fs for recovery", opts.recovery_wait_s)
    wait_until(time.monotonic() + opts.recovery_wait_s, abort)
    if abort.is_set():
        for w in workers:
            w.close_client()
        return run
    live = [w for w in workers if w.thread not in (
        int(n.rsplit("-", 1)[1]) for n in stuck)]
    return final_phase(bootstrap, opts, recorder, run.targets, live, abort=abort, run=run,
                       topics=topics, client_factory=client_factory)
