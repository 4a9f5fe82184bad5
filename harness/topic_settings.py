"""The replication settings the brokers actually obeyed, per topic, read back from the cluster.

Each broker's `GET /replicas` row says, per partition, the `min_insync_replicas` and
`unclean_leader_election_enable` it applies there (the topic's `/config/topics/<t>` value,
else the broker default) and the topic's own overrides (`topic_config`). Only leaders' rows
count: a leader has processed a LeaderAndIsr, before which its broker loaded the topic's
config, and it is the leader that enforces min.insync.replicas for acks=all. A campaign
records the result in results.json (`topic_settings`) and the report shows it, so a run's
verdict is read against the settings the cluster used, not the ones the options asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

KEYS = ("min_insync_replicas", "unclean_leader_election_enable")
MAX_TOPICS = 1000  # a bound on what is kept (DESIGN rule 9)


class TopicSettings:
    """Collects, per topic accepted by `wanted`, every value the leaders reported."""

    def __init__(self, wanted: Callable[[str], bool]) -> None:
        self.wanted = wanted
        self._seen: dict[str, dict[str, set[Any]]] = {}
        self._overrides: dict[str, set[tuple[tuple[str, Any], ...]]] = {}
        self._brokers: dict[str, set[int]] = {}
        self._samples: dict[str, int] = {}

    def add(self, sample: Mapping[str, Any]) -> None:
        """One broker's `GET /replicas` answer."""
        broker = sample.get("broker_id")
        for r in sample.get("replicas", ()):
            topic = r.get("topic")
            if (not isinstance(topic, str) or r.get("role") != "leader"
                    or KEYS[0] not in r or not self.wanted(topic)):
                continue
            if topic not in self._seen and len(self._seen) >= MAX_TOPICS:
                continue
            seen = self._seen.setdefault(topic, {k: set() for k in KEYS})
            for k in KEYS:
                seen[k].add(r[k])
            overrides = r.get("topic_config") or {}
            self._overrides.setdefault(topic, set()).add(tuple(sorted(overrides.items())))
            if isinstance(broker, int):
                self._brokers.setdefault(topic, set()).add(broker)
            self._samples[topic] = self._samples.get(topic, 0) + 1

    def add_all(self, samples: Iterable[Mapping[str, Any]]) -> None:
        for s in samples:
            self.add(s)

    def __bool__(self) -> bool:
        return any(self.wanted(t) for t in self._seen)

    def result(self) -> dict[str, dict[str, Any]]:
        """topic -> the effective values (one value, or the sorted list of the values seen
        when they differed), the topic's overrides, the leaders sampled and the row count."""
        out: dict[str, dict[str, Any]] = {}
        for topic in sorted(self._seen):
            if not self.wanted(topic):
                continue
            row: dict[str, Any] = {}
            for k in KEYS:
                values = sorted(self._seen[topic][k], key=repr)
                row[k] = values[0] if len(values) == 1 else values
            overrides = sorted(self._overrides.get(topic, set()))
            row["topic_config"] = (dict(overrides[0]) if len(overrides) == 1
                                   else [dict(o) for o in overrides])
            row["leaders"] = sorted(self._brokers.get(topic, set()))
            row["samples"] = self._samples.get(topic, 0)
            row["consistent"] = all(len(self._seen[topic][k]) == 1 for k in KEYS)
            out[topic] = row
        return out


def sample_cluster(runtime: Any, settings: TopicSettings, timeout_s: float = 2.0) -> int:
    """Read `GET /replicas` of every node once into `settings`; returns how many answered."""
    answered = 0
    for node in list(getattr(runtime, "nodes", ())):
        try:
            s = runtime.replica_states(node, timeout_s=timeout_s)
        except Exception:
            continue  # down, paused or partitioned
        answered += 1
        settings.add(s)
    return answered
