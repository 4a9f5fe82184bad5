"""`BrokerConfig`: a Kafka `server.properties` file, parsed and validated with Kafka's defaults.

Keys, defaults and validators are those of Kafka 2.6's `KafkaConfig` (the ZooKeeper era that
hiwater models). A bad value raises `ConfigError`, which names the key, the bad value and what is
allowed. As in Kafka, a key nobody knows is not an error: it is kept, listed in
`BrokerConfig.unknown_keys` and logged as a warning. Kafka keys that hiwater accepts but does not
use (thread counts, socket buffers, metrics, SSL/SASL settings...) are kept too, listed in
`BrokerConfig.ignored_keys` and logged at info level.

hiwater speaks PLAINTEXT only: `listeners` must be exactly one `PLAINTEXT://host:port`. SSL,
SASL_PLAINTEXT and SASL_SSL listeners are rejected with a `ConfigError` that says so.

Beyond Kafka's keys there is one of hiwater's own: `hiwater.bugs`, a comma list of the historic
bug switches in `core.config.Bugs` to turn back on.

The file syntax is Java's `.properties` (`parse_properties`), read as ISO-8859-1 as Kafka's
`Utils.loadProps` does; `format_properties` writes it back.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from broker.quotas import QuotaConfig
from broker.store.config import LogConfig
from broker.store.errors import InvalidConfigError
from core.config import Bugs, ProtocolConfig, TopicConfig

log = logging.getLogger(__name__)

_T = TypeVar("_T")

INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1
SHORT_MIN: Final = -(2**15)
SHORT_MAX: Final = 2**15 - 1
LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1

ZOOKEEPER_PORT_DEFAULT: Final = 2181


class ConfigError(ValueError):
    """A `server.properties` value is missing, malformed or out of range.

    `key` is the Kafka key, `value` the offending value as given (None when the key is
    missing), and `allowed` says what is allowed."""

    def __init__(self, key: str, value: object, allowed: str, *, missing: bool = False) -> None:
        self.key = key
        self.value = None if missing else value
        self.allowed = allowed
        if missing:
            super().__init__(f"{key} is required: {allowed}")
        else:
            super().__init__(f"invalid {key}={value!r}: {allowed}")


# ---------------------------------------------------------------------------------------
# Java .properties syntax (java.util.Properties.load)

_PROPS_WHITESPACE: Final = " \t\f"
_PROPS_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX_DIGITS: Final = frozenset("0123456789abcdefABCDEF")


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text into a dict, later keys overriding earlier ones.

    Follows `java.util.Properties.load`: comment lines start with `#` or `!`; a key ends at the
    first unescaped `=`, `:` or whitespace; whitespace around the separator is skipped; a line
    ending in an odd number of backslashes continues on the next line, whose leading whitespace
    is dropped; escapes are `\\t \\n \\r \\f \\uXXXX`, and a backslash before any other character
    stands for that character. Trailing whitespace of a value is kept, as Java keeps it (Kafka
    trims values when it converts them, and so does `BrokerConfig`)."""
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split_key_value(line)
        props[_unescape(key, number)] = _unescape(value, number)
    return props


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a `.properties` file as ISO-8859-1, as `Properties.load(InputStream)` does."""
    return parse_properties(Path(path).read_bytes().decode("latin-1"))


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield (first line number, logical line) with continuations joined and comments gone."""
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_PROPS_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue  # a comment line never continues, even if it ends in a backslash
        while _continues(line):
            line = line[:-1]
            if i >= len(natural):
                break  # Java drops a backslash that ends the file
            line += natural[i].lstrip(_PROPS_WHITESPACE)
            i += 1
        yield start + 1, line


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    """Java's rule: the key ends at an unescaped `=`, `:` or whitespace; then whitespace, at most
    one `=`/`:` (only if the key was ended by whitespace), and whitespace again are skipped."""
    end = len(line)
    value_start = len(line)
    has_separator = False
    backslash = False
    for i, c in enumerate(line):
        if not backslash and c in "=:":
            end, value_start, has_separator = i, i + 1, True
            break
        if not backslash and c in _PROPS_WHITESPACE:
            end, value_start = i, i + 1
            break
        backslash = not backslash if c == "\\" else False
    while value_start < len(line):
        c = line[value_start]
        if c not in _PROPS_WHITESPACE:
            if has_separator or c not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:end], line[value_start:]


def _unescape(raw: str, line_number: int) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(raw):
            break  # a lone trailing backslash (end of file) is dropped, as in Java
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or not set(digits) <= _HEX_DIGITS:
                raise ConfigError(
                    f"line {line_number}",
                    raw,
                    "malformed \\uXXXX escape: \\u must be followed by four hex digits",
                )
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_PROPS_ESCAPES.get(nxt, nxt))
        i += 2
    text = "".join(out)
    # Java strings are UTF-16: a character beyond the BMP is written as two \u escapes.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def format_properties(props: Mapping[str, str], *, header: str | None = None) -> str:
    """Render properties so that `parse_properties` (and Java) read back exactly `props`."""
    lines = [f"# {line}" for line in header.splitlines()] if header else []
    for key, value in props.items():
        lines.append(f"{_escape(key, is_key=True)}={_escape(value, is_key=False)}")
    return "\n".join(lines) + "\n"


def _escape(text: str, *, is_key: bool) -> str:
    out: list[str] = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        elif c == " " and (is_key or i == 0):
            out.append("\\ ")  # Java escapes every space of a key, and a value's leading one
        elif c in "=:#!":
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            encoded = c.encode("utf-16-be", "surrogatepass")
            for j in range(0, len(encoded), 2):
                out.append(f"\\u{int.from_bytes(encoded[j : j + 2], 'big'):04X}")
        else:
            out.append(c)
    return "".join(out)


# ---------------------------------------------------------------------------------------
# value types: listeners and zookeeper.connect

_HOST_RE: Final = re.compile(r"[0-9A-Za-z\-%._:]+")
_LISTENER_RE: Final = re.compile(
    r"^(?P<name>[^:/]*)://(?P<host>\[[^\]]*\]|[^\[\]]*?):(?P<port>-?\d+)$"
)


@dataclass(frozen=True, slots=True)
class Listener:
    """One `PLAINTEXT://host:port` listener. Port 0 (in `listeners` only) means ephemeral."""

    host: str
    port: int
    name: str = "PLAINTEXT"

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    def with_port(self, port: int) -> Listener:
        return dataclasses.replace(self, port=port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"

    @classmethod
    def parse(cls, key: str, raw: str) -> Listener:
        """Parse Kafka's listener syntax, accepting only a single PLAINTEXT listener."""
        text = raw.strip()
        entries = [e for e in re.split(r"\s*,\s*", text) if e]
        example = "PLAINTEXT://127.0.0.1:9092"
        if len(entries) != 1:
            raise ConfigError(
                key,
                raw,
                f"hiwater supports exactly one listener, PLAINTEXT://host:port (e.g. {example})",
            )
        m = _LISTENER_RE.match(entries[0])
        if m is None:
            raise ConfigError(key, raw, f"expected PLAINTEXT://host:port (e.g. {example})")
        name = m["name"].upper()
        if name != "PLAINTEXT":
            raise ConfigError(
                key,
                raw,
                "hiwater supports only PLAINTEXT listeners (PLAINTEXT://host:port); SSL, "
                "SASL_PLAINTEXT, SASL_SSL and custom listener names are not implemented",
            )
        host = m["host"].removeprefix("[").removesuffix("]")
        if not host:
            raise ConfigError(
                key,
                raw,
                f"a host must be given (e.g. {example}; use 0.0.0.0 to bind every interface)",
            )
        if _HOST_RE.fullmatch(host) is None:
            raise ConfigError(key, raw, "the host may contain only letters, digits and - % . _ :")
        port = _to_int(key, m["port"], INT_MIN, INT_MAX, raw=raw)
        listener = cls(host=host, port=port, name=name)
        try:
            listener.check(key)
        except ConfigError as e:
            raise ConfigError(key, raw, e.allowed) from None
        return listener

    def check(self, key: str, *, advertised: bool = False) -> None:
        if self.name != "PLAINTEXT":
            raise ConfigError(key, str(self), "hiwater supports only PLAINTEXT listeners")
        if not self.host or _HOST_RE.fullmatch(self.host) is None:
            raise ConfigError(
                key, str(self), "a host (letters, digits and - % . _ :) must be given"
            )
        if isinstance(self.port, bool) or not isinstance(self.port, int):
            raise ConfigError(key, str(self), "the port must be an integer")
        low = 1 if advertised else 0
        if not low <= self.port <= 65535:
            allowed = (
                "an advertised port must be in [1, 65535] (clients cannot connect to port 0)"
                if advertised
                else "the port must be in [0, 65535] (0 = an ephemeral port chosen at bind time)"
            )
            raise ConfigError(key, str(self), allowed)
        if advertised and self.host == "0.0.0.0":
            raise ConfigError(
                key,
                str(self),
                "cannot advertise the nonroutable meta-address 0.0.0.0; use a routable address",
            )


@dataclass(frozen=True, slots=True)
class ZooKeeperConnect:
    """`zookeeper.connect`: `host:port[,host:port...][/chroot]` (a missing port means 2181)."""

    hosts: tuple[tuple[str, int], ...]
    chroot: str | None = None

    def __str__(self) -> str:
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.hosts)
        return hosts + (self.chroot or "")

    @classmethod
    def parse(cls, key: str, raw: str) -> ZooKeeperConnect:
        text = raw.strip()
        allowed = "expected host:port[,host:port...][/chroot], e.g. 127.0.0.1:2181/hiwater"
        hosts_part, slash, chroot_part = text.partition("/")
        chroot = "/" + chroot_part if slash else None
        if chroot == "/":
            chroot = None  # ZooKeeper's ConnectStringParser treats a bare "/" as no chroot
        hosts: list[tuple[str, int]] = []
        for entry in hosts_part.split(","):
            entry = entry.strip()
            if not entry:
                raise ConfigError(key, raw, allowed + " (an empty host entry was found)")
            hosts.append(_parse_zk_host(key, raw, entry, allowed))
        zk = cls(hosts=tuple(hosts), chroot=chroot)
        try:
            zk.check(key)
        except ConfigError as e:
            raise ConfigError(key, raw, e.allowed) from None
        return zk

    def check(self, key: str) -> None:
        if not self.hosts:
            raise ConfigError(key, str(self), "at least one host:port must be given")
        for host, port in self.hosts:
            if not host or _HOST_RE.fullmatch(host) is None:
                raise ConfigError(key, str(self), f"bad host {host!r}")
            if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
                raise ConfigError(key, str(self), f"port of {host!r} must be in [1, 65535]")
        if self.chroot is not None:
            segments = self.chroot.split("/")[1:]
            if (
                not self.chroot.startswith("/")
                or self.chroot.endswith("/")
                or any(s in ("", ".", "..") for s in segments)
            ):
                raise ConfigError(
                    key,
                    str(self),
                    f"bad chroot {self.chroot!r}: a ZooKeeper path like /kafka or /a/b "
                    "(no trailing /, no empty, '.' or '..' segments)",
                )


def _parse_zk_host(key: str, raw: str, entry: str, allowed: str) -> tuple[str, int]:
    if entry.startswith("["):
        host, sep, rest = entry[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ConfigError(key, raw, allowed)
        port_text = rest[1:] if rest else ""
    elif entry.count(":") > 1:
        raise ConfigError(key, raw, allowed + " (write IPv6 hosts in brackets: [::1]:2181)")
    else:
        host, _, port_text = entry.partition(":")
    if not port_text:
        return host, ZOOKEEPER_PORT_DEFAULT
    return host, _to_int(key, port_text, 1, 65535, raw=raw)


# ---------------------------------------------------------------------------------------
# per-key specs: how a key's text becomes a typed value, and which values are allowed

_INT_RE: Final = re.compile(r"[+-]?[0-9]+")
_FLOAT_RE: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_LIST_SPLIT_RE: Final = re.compile(r"\s*,\s*")


def _to_int(key: str, text: str, low: int, high: int, *, raw: str | None = None) -> int:
    """Java's Integer/Long.parseLong on the trimmed text (ASCII digits, optional sign)."""
    shown = raw if raw is not None else text
    stripped = text.strip()
    if _INT_RE.fullmatch(stripped) is None:
        raise ConfigError(key, shown, f"expected an integer in [{low}, {high}]")
    value = int(stripped)
    if not low <= value <= high:
        raise ConfigError(key, shown, f"must be an integer in [{low}, {high}]")
    return value


def _csv(raw: str) -> tuple[str, ...]:
    return tuple(item for item in _LIST_SPLIT_RE.split(raw.strip()) if item)


class _Spec:
    """Parsing, validation and formatting of one key's value."""

    def parse(self, key: str, raw: str) -> object:
        raise NotImplementedError

    def check(self, key: str, value: object) -> None:
        raise NotImplementedError

    def format(self, value: object) -> str:
        return str(value)

    def coerce(self, key: str, value: object) -> object:
        """A value given in Python (`with_overrides`): text is parsed, anything else checked."""
        return self.parse(key, value) if isinstance(value, str) else value


@dataclass(frozen=True, slots=True)
class _Int(_Spec):
    low: int
    high: int

    def parse(self, key: str, raw: str) -> object:
        return _to_int(key, raw, self.low, self.high)

    def check(self, key: str, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(key, value, f"expected an integer in [{self.low}, {self.high}]")
        if not self.low <= value <= self.high:
            raise ConfigError(key, value, f"must be an integer in [{self.low}, {self.high}]")


@dataclass(frozen=True, slots=True)
class _OptionalInt(_Int):
    """An integer key whose Kafka default is null (another key, or a fallback, decides)."""

    def check(self, key: str, value: object) -> None:
        if value is not None:
            _Int.check(self, key, value)


@dataclass(frozen=True, slots=True)
class _Bool(_Spec):
    def parse(self, key: str, raw: str) -> object:
        text = raw.strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(key, raw, "expected true or false")
        return text == "true"

    def check(self, key: str, value: object) -> None:
        if not isinstance(value, bool):
            raise ConfigError(key, value, "expected true or false")

    def format(self, value: object) -> str:
        return "true" if value else "false"


@dataclass(frozen=True, slots=True)
class _Double(_Spec):
    low: float
    high: float

    def parse(self, key: str, raw: str) -> object:
        if _FLOAT_RE.fullmatch(raw.strip()) is None:
            raise ConfigError(key, raw, f"expected a number in [{self.low}, {self.high}]")
        value = float(raw.strip())
        if not self.low <= value <= self.high:
            raise ConfigError(key, raw, f"must be a number in [{self.low}, {self.high}]")
        return value

    def check(self, key: str, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(key, value, f"expected a number in [{self.low}, {self.high}]")
        if not math.isfinite(value) or not self.low <= value <= self.high:
            raise ConfigError(key, value, f"must be a number in [{self.low}, {self.high}]")

    def format(self, value: object) -> str:
        assert isinstance(value, int | float)
        return repr(float(value))


@dataclass(frozen=True, slots=True)
class _OptionalStr(_Spec):
    def parse(self, key: str, raw: str) -> object:
        return raw.strip()

    def check(self, key: str, value: object) -> None:
        if value is not None and not isinstance(value, str):
            raise ConfigError(key, value, "expected a string")


@dataclass(frozen=True, slots=True)
class _OptionalChoice(_Spec):
    """One of a few words, or unset (the code picks)."""

    allowed: tuple[str, ...]

    def parse(self, key: str, raw: str) -> object:
        return raw.strip() or None

    def check(self, key: str, value: object) -> None:
        if value is not None and value not in self.allowed:
            raise ConfigError(key, value, f"expected one of {', '.join(self.allowed)}")


@dataclass(frozen=True, slots=True)
class _List(_Spec):
    """A comma list (Kafka's LIST type), optionally restricted to some words."""

    allowed: tuple[str, ...] = ()
    what: str = "a comma-separated list"

    def parse(self, key: str, raw: str) -> object:
        return _csv(raw)

    def coerce(self, key: str, value: object) -> object:
        if isinstance(value, list):
            return tuple(value)
        return _Spec.coerce(self, key, value)

    def check(self, key: str, value: object) -> None:
        if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(key, value, f"expected {self.what}")
        if not value:
            raise ConfigError(key, "", f"expected {self.what}, with at least one entry")
        bad = [v for v in value if self.allowed and v not in self.allowed]
        if bad:
            raise ConfigError(
                key, ",".join(value), f"{bad[0]!r} is not one of {', '.join(self.allowed)}"
            )

    def format(self, value: object) -> str:
        assert isinstance(value, tuple)
        return ",".join(value)


@dataclass(frozen=True, slots=True)
class _Bugs(_Spec):
    """`hiwater.bugs`: names of `core.config.Bugs` switches to turn on (may be empty)."""

    def parse(self, key: str, raw: str) -> object:
        return _csv(raw)

    def coerce(self, key: str, value: object) -> object:
        if isinstance(value, list):
            return tuple(value)
        return _Spec.coerce(self, key, value)

    def check(self, key: str, value: object) -> None:
        valid = tuple(f.name for f in dataclasses.fields(Bugs))
        if not isinstance(value, tuple):
            raise ConfigError(
                key, value, f"expected a comma list of bug switches: {', '.join(valid)}"
            )
        for name in value:
            if name not in valid:
                raise ConfigError(
                    key,
                    ",".join(map(str, value)),
                    f"{name!r} is not a bug switch; valid: {', '.join(valid)}",
                )

    def format(self, value: object) -> str:
        assert isinstance(value, tuple)
        return ",".join(value)


@dataclass(frozen=True, slots=True)
class _ListenerSpec(_Spec):
    advertised: bool = False

    def parse(self, key: str, raw: str) -> object:
        return Listener.parse(key, raw)

    def check(self, key: str, value: object) -> None:
        if value is None and self.advertised:
            return  # advertised.listeners defaults to listeners
        if not isinstance(value, Listener):
            raise ConfigError(key, value, "expected a PLAINTEXT://host:port listener")
        value.check(key, advertised=self.advertised)


@dataclass(frozen=True, slots=True)
class _ZooKeeperSpec(_Spec):
    def parse(self, key: str, raw: str) -> object:
        return ZooKeeperConnect.parse(key, raw)

    def check(self, key: str, value: object) -> None:
        if not isinstance(value, ZooKeeperConnect):
            raise ConfigError(key, value, "expected host:port[,host:port...][/chroot]")
        value.check(key)


def _key(spec: _Spec, default: _T) -> _T:
    """A BrokerConfig field for the Kafka key named like the field (underscores -> dots)."""
    return field(default=default, metadata={"spec": spec})


def _required(spec: _Spec) -> Any:
    return field(metadata={"spec": spec})


_NON_NEGATIVE_INT: Final = _Int(0, INT_MAX)
_POSITIVE_INT: Final = _Int(1, INT_MAX)
_NON_NEGATIVE_LONG: Final = _Int(0, LONG_MAX)
_POSITIVE_LONG: Final = _Int(1, LONG_MAX)
_BOOL: Final = _Bool()
_CLEANUP_POLICIES: Final = ("compact", "delete")
_LOG_DIR_DEFAULT: Final = "/tmp/kafka-logs"

# Kafka keys hiwater accepts and does not use (logged at info level, kept for to_properties).
_IGNORED_KEYS: Final = frozenset(
    {
        "num.network.threads", "num.io.threads", "background.threads",
        "num.recovery.threads.per.data.dir", "num.replica.fetchers",
        "num.replica.alter.log.dirs.threads", "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes", "replica.socket.receive.buffer.bytes",
        "queued.max.request.bytes", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.max.bytes.per.second", "log.roll.jitter.ms", "log.roll.jitter.hours",
        "log.delete.delay.ms", "log.preallocate", "log.message.format.version",
        "log.message.timestamp.type", "log.message.timestamp.difference.max.ms",
        "log.message.downconversion.enable", "inter.broker.protocol.version", "compression.type",
        "fetch.purgatory.purge.interval.requests", "producer.purgatory.purge.interval.requests",
        "delete.records.purgatory.purge.interval.requests", "metric.reporters",
        "metrics.num.samples", "metrics.sample.window.ms", "metrics.recording.level",
        "kafka.metrics.reporters", "kafka.metrics.polling.interval.secs", "zookeeper.sync.time.ms",
        "zookeeper.set.acl", "zookeeper.max.in.flight.requests", "zookeeper.clientCnxnSocket",
        "broker.id.generation.enable", "reserved.broker.max.id",
        "max.incremental.fetch.session.cache.slots", "offsets.load.buffer.size",
        "offsets.topic.compression.codec", "replication.quota.window.num",
        "replication.quota.window.size.seconds", "alter.log.dirs.replication.quota.window.num",
        "alter.log.dirs.replication.quota.window.size.seconds", "client.quota.callback.class",
        "authorizer.class.name", "listener.security.protocol.map", "control.plane.listener.name",
        "replica.selector.class", "connections.max.reauth.ms", "failed.authentication.delay.ms",
        "max.connections.per.ip.overrides", "controller.message.queue.size",
        "create.topic.policy.class.name", "alter.config.policy.class.name",
        "principal.builder.class", "security.providers", "group.max.size.bytes",
        "security.inter.broker.protocol", "inter.broker.listener.name",
    }
)  # fmt: skip
_IGNORED_PREFIXES: Final = (
    "transactional.id.", "transaction.", "ssl.", "sasl.", "zookeeper.ssl.", "listener.name.",
    "password.encoder.", "delegation.token.",
)  # fmt: skip

# Kafka keys that must say PLAINTEXT when given at all.
_PLAINTEXT_ONLY_KEYS: Final = ("security.inter.broker.protocol", "inter.broker.listener.name")

# Kafka 2.x keys replaced by listeners / advertised.listeners: refused rather than half-honoured.
_DEPRECATED_LISTENER_KEYS: Final = {
    "port": "listeners",
    "host.name": "listeners",
    "advertised.port": "advertised.listeners",
    "advertised.host.name": "advertised.listeners",
}

# Kafka's topic-level keys that LogConfig models, and those that exist but are not log settings.
_LOG_TOPIC_KEYS: Final = frozenset(
    {
        "segment.bytes", "segment.ms", "segment.index.bytes", "index.interval.bytes",
        "max.message.bytes", "retention.ms", "retention.bytes", "cleanup.policy",
        "min.cleanable.dirty.ratio", "delete.retention.ms", "min.compaction.lag.ms",
        "max.compaction.lag.ms", "flush.messages", "flush.ms",
    }
)  # fmt: skip
_OTHER_TOPIC_KEYS: Final = frozenset(
    {
        "segment.jitter.ms", "file.delete.delay.ms", "unclean.leader.election.enable",
        "min.insync.replicas", "compression.type", "preallocate", "message.format.version",
        "message.timestamp.type", "message.timestamp.difference.max.ms",
        "message.downconversion.enable", "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    }
)  # fmt: skip

# The topic-level keys of _OTHER_TOPIC_KEYS that the replication core obeys per topic.
_REPLICATION_TOPIC_KEYS: Final = ("min.insync.replicas", "unclean.leader.election.enable")
_INT_TEXT: Final = re.compile(r"[+-]?[0-9]+")


def topic_replication_config(overrides: Mapping[str, str]) -> TopicConfig:
    """The replication settings a topic's config sets (`min.insync.replicas`,
    `unclean.leader.election.enable`), validated as Kafka's LogConfig does; keys the topic
    does not set stay None (the broker default applies). Raises ConfigError."""
    min_isr: int | None = None
    unclean: bool | None = None
    raw = overrides.get("min.insync.replicas")
    if raw is not None:
        text = str(raw).strip()
        if not _INT_TEXT.fullmatch(text) or not INT_MIN <= int(text) <= INT_MAX:
            raise ConfigError("min.insync.replicas", raw, "Not a number of type INT")
        min_isr = int(text)
        if min_isr < 1:
            raise ConfigError("min.insync.replicas", raw, "Value must be at least 1")
    raw = overrides.get("unclean.leader.election.enable")
    if raw is not None:
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise ConfigError("unclean.leader.election.enable", raw, "Expected value to be "
                              "either true or false")
        unclean = text == "true"
    return TopicConfig(min_insync_replicas=min_isr, unclean_leader_election_enable=unclean)


# Which broker key sets each LogConfig field (Kafka's KafkaServer.copyKafkaConfigToLog).
_BROKER_KEY_OF_LOG_FIELD: Final = {
    "segment_bytes": "log.segment.bytes",
    "segment_ms": "log.roll.ms",
    "segment_index_bytes": "log.index.size.max.bytes",
    "index_interval_bytes": "log.index.interval.bytes",
    "max_message_bytes": "message.max.bytes",
    "retention_ms": "log.retention.ms",
    "retention_bytes": "log.retention.bytes",
    "cleanup_policy": "log.cleanup.policy",
    "min_cleanable_dirty_ratio": "log.cleaner.min.cleanable.ratio",
    "delete_retention_ms": "log.cleaner.delete.retention.ms",
    "min_compaction_lag_ms": "log.cleaner.min.compaction.lag.ms",
    "max_compaction_lag_ms": "log.cleaner.max.compaction.lag.ms",
    "flush_messages": "log.flush.interval.messages",
    "flush_ms": "log.flush.interval.ms",
}


def is_ignored_key(key: str) -> bool:
    """True for Kafka keys hiwater accepts but does not use."""
    return key in _IGNORED_KEYS or key.startswith(_IGNORED_PREFIXES)


# ---------------------------------------------------------------------------------------
# BrokerConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    """A broker's `server.properties`, typed, with Kafka 2.6's defaults and validation.

    Field names are Kafka's keys with dots turned into underscores. Keys whose Kafka default is
    null hold None here and have an `effective_*` property with Kafka's fallback. Keys that are
    not modelled (ignored or unknown) are kept verbatim in `other_properties`."""

    # --- general / network
    broker_id: int = _required(_Int(0, INT_MAX))
    listeners: Listener = _key(_ListenerSpec(), Listener(host="127.0.0.1", port=9092))  # noqa: RUF009
    advertised_listeners: Listener | None = _key(_ListenerSpec(advertised=True), None)  # noqa: RUF009
    broker_rack: str | None = _key(_OptionalStr(), None)
    log_dirs: tuple[str, ...] = _key(_List(what="a comma list of directories"), (_LOG_DIR_DEFAULT,))
    socket_request_max_bytes: int = _key(_POSITIVE_INT, 100 * 1024 * 1024)
    message_max_bytes: int = _key(_NON_NEGATIVE_INT, 1024 * 1024 + 12)
    fetch_max_bytes: int = _key(_Int(1024, INT_MAX), 55 * 1024 * 1024)
    queued_max_requests: int = _key(_POSITIVE_INT, 500)
    connections_max_idle_ms: int = _key(_POSITIVE_LONG, 10 * 60 * 1000)
    max_connections: int = _key(_NON_NEGATIVE_INT, INT_MAX)
    max_connections_per_ip: int = _key(_NON_NEGATIVE_INT, INT_MAX)
    request_timeout_ms: int = _key(_POSITIVE_INT, 30_000)

    # --- ZooKeeper
    zookeeper_connect: ZooKeeperConnect = _required(_ZooKeeperSpec())  # noqa: RUF009
    zookeeper_session_timeout_ms: int = _key(_POSITIVE_INT, 18_000)
    zookeeper_connection_timeout_ms: int | None = _key(_OptionalInt(1, INT_MAX), None)

    # --- topics and replication
    num_partitions: int = _key(_POSITIVE_INT, 1)
    default_replication_factor: int = _key(_POSITIVE_INT, 1)
    min_insync_replicas: int = _key(_POSITIVE_INT, 1)
    unclean_leader_election_enable: bool = _key(_BOOL, False)
    auto_create_topics_enable: bool = _key(_BOOL, True)
    delete_topic_enable: bool = _key(_BOOL, True)
    replica_lag_time_max_ms: int = _key(_POSITIVE_LONG, 30_000)
    replica_fetch_wait_max_ms: int = _key(_NON_NEGATIVE_INT, 500)
    replica_fetch_min_bytes: int = _key(_NON_NEGATIVE_INT, 1)
    replica_fetch_max_bytes: int = _key(_NON_NEGATIVE_INT, 1024 * 1024)
    replica_fetch_response_max_bytes: int = _key(_NON_NEGATIVE_INT, 10 * 1024 * 1024)
    # Kafka allows 0; the replication core's fetch backoff timer must be positive.
    replica_fetch_backoff_ms: int = _key(_POSITIVE_INT, 1_000)
    replica_socket_timeout_ms: int = _key(_POSITIVE_INT, 30_000)
    replica_high_watermark_checkpoint_interval_ms: int = _key(_POSITIVE_LONG, 5_000)
    controller_socket_timeout_ms: int = _key(_POSITIVE_INT, 30_000)
    auto_leader_rebalance_enable: bool = _key(_BOOL, True)
    leader_imbalance_check_interval_seconds: int = _key(_POSITIVE_LONG, 300)
    leader_imbalance_per_broker_percentage: int = _key(_Int(0, 100), 10)
    controlled_shutdown_enable: bool = _key(_BOOL, True)
    controlled_shutdown_max_retries: int = _key(_NON_NEGATIVE_INT, 3)
    controlled_shutdown_retry_backoff_ms: int = _key(_NON_NEGATIVE_LONG, 5_000)

    # --- consumer groups and __consumer_offsets
    offsets_topic_num_partitions: int = _key(_POSITIVE_INT, 50)
    offsets_topic_replication_factor: int = _key(_Int(1, SHORT_MAX), 3)
    offsets_topic_segment_bytes: int = _key(_Int(14, INT_MAX), 100 * 1024 * 1024)
    offsets_commit_required_acks: int = _key(_Int(-1, SHORT_MAX), -1)
    offsets_commit_timeout_ms: int = _key(_POSITIVE_INT, 5_000)
    offsets_retention_minutes: int = _key(_POSITIVE_INT, 7 * 24 * 60)
    offsets_retention_check_interval_ms: int = _key(_POSITIVE_LONG, 600_000)
    offset_metadata_max_bytes: int = _key(_NON_NEGATIVE_INT, 4096)
    group_initial_rebalance_delay_ms: int = _key(_NON_NEGATIVE_INT, 3_000)
    group_min_session_timeout_ms: int = _key(_NON_NEGATIVE_INT, 6_000)
    group_max_session_timeout_ms: int = _key(_NON_NEGATIVE_INT, 1_800_000)
    group_max_size: int = _key(_POSITIVE_INT, INT_MAX)

    # --- client quotas (bytes/second; Long.MAX_VALUE = unlimited)
    quota_producer_default: int = _key(_POSITIVE_LONG, LONG_MAX)
    quota_consumer_default: int = _key(_POSITIVE_LONG, LONG_MAX)
    quota_window_num: int = _key(_POSITIVE_INT, 11)
    quota_window_size_seconds: int = _key(_POSITIVE_INT, 1)

    # --- log defaults (topic-level keys without the `log.` prefix override them per topic)
    log_segment_bytes: int = _key(_Int(14, INT_MAX), 1024 * 1024 * 1024)
    log_roll_ms: int | None = _key(_OptionalInt(1, LONG_MAX), None)
    log_roll_hours: int = _key(_POSITIVE_INT, 7 * 24)
    log_retention_ms: int | None = _key(_OptionalInt(LONG_MIN, LONG_MAX), None)
    log_retention_minutes: int | None = _key(_OptionalInt(INT_MIN, INT_MAX), None)
    log_retention_hours: int = _key(_Int(INT_MIN, INT_MAX), 7 * 24)
    log_retention_bytes: int = _key(_Int(-1, LONG_MAX), -1)
    log_retention_check_interval_ms: int = _key(_POSITIVE_LONG, 5 * 60 * 1000)
    log_cleanup_policy: tuple[str, ...] = _key(
        _List(_CLEANUP_POLICIES, "a comma list of compact and/or delete"), ("delete",)
    )
    log_cleaner_enable: bool = _key(_BOOL, True)
    log_cleaner_backoff_ms: int = _key(_NON_NEGATIVE_LONG, 15_000)
    log_cleaner_min_cleanable_ratio: float = _key(_Double(0.0, 1.0), 0.5)
    log_cleaner_delete_retention_ms: int = _key(_NON_NEGATIVE_LONG, 24 * 60 * 60 * 1000)
    log_cleaner_min_compaction_lag_ms: int = _key(_NON_NEGATIVE_LONG, 0)
    log_cleaner_max_compaction_lag_ms: int = _key(_POSITIVE_LONG, LONG_MAX)
    # Kafka allows 4; hiwater's offset index entries are 8 bytes.
    log_index_size_max_bytes: int = _key(_Int(8, INT_MAX), 10 * 1024 * 1024)
    log_index_interval_bytes: int = _key(_NON_NEGATIVE_INT, 4096)
    log_flush_interval_messages: int = _key(_POSITIVE_LONG, LONG_MAX)
    log_flush_interval_ms: int | None = _key(_OptionalInt(0, LONG_MAX), None)
    log_flush_scheduler_interval_ms: int = _key(_NON_NEGATIVE_LONG, LONG_MAX)
    log_flush_offset_checkpoint_interval_ms: int = _key(_NON_NEGATIVE_INT, 60_000)
    log_flush_start_offset_checkpoint_interval_ms: int = _key(_NON_NEGATIVE_INT, 60_000)

    # --- hiwater's own
    hiwater_bugs: tuple[str, ...] = _key(_Bugs(), ())
    # The broker's read-only replica-state endpoint (HTTP GET /replicas), off when unset.
    hiwater_admin_port: int | None = _key(_OptionalInt(0, 65535), None)
    # The broker's event loop: uvloop (libuv) or the standard library's asyncio. Unset: uvloop
    # when it can be imported, else asyncio (broker/runtime/main.py, bench/README.md "uvloop").
    hiwater_event_loop: str | None = _key(_OptionalChoice(("asyncio", "uvloop")), None)

    # Keys that are not modelled (ignored Kafka keys and unknown keys), sorted, verbatim.
    other_properties: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for f, spec in _specs():
            spec.check(_key_of(f), getattr(self, f.name))
        self._check_other_properties()
        self._check_cross_key_rules()
        self.log_config()  # raises ConfigError naming the broker key
        try:
            self.protocol_config()
            self.quota_config()
        except ValueError as e:
            raise ConfigError("server.properties", "(derived settings)", str(e)) from None

    def _check_other_properties(self) -> None:
        modelled = {_key_of(f) for f, _ in _specs()} | {"log.dir"} | set(_DEPRECATED_LISTENER_KEYS)
        for item in self.other_properties:
            if not (
                isinstance(item, tuple)
                and len(item) == 2
                and isinstance(item[0], str)
                and isinstance(item[1], str)
            ):
                raise ConfigError(
                    "other_properties", item, "expected (key, value) pairs of strings"
                )
            if item[0] in modelled:
                raise ConfigError(item[0], item[1], "a modelled key: set it as a field instead")

    def _check_cross_key_rules(self) -> None:
        """Kafka's KafkaConfig.validateValues, for the keys hiwater models."""
        if self.replica_fetch_wait_max_ms > self.replica_socket_timeout_ms:
            raise ConfigError(
                "replica.fetch.wait.max.ms",
                self.replica_fetch_wait_max_ms,
                f"must be <= replica.socket.timeout.ms ({self.replica_socket_timeout_ms}) "
                "to prevent unnecessary socket timeouts",
            )
        if self.replica_fetch_wait_max_ms > self.replica_lag_time_max_ms:
            raise ConfigError(
                "replica.fetch.wait.max.ms",
                self.replica_fetch_wait_max_ms,
                f"must be <= replica.lag.time.max.ms ({self.replica_lag_time_max_ms}) "
                "to prevent frequent changes in ISR",
            )
        if self.offsets_commit_required_acks > self.offsets_topic_replication_factor:
            raise ConfigError(
                "offsets.commit.required.acks",
                self.offsets_commit_required_acks,
                "must be -1 or in [0, offsets.topic.replication.factor "
                f"({self.offsets_topic_replication_factor})]",
            )
        if self.effective_log_retention_ms == 0:
            key, value = self._retention_source()
            raise ConfigError(key, value, "log retention must be unlimited (-1) or >= 1 ms")
        if self.advertised_listeners is None and self.listeners.host == "0.0.0.0":
            raise ConfigError(
                "advertised.listeners",
                None,
                "listeners binds 0.0.0.0, which cannot be advertised: set advertised.listeners "
                "to a routable PLAINTEXT://host:port",
                missing=True,
            )
        if (
            self.advertised_listeners is not None
            and self.advertised_listeners.name != self.listeners.name
        ):
            raise ConfigError(
                "advertised.listeners",
                str(self.advertised_listeners),
                f"its listener name must be one defined in listeners ({self.listeners.name})",
            )

    def _retention_source(self) -> tuple[str, int]:
        if self.log_retention_ms is not None:
            return "log.retention.ms", self.log_retention_ms
        if self.log_retention_minutes is not None:
            return "log.retention.minutes", self.log_retention_minutes
        return "log.retention.hours", self.log_retention_hours

    # --- Kafka's derived values

    @property
    def effective_advertised_listeners(self) -> Listener:
        """advertised.listeners, defaulting to listeners (its port may be 0: see
        `advertised_listener_for`)."""
        return self.advertised_listeners or self.listeners

    def advertised_listener_for(self, bound_port: int) -> Listener:
        """The listener to advertise once the socket is bound: port 0 becomes the bound port."""
        listener = self.effective_advertised_listeners
        return listener.with_port(bound_port) if listener.port == 0 else listener

    @property
    def effective_zookeeper_connection_timeout_ms(self) -> int:
        """zookeeper.connection.timeout.ms, defaulting to zookeeper.session.timeout.ms."""
        if self.zookeeper_connection_timeout_ms is None:
            return self.zookeeper_session_timeout_ms
        return self.zookeeper_connection_timeout_ms

    @property
    def effective_log_roll_ms(self) -> int:
        """log.roll.ms, else log.roll.hours."""
        if self.log_roll_ms is not None:
            return self.log_roll_ms
        return self.log_roll_hours * 60 * 60 * 1000

    @property
    def effective_log_retention_ms(self) -> int:
        """Kafka's precedence log.retention.ms > log.retention.minutes > log.retention.hours;
        any negative value means unlimited (-1)."""
        if self.log_retention_ms is not None:
            millis = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            millis = self.log_retention_minutes * 60 * 1000
        else:
            millis = self.log_retention_hours * 60 * 60 * 1000
        return -1 if millis < 0 else min(millis, LONG_MAX)

    @property
    def effective_log_flush_interval_ms(self) -> int:
        """log.flush.interval.ms, else log.flush.scheduler.interval.ms."""
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    @property
    def unknown_keys(self) -> tuple[str, ...]:
        """Keys neither Kafka (as far as hiwater knows) nor hiwater uses: likely typos."""
        return tuple(k for k, _ in self.other_properties if not is_ignored_key(k))

    @property
    def ignored_keys(self) -> tuple[str, ...]:
        """Kafka keys accepted and not used by hiwater."""
        return tuple(k for k, _ in self.other_properties if is_ignored_key(k))

    # --- views for the other components

    def log_config(self) -> LogConfig:
        """The broker-wide log defaults as topic-level LogConfig (Kafka's copyKafkaConfigToLog)."""
        try:
            return LogConfig.from_properties(self._topic_log_properties())
        except InvalidConfigError as e:
            # The broker key behind the topic key LogConfig's message names first.
            found = [
                (str(e).find(f.replace("_", ".")), broker_key)
                for f, broker_key in _BROKER_KEY_OF_LOG_FIELD.items()
                if f.replace("_", ".") in str(e)
            ]
            key = min(found)[1] if found else "log config"
            value = getattr(self, key.replace(".", "_"), "(derived settings)")
            raise ConfigError(key, value, f"the log settings are inconsistent: {e}") from None

    def topic_log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        """The log config of a topic with per-topic overrides (Kafka topic keys: `segment.bytes`,
        `retention.ms`, `cleanup.policy`...) on top of the broker defaults.

        Topic keys that exist in Kafka but are not log settings (`min.insync.replicas`,
        `compression.type`, ...) are skipped; the replication ones are validated here (see
        `topic_replication_config`, which the core gets); an unknown key is an error, as in
        Kafka."""
        topic_replication_config(overrides)
        props = self._topic_log_properties()
        for key, value in overrides.items():
            if key in _LOG_TOPIC_KEYS:
                try:
                    LogConfig.from_properties({key: value})
                except InvalidConfigError as e:
                    raise ConfigError(key, value, str(e)) from None
                props[key] = value
            elif key not in _OTHER_TOPIC_KEYS:
                raise ConfigError(
                    key,
                    value,
                    f"unknown topic config; log keys are {', '.join(sorted(_LOG_TOPIC_KEYS))}",
                )
        try:
            return LogConfig.from_properties(props)
        except InvalidConfigError as e:
            raise ConfigError("topic config", dict(overrides), str(e)) from None

    def offsets_topic_overrides(self) -> dict[str, str]:
        """The topic configs Kafka gives `__consumer_offsets` (GroupMetadataManager)."""
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.offsets_topic_segment_bytes),
            "compression.type": "producer",
        }

    def _topic_log_properties(self) -> dict[str, str | int | float]:
        compact = "compact" in self.log_cleanup_policy
        delete = "delete" in self.log_cleanup_policy
        policy = "compact,delete" if compact and delete else ("compact" if compact else "delete")
        return {
            "segment.bytes": self.log_segment_bytes,
            "segment.ms": self.effective_log_roll_ms,
            "segment.index.bytes": self.log_index_size_max_bytes,
            "index.interval.bytes": self.log_index_interval_bytes,
            "max.message.bytes": self.message_max_bytes,
            "retention.ms": self.effective_log_retention_ms,
            "retention.bytes": self.log_retention_bytes,
            "cleanup.policy": policy,
            "min.cleanable.dirty.ratio": float(self.log_cleaner_min_cleanable_ratio),
            "delete.retention.ms": self.log_cleaner_delete_retention_ms,
            "min.compaction.lag.ms": self.log_cleaner_min_compaction_lag_ms,
            "max.compaction.lag.ms": self.log_cleaner_max_compaction_lag_ms,
            "flush.messages": self.log_flush_interval_messages,
            "flush.ms": self.effective_log_flush_interval_ms,
        }

    def protocol_config(self) -> ProtocolConfig:
        """The settings the replication core obeys."""
        return ProtocolConfig(
            min_insync_replicas=self.min_insync_replicas,
            unclean_leader_election_enable=self.unclean_leader_election_enable,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            replica_fetch_backoff_ms=self.replica_fetch_backoff_ms,
            # The core's follower waits `replica_fetch_wait_max_ms` after an EMPTY fetch before
            # sending the next one: that is how the model checker abstracts Kafka's long poll.
            # In the live broker the long poll is real: the leader parks an empty follower fetch
            # for up to replica.fetch.wait.max.ms (Kafka's DelayedFetch) and answers as soon as
            # data arrives. Waiting again on the follower side would double the replication
            # latency of every idle-then-busy partition, so the core's wait must be 0 here; the
            # real value stays on BrokerConfig.replica_fetch_wait_max_ms for the fetch request's
            # max_wait_ms.
            replica_fetch_wait_max_ms=0,
            # ... and with no wait at all, the next fetch leaves in the step that handled the
            # response: one core step per fetch round on the follower, not two.
            fetch_in_response_step=True,
            request_timeout_ms=self.request_timeout_ms,
            auto_leader_rebalance_enable=self.auto_leader_rebalance_enable,
            leader_imbalance_check_interval_seconds=self.leader_imbalance_check_interval_seconds,
            bugs=Bugs(**dict.fromkeys(self.hiwater_bugs, True)),
        )

    def quota_config(self) -> QuotaConfig:
        """The client byte-rate quota settings (see broker.quotas.QuotaManager)."""
        return QuotaConfig(
            quota_producer_default=self.quota_producer_default,
            quota_consumer_default=self.quota_consumer_default,
            quota_window_num=self.quota_window_num,
            quota_window_size_seconds=self.quota_window_size_seconds,
        )

    # --- construction and serialisation

    @classmethod
    def from_file(cls, path: str | Path) -> BrokerConfig:
        return cls.from_properties(load_properties(path))

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> BrokerConfig:
        """Build from Kafka keys. Unknown keys are kept and logged as a warning, as Kafka does."""
        text = {k: _as_text(v) for k, v in props.items()}
        for key, replacement in _DEPRECATED_LISTENER_KEYS.items():
            if key in text:
                raise ConfigError(
                    key,
                    text[key],
                    f"this deprecated Kafka key is not supported; use {replacement}=PLAINTEXT://host:port",
                )
        for key in _PLAINTEXT_ONLY_KEYS:
            if key in text and text[key].strip().upper() != "PLAINTEXT":
                raise ConfigError(
                    key, text[key], "hiwater supports only PLAINTEXT (no SSL or SASL)"
                )
        if "log.dirs" not in text and "log.dir" in text:
            text["log.dirs"] = text["log.dir"]  # Kafka: log.dirs wins, log.dir is the fallback
        text.pop("log.dir", None)
        values: dict[str, object] = {}
        for f, spec in _specs():
            key = _key_of(f)
            if key in text:
                values[f.name] = spec.parse(key, text.pop(key))
            elif f.default is dataclasses.MISSING:
                hint = _REQUIRED_HINT.get(key, "it has no default")
                raise ConfigError(key, None, hint, missing=True)
        other = tuple(sorted(text.items()))
        config = cls(**values, other_properties=other)  # type: ignore[arg-type]
        if config.unknown_keys:
            log.warning(
                "server.properties: unknown keys (ignored, as Kafka ignores them): %s",
                ", ".join(config.unknown_keys),
            )
        if config.ignored_keys:
            log.info(
                "server.properties: Kafka keys hiwater does not use: %s",
                ", ".join(config.ignored_keys),
            )
        return config

    def with_overrides(self, **changes: object) -> BrokerConfig:
        """A copy with some keys changed. Names are field names (`log_retention_ms`) or, through
        `**{...}`, Kafka keys (`log.retention.ms`); values are typed or Kafka text."""
        specs = {f.name: (f, spec) for f, spec in _specs()}
        values: dict[str, object] = {}
        for name, value in changes.items():
            attr = name.replace(".", "_")
            if attr == "other_properties":
                values[attr] = value
                continue
            if attr not in specs:
                raise ConfigError(
                    name, value, "not a BrokerConfig key (use field names like log_retention_ms)"
                )
            f, spec = specs[attr]
            values[attr] = spec.coerce(_key_of(f), value)
        return dataclasses.replace(self, **values)  # type: ignore[arg-type]

    def to_properties(self) -> dict[str, str]:
        """Every key with its value as Kafka text; `from_properties` of it gives back `self`."""
        props: dict[str, str] = {}
        for f, spec in _specs():
            value = getattr(self, f.name)
            if value is not None:
                props[_key_of(f)] = spec.format(value)
        props.update(self.other_properties)
        return props

    def to_file(self, path: str | Path) -> None:
        text = format_properties(self.to_properties(), header="written by hiwater BrokerConfig")
        Path(path).write_bytes(text.encode("latin-1"))


_REQUIRED_HINT: Final = {
    "broker.id": "an integer >= 0 that is unique in the cluster",
    "zookeeper.connect": "host:port[,host:port...][/chroot], e.g. 127.0.0.1:2181/hiwater",
}


def _as_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _key_of(f: dataclasses.Field[object]) -> str:
    return f.name.replace("_", ".")


def _specs() -> Iterator[tuple[dataclasses.Field[object], _Spec]]:
    for f in dataclasses.fields(BrokerConfig):
        spec = f.metadata.get("spec")
        if isinstance(spec, _Spec):
            yield f, spec
