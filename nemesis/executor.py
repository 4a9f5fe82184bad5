"""Carry out a fault on a `Cluster`; say what happened as the history value of the completion.

`execute(fault, runtime, rng, focus)` never raises for a fault that could not be done: the
value then has `"error"` (or `"unsupported"` with the runtime's reason), as Jepsen records a
nemesis that threw. Completion values:

- `start-partition`: `{"isolated": grudge}`; `stop-partition`: `"network-healed"`;
- `kill`/`start`/`pause`/`resume`/`restart`: `{node: result}` (`"killed"`, `"already-down"`...);
- `wipe`/`lose-unflushed`/`corrupt`: `{node: {what the disk lost}}`;
- `toxic`/`stop-toxic`: `{node: toxic name}` / `{"removed": {...}}`;
- `heal`: `heal_all`'s report.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from nemesis import grudges
from nemesis.faults import (
    CleanRestart,
    CorruptSegment,
    Fault,
    HealAll,
    HealNetwork,
    KillNode,
    LeaderOf,
    LoseUnflushed,
    PartitionNetwork,
    PauseNode,
    RemoveToxics,
    ResumeNode,
    StartNode,
    Toxic,
    WipeDisk,
)
from nemesis.port import Cluster, FaultReport, FaultUnsupported
from nemesis.targets import TargetError, choose, resolve


def _each(nodes: tuple[str, ...], fn: Callable[[str], object]) -> FaultReport:
    out: FaultReport = {}
    for n in nodes:
        try:
            r = fn(n)
            out[n] = r.get("result", r) if isinstance(r, dict) else r
        except FaultUnsupported as e:
            out[n] = {"unsupported": e.reason}
        except Exception as e:
            out[n] = {"error": f"{type(e).__name__}: {e}"}
    return out


def _down_then(runtime: Cluster, node: str, change: Callable[[str], FaultReport]
               ) -> FaultReport:
    runtime.kill(node)
    try:
        changed = change(node)
    finally:
        runtime.start_node(node)
    changed.pop("node", None)
    return changed


def _without_node(changed: FaultReport) -> FaultReport:
    changed.pop("node", None)
    return changed


def _pair_toxics(fault: Toxic, target: str, runtime: Cluster, rng: random.Random,
                 focus: LeaderOf | None) -> FaultReport:
    """The toxic on the links from each source node into `target`: {source: toxic name}.
    Named specs ("one", "all", ...) choose among the other nodes."""
    assert fault.source is not None
    others = tuple(n for n in runtime.nodes if n != target)
    if isinstance(fault.source, str) and fault.source not in ("leader", "controller"):
        sources = choose(fault.source, others, rng)
    else:
        sources = tuple(n for n in resolve(fault.source, runtime, rng, focus) if n != target)
    if not sources:
        raise TargetError(f"no source other than {target}")
    return {s: runtime.add_toxic(target, fault.toxic_type, dict(fault.attributes),
                                 stream=fault.stream, toxicity=fault.toxicity,
                                 source=s)["toxic"] for s in sources}


def partition_grudge(fault: PartitionNetwork, runtime: Cluster, rng: random.Random,
                     focus: LeaderOf | None) -> dict[str, tuple[str, ...]]:
    nodes = list(runtime.nodes)
    zk = runtime.zookeeper_node
    shape = fault.shape
    if not isinstance(shape, str):
        return {k: tuple(v) for k, v in shape}
    if shape == "isolate-from-zookeeper":
        if zk is None:
            raise FaultUnsupported("isolate-from-zookeeper", "the runtime has no ZooKeeper")
        return grudges.isolate_from(resolve(fault.targets, runtime, rng, focus), zk)
    comps: list[list[str]] | None = None
    if shape == "one":
        comps = grudges.one(nodes, rng)
    elif shape == "majority":
        comps = grudges.majority(nodes, rng)
    elif shape in ("isolate-leader", "isolate-controller"):
        spec = "controller" if shape == "isolate-controller" else (fault.focus or "leader")
        comps = grudges.isolate(nodes, resolve(spec, runtime, rng, focus))
        if zk is not None:
            comps = grudges.with_zookeeper(comps, zk)  # the rest keeps ZooKeeper
        return grudges.components_grudge(comps)
    if comps is not None:
        if fault.zookeeper and zk is not None:
            comps = grudges.with_zookeeper(comps, zk)
        return grudges.components_grudge(comps)
    if shape == "majorities-ring":
        return grudges.majorities_ring(nodes, rng)
    if shape == "bridge":
        return grudges.bridge(nodes, rng)
    raise ValueError(f"unknown partition shape {shape!r}")


CAPABILITY = {
    "start-partition": "partition", "kill": "kill", "start": "start", "pause": "pause",
    "resume": "resume", "wipe": "wipe", "lose-unflushed": "lose-unflushed", "corrupt": "corrupt",
    "restart": "stop", "toxic": "toxic",
}


def unsupported_reason(fault: Fault, runtime: Cluster) -> str | None:
    """Why the runtime cannot do this fault at all (checked before choosing targets)."""
    caps = runtime.capabilities()
    if isinstance(fault, PartitionNetwork) and fault.shape == "isolate-from-zookeeper":
        return caps.get("isolate-from-zookeeper")
    name = CAPABILITY.get(fault.f)
    return caps.get(name) if name is not None else None


def execute(fault: Fault, runtime: Cluster, rng: random.Random,
            focus: LeaderOf | None = None) -> object:
    """Apply `fault`; the completion value (see the module docstring)."""
    reason = unsupported_reason(fault, runtime)
    if reason is not None:
        return {"unsupported": reason}
    try:
        return _execute(fault, runtime, rng, focus)
    except FaultUnsupported as e:
        return {"unsupported": e.reason}
    except TargetError as e:
        return {"error": f"no target: {e}"}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def _execute(fault: Fault, runtime: Cluster, rng: random.Random,
             focus: LeaderOf | None) -> object:
    if isinstance(fault, PartitionNetwork):
        g = partition_grudge(fault, runtime, rng, focus)
        if not g:
            return {"isolated": {}}
        return {"isolated": runtime.partition(g)["isolated"]}
    if isinstance(fault, HealNetwork):
        runtime.heal()
        return "network-healed"
    if isinstance(fault, HealAll):
        return heal_all(runtime)
    if isinstance(fault, Toxic):
        nodes = resolve(fault.targets, runtime, rng, focus)
        if fault.source is not None:
            return _each(nodes, lambda n: {"result": _pair_toxics(fault, n, runtime, rng,
                                                                  focus)})
        return _each(nodes, lambda n: {"result": runtime.add_toxic(
            n, fault.toxic_type, dict(fault.attributes), stream=fault.stream,
            toxicity=fault.toxicity)["toxic"]})
    if isinstance(fault, RemoveToxics):
        if fault.targets == "all":
            return runtime.remove_toxics(None)
        nodes = resolve(fault.targets, runtime, rng, focus)
        return {n: runtime.remove_toxics(n)["removed"] for n in nodes}
    if isinstance(fault, StartNode | ResumeNode) and fault.targets == "all":
        nodes = tuple(runtime.nodes)
    elif isinstance(fault, KillNode | StartNode | PauseNode | ResumeNode | WipeDisk
                    | LoseUnflushed | CorruptSegment | CleanRestart):
        nodes = resolve(fault.targets, runtime, rng, focus)
    else:
        raise ValueError(f"no executor for {type(fault).__name__}")
    if isinstance(fault, KillNode):
        return _each(nodes, runtime.kill)
    if isinstance(fault, StartNode):
        return _each(nodes, runtime.start_node)
    if isinstance(fault, PauseNode):
        return _each(nodes, runtime.pause)
    if isinstance(fault, ResumeNode):
        return _each(nodes, runtime.resume)
    if len(nodes) > 1 and isinstance(fault, WipeDisk | LoseUnflushed | CorruptSegment):
        # fix: several targets fail together (a correlated power failure): all go down before
        # any disk changes and come back after; one after another, each restarted node
        # re-fetched from the others before the next went down, so `majority`/`all` lost
        # no more than `one`.
        _each(nodes, runtime.kill)
        try:
            if isinstance(fault, WipeDisk):
                return _each(nodes, lambda n: {"result": _without_node(runtime.wipe(n))})
            if isinstance(fault, LoseUnflushed):
                return _each(nodes, lambda n: {"result": _without_node(
                    runtime.lose_unflushed(n))})
            seed = rng.getrandbits(32)
            return _each(nodes, lambda n: {"result": _without_node(
                runtime.corrupt_segment(n, seed, fault.kind))})
        finally:
            _each(nodes, runtime.start_node)
    if isinstance(fault, WipeDisk):
        return _each(nodes, lambda n: {"result": _down_then(runtime, n, runtime.wipe)})
    if isinstance(fault, LoseUnflushed):
        return _each(nodes, lambda n: {"result": _down_then(runtime, n,
                                                            runtime.lose_unflushed)})
    if isinstance(fault, CorruptSegment):
        seed = rng.getrandbits(32)
        return _each(nodes, lambda n: {"result": _down_then(
            runtime, n, lambda m: runtime.corrupt_segment(m, seed, fault.kind))})
    if isinstance(fault, CleanRestart):
        def restart(n: str) -> FaultReport:
            runtime.stop_node(n)
            runtime.start_node(n)
            return {"result": "restarted"}
        return _each(nodes, restart)
    raise ValueError(f"no executor for {type(fault).__name__}")


def heal_all(runtime: Cluster) -> FaultReport:
    """The final phase: heal the network, remove toxics, resume paused nodes, start nodes that
    are down. Each step is tried even if an earlier one failed; the report says what each did."""
    report: FaultReport = {}
    try:
        report["network"] = runtime.heal()
    except Exception as e:
        report["network"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        report["toxics"] = runtime.remove_toxics(None)
    except Exception as e:
        report["toxics"] = {"error": f"{type(e).__name__}: {e}"}
    caps = runtime.capabilities()
    resumed: FaultReport = {}
    started: FaultReport = {}
    errors: FaultReport = {}
    if caps.get("resume", None) is None and caps.get("start", None) is None:
        for n in runtime.nodes:
            try:
                if runtime.is_running(n):
                    if runtime.is_paused(n):
                        resumed[n] = runtime.resume(n).get("result")
                else:
                    started[n] = runtime.start_node(n).get("result")
            except Exception as e:
                errors[n] = f"{type(e).__name__}: {e}"
    if errors:
        report["errors"] = errors
    report["resumed"] = resumed
    report["started"] = started
    return report


__all__ = ["choose", "execute", "heal_all", "partition_grudge"]
