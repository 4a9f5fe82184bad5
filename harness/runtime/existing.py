"""`ExistingClusterRuntime`: a Kafka-protocol cluster the user runs (Kafka, Redpanda, ...).

It only knows the bootstrap servers. Nothing is started or stopped, and every fault raises
`FaultUnsupported` (the campaign then runs its workload with no nemesis). `leader_of` and
`controller` ask the cluster with a Metadata request (kafka-python). Using this runtime is an
explicit choice of the user (bootstrap servers on the command line), never a test default.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from harness.runtime.base import BrokerState, FaultReport, FaultUnsupported, Grudge, Runtime

REASON = "an existing cluster is only reached through its bootstrap servers"


def _first(d: Mapping[str, Any], *keys: str) -> Any:
    for k in keys:
        if k in d:
            return d[k]
    raise KeyError(f"none of {keys} in {sorted(d)}")


class ExistingClusterRuntime(Runtime):
    zookeeper_node = None

    def __init__(self, bootstrap: str, *, request_timeout_ms: int = 5000) -> None:
        hosts = [h.strip() for h in bootstrap.split(",") if h.strip()]
        if not hosts or any(":" not in h for h in hosts):
            raise ValueError(f"bootstrap must be host:port[,host:port...], not {bootstrap!r}")
        self._bootstrap = ",".join(hosts)
        self.request_timeout_ms = request_timeout_ms
        self._nodes: tuple[str, ...] = ()
        self.last_error: str | None = None

    def start(self) -> ExistingClusterRuntime:
        return self

    def stop(self) -> None:
        return None

    @property
    def bootstrap(self) -> str:
        return self._bootstrap

    @property
    def nodes(self) -> tuple[str, ...]:
        """`n<broker id>` of the brokers the cluster's metadata lists (empty if unreachable)."""
        if not self._nodes:
            try:
                md = self._metadata()
                self._nodes = tuple(f"n{b}" for b in sorted(md["brokers"]))
            except Exception as e:
                self.last_error = f"{type(e).__name__}: {e}"
                return ()
        return self._nodes

    def capabilities(self) -> dict[str, str | None]:
        return {f: REASON for f in ("kill", "start", "stop", "pause", "resume", "wipe",
                                    "lose-unflushed", "corrupt", "partition",
                                    "isolate-from-zookeeper", "toxic")}

    def _metadata(self) -> dict[str, Any]:
        """Brokers, controller and topic leaders through kafka-python's admin client (key
        names differ across kafka-python versions; both spellings are read)."""
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self._bootstrap,
                                 request_timeout_ms=self.request_timeout_ms,
                                 client_id="hiwater-runtime")
        try:
            cluster = admin.describe_cluster()
            topics = admin.describe_topics()
        finally:
            admin.close()
        leaders: dict[tuple[str, int], int] = {}
        for t in topics:
            name = _first(t, "topic", "name")
            for p in t.get("partitions", ()):
                leaders[(str(name), int(_first(p, "partition", "partition_index")))] = int(
                    _first(p, "leader", "leader_id"))
        return {
            "brokers": [int(_first(b, "node_id", "broker_id", "nodeId"))
                        for b in cluster.get("brokers", ())],
            "controller_id": int(cluster.get("controller_id", -1)),
            "leaders": leaders,
        }

    def is_running(self, node: str) -> bool:
        return node in self.nodes

    def is_paused(self, node: str) -> bool:
        return False

    def replica_states(self, node: str, timeout_s: float = 2.0) -> BrokerState:
        self._unsupported("replica-states")

    def leader_of(self, topic: str, partition: int) -> str | None:
        leader = self._metadata()["leaders"].get((topic, partition), -1)
        return f"n{leader}" if leader >= 0 else None

    def controller(self) -> str | None:
        cid = self._metadata()["controller_id"]
        return f"n{cid}" if cid >= 0 else None

    def collect_logs(self, run_dir: Path) -> list[Path]:
        return []

    @staticmethod
    def _unsupported(fault: str) -> NoReturn:
        raise FaultUnsupported(fault, REASON)

    def kill(self, node: str) -> FaultReport:
        self._unsupported("kill")

    def start_node(self, node: str) -> FaultReport:
        self._unsupported("start")

    def stop_node(self, node: str) -> FaultReport:
        self._unsupported("stop")

    def pause(self, node: str) -> FaultReport:
        self._unsupported("pause")

    def resume(self, node: str) -> FaultReport:
        self._unsupported("resume")

    def wipe(self, node: str) -> FaultReport:
        self._unsupported("wipe")

    def lose_unflushed(self, node: str) -> FaultReport:
        self._unsupported("lose-unflushed")

    def corrupt_segment(self, node: str, seed: int = 0, kind: str = "header") -> FaultReport:
        self._unsupported("corrupt")

    def partition(self, grudge: Grudge) -> FaultReport:
        self._unsupported("partition")

    def heal(self) -> FaultReport:
        return {"healed": 0, "note": REASON}

    def add_toxic(self, node: str, toxic_type: str, attributes: Mapping[str, object], *,
                  stream: str = "downstream", toxicity: float = 1.0,
                  source: str | None = None) -> FaultReport:
        self._unsupported("toxic")

    def remove_toxics(self, node: str | None = None) -> FaultReport:
        return {"removed": {}}
