"""What a `Runtime` hands out besides faults: a clock and the workload's clients.

- `Runtime.clock()`: a `nemesis.port.Clock`. Live runtimes give the wall clock; the simulator
  (`harness.sim.runtime.SimRuntime`) gives simulated time, where waiting runs the simulation.
  The nemesis runner and the campaign's deadlines read time through it.
- `Runtime.clients()`: a `Clients`, one of two kinds, told apart by `kind`:
  - `KafkaClients` (every live runtime): Kafka-protocol clients of the cluster at
    `bootstrap` (librdkafka or kafka-python, `harness.clients.open_client`), blocking, one
    thread per Jepsen process (`harness.workloads`);
  - `harness.sim.runtime.SimClients` (the simulator): simulated clients on the simulated
    network, event-driven on the simulator's scheduler, running the same workloads' operations
    and writing the same history format (`harness.sim.run.Workload`).
  They are two kinds, not one interface: a blocking client cannot run inside a one-thread
  deterministic simulation, and the simulator's clients have no sockets. What they share is the
  history they produce, which the same checkers judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

if TYPE_CHECKING:
    from harness.clients.base import ClientSettings, QueueClient, TopicRegistry
    from harness.sim.runtime import SimClients


@dataclass(frozen=True)
class KafkaClients:
    """Kafka-protocol clients of a live cluster: where they connect and how one is opened."""

    bootstrap: str
    kind: Literal["kafka"] = "kafka"

    def queue_client(self, name: str, settings: ClientSettings, process: int,
                     topics: TopicRegistry) -> QueueClient:
        """A fresh queue client (one Jepsen process) of library `name` connected to this
        cluster (the workload's `client_factory`)."""
        from harness.clients import open_client

        return open_client(name, settings.with_bootstrap(self.bootstrap), process, topics)


Clients: TypeAlias = "KafkaClients | SimClients"

__all__ = ["Clients", "KafkaClients"]
