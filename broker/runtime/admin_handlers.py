"""DescribeConfigs (API 32, v1-4): a topic's or this broker's configuration, as Kafka reports it.

Kafka's ``ConfigHelper.describeConfigs`` for the ZooKeeper-era broker, for the two resource
types hiwater has:

* **TOPIC** (2): every topic config hiwater knows (the log settings it models, plus
  ``min.insync.replicas``, ``unclean.leader.election.enable``, ``compression.type`` and
  ``message.timestamp.type``), with its effective value.  A key the topic overrides (its
  ``/config/topics/<t>`` znode, as CreateTopics stored it; ``__consumer_offsets`` also gets the
  overrides Kafka gives it) has source DYNAMIC_TOPIC_CONFIG (Kafka's ``TOPIC_CONFIG``); else the
  source is the first broker synonym set in ``server.properties`` (STATIC_BROKER_CONFIG), else
  DEFAULT_CONFIG.  Topic configs are not read-only (as Kafka reports them).  A topic nobody
  knows is UNKNOWN_TOPIC_OR_PARTITION, an illegal name INVALID_TOPIC_EXCEPTION, per resource.
* **BROKER** (4): every Kafka key ``BrokerConfig`` models and every ignored Kafka key the file
  sets (hiwater's own ``hiwater.*`` keys are not Kafka's and are left out); read-only, since
  there is no AlterConfigs.  A key is STATIC_BROKER_CONFIG when its value differs from Kafka's
  default (``BrokerConfig`` does not remember which keys the file spelled out, so a key set to
  its default value reads as DEFAULT_CONFIG), else DEFAULT_CONFIG.  The resource name must be
  this broker's id (or "" for the cluster-wide dynamic defaults, of which there are none);
  another id is INVALID_REQUEST, as Kafka answers.

Other resource types are INVALID_REQUEST.  ``configuration_keys`` (null: all) filters by name.
A failure to read ZooKeeper (or a broker still starting) is UNKNOWN_SERVER_ERROR for the topic,
as Kafka answers an unexpected failure.
Synonyms (v1+, when asked): the topic override first, then each broker synonym in Kafka's
precedence order (``DynamicBrokerConfig.brokerConfigSynonyms``) as set in the file, then their
defaults; for a broker key, those after its own name.  ``config_type`` (v3+) is Kafka's
``ConfigType``; there is no documentation (null).  Passwords (ignored SSL/SASL keys) are
sensitive: their value is null.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.config import BrokerConfig
from broker.wire import Request, build, encode_response, request_fields, response_class

if TYPE_CHECKING:
    from broker.runtime.server import Broker

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")

# ConfigResource.Type
TOPIC, BROKER = 2, 4
# ConfigSource (DescribeConfigsResponse config_source / synonym source)
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# ConfigType (DescribeConfigsResponse v3+ config_type)
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 9

INT_MAX = 2**31 - 1
SHORT_MAX = 2**15 - 1


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerValue:
    """One broker key: its value as Kafka text (None: null), whether it differs from Kafka's
    default (then it was set in server.properties), the default, and Kafka's type."""

    value: str | None
    static: bool
    default: str | None
    type: int
    sensitive: bool = False
    modelled: bool = True  # False: an ignored Kafka key, whose default hiwater does not know


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    type: int
    synonyms: tuple[tuple[str, str | None, int], ...]  # (name, value, source)


# Kafka's DynamicBrokerConfig.brokerConfigSynonyms (highest precedence first).
_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
)

# Topic key -> (broker key it falls back to, Kafka type, Kafka default where hiwater does not
# model the broker key). LogConfig.TopicConfigSynonyms for the keys hiwater knows.
_TOPIC_KEYS: dict[str, tuple[str, int, str | None]] = {
    "cleanup.policy": ("log.cleanup.policy", LIST, None),
    "compression.type": ("compression.type", STRING, "producer"),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", LONG, None),
    "flush.messages": ("log.flush.interval.messages", LONG, None),
    "flush.ms": ("log.flush.interval.ms", LONG, None),
    "index.interval.bytes": ("log.index.interval.bytes", INT, None),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms", LONG, None),
    "max.message.bytes": ("message.max.bytes", INT, None),
    "message.timestamp.type": ("log.message.timestamp.type", STRING, "CreateTime"),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio", DOUBLE, None),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms", LONG, None),
    "min.insync.replicas": ("min.insync.replicas", INT, None),
    "retention.bytes": ("log.retention.bytes", LONG, None),
    "retention.ms": ("log.retention.ms", LONG, None),
    "segment.bytes": ("log.segment.bytes", INT, None),
    "segment.index.bytes": ("log.index.size.max.bytes", INT, None),
    "segment.ms": ("log.roll.ms", LONG, None),
    "unclean.leader.election.enable": ("unclean.leader.election.enable", BOOLEAN, None),
}

# Topic values derived from several broker keys (KafkaServer.copyKafkaConfigToLog).
_DERIVED: dict[str, Callable[[BrokerConfig], int]] = {
    "retention.ms": lambda c: c.effective_log_retention_ms,
    "segment.ms": lambda c: c.effective_log_roll_ms,
    "flush.ms": lambda c: c.effective_log_flush_interval_ms,
}


def _sensitive(key: str) -> bool:
    return "password" in key or key.endswith(".jaas.config") or key.endswith(".key")


def _spec_type(spec: Any) -> int:
    kind = type(spec).__name__
    if kind == "_Bool":
        return BOOLEAN
    if kind == "_Double":
        return DOUBLE
    if kind == "_List":
        return LIST
    high = getattr(spec, "high", None)
    if isinstance(high, int):
        return LONG if high > INT_MAX else SHORT if high == SHORT_MAX else INT
    return STRING


def broker_values(config: BrokerConfig) -> dict[str, BrokerValue]:
    """Every Kafka key of this broker (sorted): modelled keys, then the ignored keys set."""
    out: dict[str, BrokerValue] = {}
    for f in dataclasses.fields(config):
        spec = f.metadata.get("spec")
        key = f.name.replace("_", ".")
        if spec is None or key.startswith("hiwater."):
            continue
        value = getattr(config, f.name)
        default = f.default
        text = None if value is None else spec.format(value)
        default_text = None if default is None else spec.format(default)
        out[key] = BrokerValue(text, value != default, default_text, _spec_type(spec))
    for key, value in config.other_properties:
        if key not in config.ignored_keys:
            continue  # unknown to Kafka too: not described
        secret = _sensitive(key)
        out[key] = BrokerValue(None if secret else value, True, None,
                               PASSWORD if secret else STRING, secret, modelled=False)
    return dict(sorted(out.items()))


def _broker_synonyms(key: str, values: Mapping[str, BrokerValue]
                     ) -> list[tuple[str, str | None, int]]:
    """``configSynonyms``: the settings in server.properties, then the defaults, of `key` and
    the synonyms of lower precedence (a broker key is not described by those above it)."""
    group: tuple[str, ...] = next((g for g in _SYNONYM_GROUPS if key in g), (key,))
    group = group[group.index(key):]
    found = [(k, values[k].value, STATIC_BROKER_CONFIG) for k in group
             if k in values and values[k].static]
    found += [(k, values[k].default, DEFAULT_CONFIG) for k in group
              if k in values and values[k].modelled]
    return found


def broker_entries(config: BrokerConfig) -> list[ConfigEntry]:
    values = broker_values(config)
    out = []
    for key, v in values.items():
        synonyms = _broker_synonyms(key, values)
        source = synonyms[0][2] if synonyms else (STATIC_BROKER_CONFIG if v.static
                                                   else DEFAULT_CONFIG)
        out.append(ConfigEntry(key, v.value, source, True, v.sensitive, v.type,
                               tuple(synonyms)))
    return out


def topic_entries(config: BrokerConfig, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """The topic's configs: its overrides on top of this broker's settings."""
    values = broker_values(config)
    out = []
    for key, (broker_key, kind, kafka_default) in sorted(_TOPIC_KEYS.items()):
        synonyms = _broker_synonyms(broker_key, values) if broker_key in values else []
        if key in overrides:
            value: str | None = overrides[key]
            synonyms.insert(0, (key, value, DYNAMIC_TOPIC_CONFIG))
        elif key in _DERIVED:
            value = str(_DERIVED[key](config))
        elif broker_key in values:
            value = values[broker_key].value
        else:
            value = kafka_default
        if broker_key not in values and key not in overrides and kafka_default is not None:
            synonyms.append((broker_key, kafka_default, DEFAULT_CONFIG))
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        out.append(ConfigEntry(key, value, source, False, False, kind, tuple(synonyms)))
    return out


def _result(rtype: int, name: str, code: int = 0, message: str | None = None,
            entries: list[ConfigEntry] | None = None, keys: Any = None,
            synonyms: bool = False) -> dict[str, Any]:
    wanted = None if keys is None else set(keys)
    return {
        "error_code": ErrorCode(code), "error_message": message, "resource_type": rtype,
        "resource_name": name,
        "configs": [{
            "name": e.name, "value": e.value, "read_only": e.read_only,
            "config_source": e.source, "is_sensitive": e.sensitive, "config_type": e.type,
            "documentation": None,
            "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in e.synonyms]
            if synonyms else [],
        } for e in entries or () if wanted is None or e.name in wanted],
    }


async def describe_configs(broker: Broker, req: Request) -> bytes:
    """The DescribeConfigs response frame for `req`."""
    body = request_fields(req)
    synonyms = bool(getattr(body, "include_synonyms", False))
    results = []
    for r in body.resources:
        rtype, name = int(r.resource_type), str(r.resource_name)
        keys = r.configuration_keys
        if rtype == TOPIC:
            results.append(await _describe_topic(broker, name, keys, synonyms))
        elif rtype == BROKER:
            results.append(_describe_broker(broker, name, keys, synonyms))
        else:
            results.append(_result(rtype, name, 42, f"Unsupported resource type: {rtype}"))
    cls = response_class(req.api_key, req.api_version)
    return encode_response(req.correlation_id, build(cls, {
        "throttle_time": datetime.timedelta(0), "results": results}))


def _describe_broker(broker: Broker, name: str, keys: Any, synonyms: bool) -> dict[str, Any]:
    if name == "":
        return _result(BROKER, name, entries=[], keys=keys)  # no dynamic cluster defaults
    if re.fullmatch(r"-?[0-9]{1,10}", name) is None:
        return _result(BROKER, name, 42, f"Broker id must be an integer, but it is: {name}")
    if int(name) != broker.broker_id:
        return _result(BROKER, name, 42, f"Unexpected broker id, expected {broker.broker_id} "
                       f"or empty string, but received {name}")
    return _result(BROKER, name, entries=broker_entries(broker.config), keys=keys,
                   synonyms=synonyms)


async def _describe_topic(broker: Broker, name: str, keys: Any, synonyms: bool
                          ) -> dict[str, Any]:
    if not TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        return _result(TOPIC, name, 17, f"Topic name '{name}' is illegal")
    if broker.zkd is None or broker.zk is None or not broker.cluster_id:
        # still starting: ZooKeeper not reached yet (cluster_id is read right after)
        return _result(TOPIC, name, -1, "The broker is starting: try again.")
    known = name in broker.apis.topics_view() or name in await broker.zk_topics()
    if not known:
        return _result(TOPIC, name, 3, f"The topic '{name}' does not exist.")
    zk = broker.zk
    try:
        stored = await broker.zkd.call(lambda: zk.topic_config(name))
    except Exception as e:
        log.warning("config of topic %s unavailable: %s", name, e)
        return _result(TOPIC, name, -1, f"The config of topic '{name}' is unavailable: {e}")
    overrides = dict(stored)
    if name == OFFSETS_TOPIC:
        overrides = {**broker.config.offsets_topic_overrides(), **overrides}
    return _result(TOPIC, name, entries=topic_entries(broker.config, overrides), keys=keys,
                   synonyms=synonyms)
