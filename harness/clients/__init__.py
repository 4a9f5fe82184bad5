"""Queue clients with Jepsen's semantics over real Kafka clients.

    from harness.clients import open_client, ClientSettings
    c = open_client("confluent", ClientSettings(bootstrap=...), process=0)
    c.invoke("send", [["send", 3, 1]])        # Completion(type="ok", value=[["send", 3, [0, 1]]])
    c.close()

`confluent` (confluent-kafka / librdkafka) is the primary client, `kafka-python` the second.
The error table and the shared `invoke` are in `harness.clients.base`.
"""

from __future__ import annotations

from harness.clients.base import (
    DEFINITE_KINDS,
    ERROR_TABLE,
    INDEFINITE_KINDS,
    Classified,
    ClientSettings,
    Completion,
    KeyMap,
    QueueClient,
    TopicRegistry,
    classify_kind,
)

CLIENTS = ("confluent", "kafka-python")

__all__ = [
    "CLIENTS",
    "DEFINITE_KINDS",
    "ERROR_TABLE",
    "INDEFINITE_KINDS",
    "Classified",
    "ClientSettings",
    "Completion",
    "KeyMap",
    "QueueClient",
    "TopicRegistry",
    "classify_kind",
    "open_client",
]


def open_client(name: str, settings: ClientSettings, process: int,
                topics: TopicRegistry | None = None) -> QueueClient:
    """A fresh client (one Jepsen process) of library `name`."""
    if name == "confluent":
        from harness.clients.confluent import ConfluentClient

        return ConfluentClient(settings, process, topics)
    if name in ("kafka-python", "kafka_python"):
        from harness.clients.kafka_python import KafkaPythonClient

        return KafkaPythonClient(settings, process, topics)
    raise ValueError(f"unknown client {name!r}; one of {CLIENTS}")
