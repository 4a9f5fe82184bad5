"""Kafka's client byte-rate quotas (`ClientQuotaManager`) for produce and fetch.

Pure logic: time comes in as `now_ms`, nothing here does I/O or reads a clock.

**Measuring.** Every quota entity has a sensor: Kafka's `Rate` over a `WindowedSum`, that is
`quota.window.num` samples of `quota.window.size.seconds` each (11 x 1 s by default). The rate is
the sum of the retained samples divided by the time they span, where a young sensor is assumed
to have `samples - 1` earlier empty windows (so the first request of a client is measured over
about 10 s, not over 0 s). This is a port of `SampledStat`/`WindowedSum`/`Rate` as of Kafka's
2024 trunk, which includes two fixes over 2.6: samples expire by their last event rather than
their start (KAFKA PR #15889, no rate spikes) and the window is at least 1 ms (PR #12184).

**Throttling.** A request's bytes are recorded first; if the rate is then above the quota, the
throttle time is Kafka's `QuotaUtils.throttleTime`: with O the observed rate, T the quota and W
the window the rate was measured over, X = (O - T) / T * W is the delay that brings O * W /
(W + X) back down to T. Kafka does not bound it for byte-rate quotas (only the request-time
quota is capped at one window); `QuotaConfig.throttle_time_max_ms` can bound it, and it is
always capped at 2^31 - 1 because the response field is an int32.

**Who shares a quota.** Kafka's precedence, most specific first:

    /config/users/<user>/clients/<client-id>
    /config/users/<user>/clients/<default>
    /config/users/<user>
    /config/users/<default>/clients/<client-id>
    /config/users/<default>/clients/<default>
    /config/users/<default>
    /config/clients/<client-id>
    /config/clients/<default>
    quota.producer.default / quota.consumer.default (static, from server.properties)

The level that applies also decides who shares a sensor: a `<user>` quota is shared by all that
user's client-ids, a `<client-id>` quota by every user with that client-id, and a
`<user, client-id>` quota is the pair's alone (Kafka's `DefaultQuotaCallback.quotaMetricTags`).
On PLAINTEXT every connection's user is `ANONYMOUS`. One deliberate difference from Kafka: an
empty client-id is a client-id like any other; Kafka's metric tags use "" for "absent", which
lets a client with an empty client-id escape client-id quotas.

**How the broker uses it (KIP-219).**

- Produce: record the request size; the response carries `throttle_time_ms`; the response is
  sent at once, then the broker stops reading from that connection for `throttle_time_ms`
  (also for acks=0, which has no response).
- Fetch from a consumer: cap the response size at `fetch_max_bytes_in_quota_window`, record the
  response size; if throttled, `unrecord` it and answer with an EMPTY response carrying the
  throttle time, then mute the connection. Fetches from followers are exempt.
- If both the byte quota and another quota throttle, the larger time wins.
- `ThrottledChannels` keeps the muted connections and tells when each can be read again.

Clients that know KIP-219 (Produce v6+, Fetch v8+) also hold back on their side; older clients
are held back by the muted socket alone.

Memory is bounded: a sensor is dropped after `inactive_entity_expiration_ms` without traffic
(Kafka: one hour) and, beyond `entities_max` sensors, the least recently used one is dropped.
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final, Generic, Literal, TypeAlias, TypeVar

LONG_MAX: Final = 2**63 - 1
INT32_MAX: Final = 2**31 - 1
UNLIMITED: Final = float(LONG_MAX)  # Kafka's Long.MaxValue quota bound: no quota
ANONYMOUS: Final = "ANONYMOUS"  # the user of every PLAINTEXT connection

QuotaKind: TypeAlias = Literal["produce", "fetch"]
QUOTA_KINDS: Final[tuple[QuotaKind, ...]] = ("produce", "fetch")


class _Default(Enum):
    DEFAULT = "<default>"

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = _Default.DEFAULT
"""The `<default>` entity name: the quota of every user (or client-id) without its own."""

EntityName: TypeAlias = str | Literal[_Default.DEFAULT]


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """Where a quota is set: a user, a client-id, or both; each may be `DEFAULT`.

    `QuotaEntity(client_id="app")` is /config/clients/app,
    `QuotaEntity(user=DEFAULT)` is /config/users/<default>."""

    user: EntityName | None = None
    client_id: EntityName | None = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("a quota entity names a user, a client-id, or both")
        for part in (self.user, self.client_id):
            if part is not None and part is not DEFAULT and not isinstance(part, str):
                raise ValueError(f"quota entity names are strings or DEFAULT, not {part!r}")

    def __str__(self) -> str:
        def name(part: EntityName) -> str:
            return "<default>" if part is DEFAULT else str(part)

        path = ""
        if self.user is not None:
            path += f"/config/users/{name(self.user)}"
        if self.client_id is not None:
            path += (
                f"/clients/{name(self.client_id)}"
                if path
                else f"/config/clients/{name(self.client_id)}"
            )
        return path


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaConfig:
    """Quota settings. The first four are Kafka's server.properties keys."""

    quota_producer_default: int = LONG_MAX  # bytes/s; Long.MAX_VALUE = unlimited
    quota_consumer_default: int = LONG_MAX
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    # Kafka: ClientQuotaManager.InactiveSensorExpirationTimeSeconds = 3600.
    inactive_entity_expiration_ms: int = 3_600_000
    # hiwater's bound on sensors kept (Kafka has none): beyond it the least recently used goes.
    entities_max: int = 100_000
    # None = Kafka's byte-rate behaviour (unbounded, but at most 2^31 - 1 for the int32 field).
    throttle_time_max_ms: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "quota_producer_default",
            "quota_consumer_default",
            "quota_window_num",
            "quota_window_size_seconds",
            "inactive_entity_expiration_ms",
            "entities_max",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name.replace('_', '.')}={value!r} must be an integer >= 1")
        cap = self.throttle_time_max_ms
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
            raise ValueError(f"throttle_time_max_ms={cap!r} must be None or an integer >= 0")

    @property
    def window_ms(self) -> int:
        return self.quota_window_size_seconds * 1000

    def static_default(self, kind: QuotaKind) -> float:
        return float(
            self.quota_producer_default if kind == "produce" else self.quota_consumer_default
        )


# ---------------------------------------------------------------------------------------
# Kafka's SampledStat / WindowedSum / Rate


class _Sample:
    __slots__ = ("event_count", "last_event_ms", "start_time_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_time_ms = now_ms
        self.last_event_ms = now_ms

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_time_ms = now_ms
        self.last_event_ms = now_ms


class SampledRate:
    """Kafka's `Rate` (per second) over a `WindowedSum` of `samples` windows of `window_ms`.

    Keeps at most samples + 1 sample objects (the extra one lets a sample that started before
    the monitored window but overlaps it still count, as in Kafka)."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    def __init__(self, *, samples: int, window_ms: int) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError("a rate needs samples >= 1 and window_ms >= 1")
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        """SampledStat.record: add to the current sample, starting a new one when it is full."""
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_time_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """Rate.measure: the retained sum divided by the window it spans, per second."""
        self._purge_obsolete(now_ms)
        total = math.fsum(s.value for s in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def window_size_ms(self, now_ms: int) -> int:
        """Rate.windowSize: time since the oldest retained sample started, counting at least
        samples - 1 full windows, and at least 1 ms."""
        self._purge_obsolete(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_time_ms
        full_windows = elapsed // self.window_ms
        min_full_windows = self.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * self.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(self._samples, key=lambda s: s.start_time_ms)

    def _purge_obsolete(self, now_ms: int) -> None:
        """Reset samples with no event in the monitored window (samples x window_ms)."""
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)


def throttle_time_ms(rate: float, quota: float, window_ms: int) -> int:
    """Kafka's QuotaUtils.throttleTime: X = (O - T) / T * W, rounded like Java's Math.round.

    0 when the rate is within the quota."""
    if not rate > quota:
        return 0
    return max(0, math.floor((rate - quota) / quota * window_ms + 0.5))


# ---------------------------------------------------------------------------------------
# the quota manager


@dataclass(frozen=True, slots=True)
class QuotaRecord:
    """What one `record` saw: the rate after recording, the quota that applies, the window the
    rate was measured over and the resulting throttle time."""

    throttle_time_ms: int
    rate: float
    quota: float
    window_ms: int


# A sensor key: the kind plus Kafka's metric tags (user, client-id); None is an absent tag.
_SensorKey: TypeAlias = tuple[QuotaKind, str | None, str | None]


class _Sensor:
    __slots__ = ("last_record_ms", "rate")

    def __init__(self, rate: SampledRate, now_ms: int) -> None:
        self.rate = rate
        self.last_record_ms = now_ms


class QuotaManager:
    """Client byte-rate quotas for produce and fetch (Kafka's two ClientQuotaManagers)."""

    def __init__(self, config: QuotaConfig | None = None) -> None:
        self.config = config or QuotaConfig()
        self._overrides: dict[QuotaKind, dict[QuotaEntity, float]] = {k: {} for k in QUOTA_KINDS}
        # Kafka's quotasEnabled: on when a static default or any override was ever configured,
        # and it stays on until restart. Before that nothing is recorded at all.
        self._enabled: dict[QuotaKind, bool] = {
            k: self.config.static_default(k) != UNLIMITED for k in QUOTA_KINDS
        }
        self._sensors: OrderedDict[_SensorKey, _Sensor] = OrderedDict()

    # --- quota configuration

    def set_quota(
        self, kind: QuotaKind, entity: QuotaEntity, bytes_per_second: float | None
    ) -> None:
        """Set (or with None remove) the quota of one entity, like `kafka-configs --alter`."""
        _check_kind(kind)
        if bytes_per_second is None:
            self._overrides[kind].pop(entity, None)
            return
        rate = float(bytes_per_second)
        if not rate > 0 or math.isnan(rate):
            raise ValueError(
                f"{kind} quota for {entity} must be > 0 bytes/s, not {bytes_per_second!r}"
            )
        self._overrides[kind][entity] = rate
        self._enabled[kind] = True

    def set_quotas(self, kind: QuotaKind, overrides: Mapping[QuotaEntity, float]) -> None:
        """Replace every override of one kind (rate histories are kept, as in Kafka)."""
        _check_kind(kind)
        for entity in list(self._overrides[kind]):
            self.set_quota(kind, entity, None)
        for entity, rate in overrides.items():
            self.set_quota(kind, entity, rate)

    def overrides(self, kind: QuotaKind) -> dict[QuotaEntity, float]:
        _check_kind(kind)
        return dict(self._overrides[kind])

    def quotas_enabled(self, kind: QuotaKind) -> bool:
        _check_kind(kind)
        return self._enabled[kind]

    def quota(self, kind: QuotaKind, user: str, client_id: str) -> float:
        """The quota (bytes/s) that applies to a connection; `UNLIMITED` if none."""
        _check_kind(kind)
        return self._quota_limit(kind, self._metric_tags(kind, user, client_id))

    def fetch_max_bytes_in_quota_window(self, user: str, client_id: str) -> int:
        """Kafka's getMaxValueInQuotaWindow for fetch: the most bytes one response may carry
        without being throttled for sure (quota x (samples - 1) x window); cap a consumer's
        fetch max_bytes at it. Capped at 2^31 - 1, which is also the answer with no quota."""
        if not self._enabled["fetch"]:
            return INT32_MAX
        limit = self.quota("fetch", user, client_id)
        c = self.config
        value = limit * (c.quota_window_num - 1) * c.quota_window_size_seconds
        return int(min(value, INT32_MAX))

    # --- recording

    def record_and_get_throttle(
        self, kind: QuotaKind, user: str, client_id: str, bytes: int, now_ms: int
    ) -> int:
        """Record `bytes` for the connection's quota entity; return the throttle time in ms
        (0 if within quota), to put in the response and to mute the connection for."""
        return self.record(kind, user, client_id, bytes, now_ms).throttle_time_ms

    def record(
        self, kind: QuotaKind, user: str, client_id: str, bytes: float, now_ms: int
    ) -> QuotaRecord:
        """`record_and_get_throttle`, with the measurements behind the answer."""
        _check_kind(kind)
        if not self._enabled[kind]:
            return QuotaRecord(throttle_time_ms=0, rate=0.0, quota=UNLIMITED, window_ms=0)
        tags = self._metric_tags(kind, user, client_id)
        limit = self._quota_limit(kind, tags)
        rate = self._sensor((kind, *tags), now_ms).rate
        rate.record(bytes, now_ms)
        observed = rate.measure(now_ms)
        window_ms = rate.window_size_ms(now_ms)
        throttle = throttle_time_ms(observed, limit, window_ms)
        cap = self.config.throttle_time_max_ms
        throttle = min(throttle, INT32_MAX if cap is None else cap)
        return QuotaRecord(
            throttle_time_ms=throttle, rate=observed, quota=limit, window_ms=window_ms
        )

    def unrecord(
        self, kind: QuotaKind, user: str, client_id: str, bytes: float, now_ms: int
    ) -> None:
        """Take back bytes recorded for a response that was not sent (a throttled fetch gets an
        empty response instead): Kafka records the negative value."""
        _check_kind(kind)
        if not self._enabled[kind]:
            return
        tags = self._metric_tags(kind, user, client_id)
        self._sensor((kind, *tags), now_ms).rate.record(-bytes, now_ms)

    def observed_rate(self, kind: QuotaKind, user: str, client_id: str, now_ms: int) -> float:
        """The connection's current rate in bytes/s (0 if nothing is recorded)."""
        _check_kind(kind)
        sensor = self._sensors.get((kind, *self._metric_tags(kind, user, client_id)))
        return 0.0 if sensor is None else sensor.rate.measure(now_ms)

    # --- memory bound

    def expire(self, now_ms: int) -> int:
        """Drop sensors idle for longer than `inactive_entity_expiration_ms`; return how many."""
        limit = self.config.inactive_entity_expiration_ms
        dropped = 0
        # The OrderedDict is in least-recently-recorded order, so stop at the first live one.
        while self._sensors:
            key, sensor = next(iter(self._sensors.items()))
            if now_ms - sensor.last_record_ms <= limit:
                break
            del self._sensors[key]
            dropped += 1
        return dropped

    def __len__(self) -> int:
        """The number of sensors (quota entities with a rate history) held."""
        return len(self._sensors)

    def _sensor(self, key: _SensorKey, now_ms: int) -> _Sensor:
        self.expire(now_ms)
        sensor = self._sensors.get(key)
        if sensor is None:
            c = self.config
            sensor = _Sensor(SampledRate(samples=c.quota_window_num, window_ms=c.window_ms), now_ms)
            self._sensors[key] = sensor
            while len(self._sensors) > c.entities_max:
                self._sensors.popitem(last=False)
        else:
            self._sensors.move_to_end(key)
        sensor.last_record_ms = now_ms
        return sensor

    # --- Kafka's DefaultQuotaCallback

    def _metric_tags(
        self, kind: QuotaKind, user: str, client_id: str
    ) -> tuple[str | None, str | None]:
        """quotaMetricTags: the (user, client-id) tags of the sensor a connection records into,
        chosen by the most specific level that has a quota."""
        ov = self._overrides[kind]
        if QuotaEntity(user, client_id) in ov or QuotaEntity(user, DEFAULT) in ov:
            return user, client_id
        if QuotaEntity(user, None) in ov:
            return user, None
        if QuotaEntity(DEFAULT, client_id) in ov or QuotaEntity(DEFAULT, DEFAULT) in ov:
            return user, client_id
        if QuotaEntity(DEFAULT, None) in ov:
            return user, None
        return None, client_id

    def _quota_limit(self, kind: QuotaKind, tags: tuple[str | None, str | None]) -> float:
        """quotaLimit: the bound of a sensor's tags, most specific level first."""
        ov = self._overrides[kind]
        user, client_id = tags
        candidates: tuple[QuotaEntity, ...]
        if user is not None and client_id is not None:
            candidates = (
                QuotaEntity(user, client_id),
                QuotaEntity(user, DEFAULT),
                QuotaEntity(DEFAULT, client_id),
                QuotaEntity(DEFAULT, DEFAULT),
            )
        elif user is not None:
            candidates = (QuotaEntity(user, None), QuotaEntity(DEFAULT, None))
        else:
            assert client_id is not None
            candidates = (QuotaEntity(None, client_id), QuotaEntity(None, DEFAULT))
        for entity in candidates:
            if entity in ov:
                return ov[entity]
        return self.config.static_default(kind) if user is None else UNLIMITED


def _check_kind(kind: str) -> None:
    if kind not in QUOTA_KINDS:
        raise ValueError(f"quota kind must be 'produce' or 'fetch', not {kind!r}")


# ---------------------------------------------------------------------------------------
# muted connections (KIP-219)

K = TypeVar("K", bound=Hashable)


class ThrottledChannels(Generic[K]):
    """Connections muted after a throttled response, and when each may be read again.

    The broker sends the response with `throttle_time_ms` at once, calls `throttle`, stops
    reading that connection, and resumes reading the connections `pop_unmuted` returns (wake up
    at `next_unmute_ms`). A connection that closes is `remove`d. Holds at most one entry per
    connection (plus stale heap entries, compacted when they pile up)."""

    def __init__(self) -> None:
        self._until: dict[K, int] = {}
        self._heap: list[tuple[int, int, K]] = []
        self._sequence = 0

    def throttle(self, channel: K, throttle_time_ms: int, now_ms: int) -> int:
        """Mute `channel` until now + throttle (extending, never shortening, a current mute);
        return the time it may be read again."""
        if throttle_time_ms <= 0:
            return self._until.get(channel, now_ms)
        current = self._until.get(channel)
        until = now_ms + throttle_time_ms
        if current is not None and current >= until:
            return current
        self._until[channel] = until
        self._sequence += 1
        heapq.heappush(self._heap, (until, self._sequence, channel))
        if len(self._heap) > 2 * len(self._until) + 16:
            self._compact()
        return until

    def is_muted(self, channel: K, now_ms: int) -> bool:
        until = self._until.get(channel)
        return until is not None and now_ms < until

    def muted_until_ms(self, channel: K) -> int | None:
        return self._until.get(channel)

    def pop_unmuted(self, now_ms: int) -> list[K]:
        """The channels whose throttle time is over, earliest first; they are forgotten."""
        due: list[K] = []
        while self._heap and self._heap[0][0] <= now_ms:
            until, _, channel = heapq.heappop(self._heap)
            if self._until.get(channel) == until:
                del self._until[channel]
                due.append(channel)
        return due

    def next_unmute_ms(self) -> int | None:
        while self._heap and self._until.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def remove(self, channel: K) -> None:
        self._until.pop(channel, None)

    def __len__(self) -> int:
        return len(self._until)

    def _compact(self) -> None:
        self._heap = [e for e in self._heap if self._until.get(e[2]) == e[0]]
        heapq.heapify(self._heap)
