"""A Runtime that only records what it is asked to do (no processes)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.runtime.base import (
    ZOOKEEPER_NODE,
    BrokerState,
    FaultUnsupported,
    Grudge,
    Runtime,
    node_id,
    normalize_grudge,
)


class FakeRuntime(Runtime):
    zookeeper_node = ZOOKEEPER_NODE

    def __init__(self, n: int = 3, leader: str | None = "n2", controller: str | None = "n1",
                 partitions: bool = True) -> None:
        self._nodes = tuple(f"n{i}" for i in range(1, n + 1))
        self.leader = leader
        self.ctrl = controller
        self.partitions = partitions
        self.calls: list[tuple[Any, ...]] = []
        self.down: set[str] = set()
        self.paused: set[str] = set()
        self.grudge: dict[str, tuple[str, ...]] = {}
        self.toxics: dict[str, list[str]] = {}

    def start(self) -> FakeRuntime:
        return self

    def stop(self) -> None:
        pass

    @property
    def bootstrap(self) -> str:
        return "127.0.0.1:1"

    @property
    def nodes(self) -> tuple[str, ...]:
        return self._nodes

    def is_running(self, node: str) -> bool:
        return node not in self.down

    def is_paused(self, node: str) -> bool:
        return node in self.paused

    def replica_states(self, node: str, timeout_s: float = 2.0) -> BrokerState:
        return {"broker_id": node_id(node), "controller_epoch": 0, "replicas": []}

    def leader_of(self, topic: str, partition: int) -> str | None:
        return self.leader

    def controller(self) -> str | None:
        return self.ctrl

    def collect_logs(self, run_dir: Path) -> list[Path]:
        return []

    def _rec(self, *call: Any) -> dict[str, Any]:
        self.calls.append(call)
        return {"node": call[1] if len(call) > 1 else None, "result": call[0]}

    def kill(self, node: str) -> dict[str, Any]:
        self.down.add(node)
        self.paused.discard(node)
        return self._rec("kill", node)

    def start_node(self, node: str) -> dict[str, Any]:
        if node not in self.down:
            return {"node": node, "result": "already-running"}
        self.down.discard(node)
        return self._rec("start", node)

    def stop_node(self, node: str) -> dict[str, Any]:
        self.down.add(node)
        return self._rec("stop", node)

    def pause(self, node: str) -> dict[str, Any]:
        self.paused.add(node)
        return self._rec("pause", node)

    def resume(self, node: str) -> dict[str, Any]:
        self.paused.discard(node)
        return self._rec("resume", node)

    def wipe(self, node: str) -> dict[str, Any]:
        assert node in self.down
        self.calls.append(("wipe", node))
        return {"node": node, "files": 3}

    def lose_unflushed(self, node: str) -> dict[str, Any]:
        assert node in self.down
        self.calls.append(("lose-unflushed", node))
        return {"node": node, "lost": {}}

    def corrupt_segment(self, node: str, seed: int = 0, kind: str = "header") -> dict[str, Any]:
        assert node in self.down
        self.calls.append(("corrupt", node, kind))
        return {"node": node, "kind": kind}

    def partition(self, grudge: Grudge) -> dict[str, Any]:
        if not self.partitions:
            raise FaultUnsupported("partition", "not root")
        g = normalize_grudge(grudge, (*self._nodes, ZOOKEEPER_NODE))
        self.calls.append(("partition", g))
        self.grudge = g
        return {"isolated": {k: list(v) for k, v in g.items()}}

    def heal(self) -> dict[str, Any]:
        self.calls.append(("heal",))
        self.grudge = {}
        return {"healed": 1}

    def add_toxic(self, node: str, toxic_type: str, attributes: Mapping[str, Any], *,
                  stream: str = "downstream", toxicity: float = 1.0) -> dict[str, Any]:
        self.calls.append(("toxic", node, toxic_type))
        self.toxics.setdefault(node, []).append(toxic_type)
        return {"node": node, "toxic": f"{toxic_type}_{stream}"}

    def remove_toxics(self, node: str | None = None) -> dict[str, Any]:
        self.calls.append(("remove-toxics", node))
        removed = {n: t for n, t in self.toxics.items() if node in (None, n)}
        for n in removed:
            self.toxics.pop(n)
        return {"removed": removed}
