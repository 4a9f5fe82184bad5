"""hiwater's replication core: Kafka's ZooKeeper-era replication protocol as a pure function.

`step(state, event) -> (state, effects)`; no I/O, clock, randomness, logging or threads.
"""

from core.config import Bugs, ProtocolConfig
from core.node import BrokerState, DurableReplica, init, recover, step

__all__ = ["BrokerState", "Bugs", "DurableReplica", "ProtocolConfig", "init", "recover", "step"]
