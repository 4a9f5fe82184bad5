"""Cluster runtimes behind one interface (`Runtime`): local processes and existing clusters."""

from harness.runtime.base import (
    ZOOKEEPER_NODE,
    ClusterRuntimeError,
    FaultUnsupported,
    Grudge,
    NodeStateError,
    Runtime,
    complete_grudge,
    node_id,
    node_name,
    normalize_grudge,
)

__all__ = [
    "ZOOKEEPER_NODE",
    "ClusterRuntimeError",
    "FaultUnsupported",
    "Grudge",
    "NodeStateError",
    "Runtime",
    "complete_grudge",
    "node_id",
    "node_name",
    "normalize_grudge",
]
