"""Cluster runtimes behind one interface (`Runtime`): local processes and existing clusters.
Every runtime satisfies the nemesis's port, `nemesis.port.Cluster`."""

from harness.runtime.base import (
    ZOOKEEPER_NODE,
    BrokerState,
    ClusterRuntimeError,
    FaultReport,
    FaultUnsupported,
    Grudge,
    NodeStateError,
    ReplicaState,
    Runtime,
    complete_grudge,
    node_id,
    node_name,
    normalize_grudge,
)

__all__ = [
    "ZOOKEEPER_NODE",
    "BrokerState",
    "ClusterRuntimeError",
    "FaultReport",
    "FaultUnsupported",
    "Grudge",
    "NodeStateError",
    "ReplicaState",
    "Runtime",
    "complete_grudge",
    "node_id",
    "node_name",
    "normalize_grudge",
]
