"""Counterexample traces: a readable numbered timeline, and a replayable JSONL form.

A trace file holds one header line (bounds, protocol configuration, the invariant broken)
and one line per action. Replaying the actions from the model's initial state reproduces
every world of the trace exactly (`spec.checker.replay`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from core.config import Bugs, ProtocolConfig
from core.replica import ReplicaState
from core.timers import (
    FetchTimeoutTimer,
    FetchTimer,
    LeaderImbalanceTimer,
    ProduceTimeoutTimer,
    ReplicaLagTimer,
    TimerKey,
)
from core.types import NO_LEADER, Role, TopicPartition
from spec.model import Action, Bounds
from spec.world import TP, Node, World


def _replica(n: Node) -> ReplicaState | None:
    if n.state is None:
        return None
    for r in n.state.replicas:
        if r.tp == TP:
            return r
    return None


def _fmt_log(records: tuple[tuple[int, int], ...]) -> str:
    return "[" + " ".join(f"r{rid}@e{epoch}" for rid, epoch in records) + "]"


# What each action kind says; `{1}`... are the action's fields, `{choice}` the nondeterministic
# choice made (if any).
_ACTION_TEXT: dict[str, str] = {
    "zk-elect": "broker {1} wins the race for /controller{choice}",
    "zk": "broker {1} processes a ZooKeeper '{2}' notification{choice}",
    "deliver": "{3} from broker {2} delivered to broker {1}{choice}",
    "drop": "{3} from broker {2} to broker {1} is lost",
    "duplicate": "{3} from broker {2} to broker {1} is duplicated",
    "timer": "broker {1}: {timer} fires{choice}",
    "produce": "a client produces record r{2} to broker {1}{choice}",
    "crash": "broker {1} crashes (process killed; its session expires){choice}",
    "lossy-crash": "broker {1} crashes losing its page cache, keeping {2} records{choice}",
    "expire": "broker {1}'s ZooKeeper session expires while it runs{choice}",
    "zk-write": "ZooKeeper applies broker {1}'s ISR write{choice}",
    "move-leader": "an operator asks the controller to move leadership to broker {1}{choice}",
    "restart": "broker {1} restarts from its disk{choice}",
    "list-offsets": "a client asks leader {1} for the latest offset (ListOffsets){choice}",
}


def describe_action(action: Action) -> str:
    if not action:
        return "initial state: brokers registered, topic assigned, no controller yet"
    kind = action[0]
    text = _ACTION_TEXT.get(kind) if isinstance(kind, str) else None
    if text is None:
        return repr(action)
    choice = ""
    if isinstance(action[-1], tuple):
        choice = f" (choosing {', '.join(str(c) for c in action[-1])})"
    timer = _timer_text(str(action[2])) if kind == "timer" else ""
    return text.format(*action, choice=choice, timer=timer)


def _timer_text(key: str) -> str:
    """A timer's key (as the action recorded it: the key's repr) in Kafka's words."""
    if key.startswith("FetchTimeoutTimer("):
        return "the fetch request timeout (request.timeout.ms)"
    if key.startswith("FetchTimer("):
        return "the replica fetcher's next fetch"
    if key.startswith("ReplicaLagTimer("):
        follower = key.rstrip(")").rsplit("follower=", 1)[-1]
        return f"replica.lag.time.max.ms for follower {follower}"
    if key.startswith("LeaderImbalanceTimer("):
        return "the auto leader rebalance check"
    return f"timer {key}"


def _legacy_timer_label(key: str) -> str:
    """Traces saved before timer keys had types recorded them as string tuples
    ("('lag', TopicPartition(topic='t', partition=0), 1)"): the repr of the typed key now."""
    if key == "('rebalance',)":
        return repr(LeaderImbalanceTimer())
    m = _LEGACY_TIMER.fullmatch(key)
    if m is None:
        return key
    t = TopicPartition(m["topic"], int(m["partition"]))
    keys: dict[str, TimerKey] = {"fetch": FetchTimer(t), "fetch_timeout": FetchTimeoutTimer(t)}
    if m["rest"] is not None:
        keys["lag"] = ReplicaLagTimer(t, int(m["rest"]))
        keys["produce_timeout"] = ProduceTimeoutTimer(t, int(m["rest"]))
    typed = keys.get(m["kind"])
    return key if typed is None else repr(typed)


_LEGACY_TIMER = re.compile(
    r"\('(?P<kind>\w+)', TopicPartition\(topic='(?P<topic>[^']*)', "
    r"partition=(?P<partition>\d+)\)(?:, (?P<rest>-?\d+))?\)"
)


def _upgrade(action: Action) -> Action:
    if len(action) >= 3 and action[0] == "timer" and isinstance(action[2], str):
        return (*action[:2], _legacy_timer_label(action[2]), *action[3:])
    return action



def describe_changes(before: World, after: World) -> list[str]:
    """What an action changed that matters to replication, one phrase per change."""
    out: list[str] = []
    zb, za = before.zk, after.zk
    if za.controller != zb.controller:
        out.append("no controller" if za.controller == NO_LEADER
                   else f"controller is broker {za.controller} (epoch {za.controller_epoch})")
    def shape(p: object) -> object:
        return None if p is None else (p.leader, p.leader_epoch, p.isr)  # type: ignore[attr-defined]

    if za.partition is not None and shape(za.partition) != shape(zb.partition):
        p = za.partition
        out.append(f"ZooKeeper: leader {p.leader} epoch {p.leader_epoch} ISR {list(p.isr)}")
    for i, (a, b) in enumerate(zip(before.nodes, after.nodes, strict=True)):
        ra, rb = _replica(a), _replica(b)
        if a.alive != b.alive:
            out.append(f"broker {i} {'up' if b.alive else 'down'}")
        if rb is not None and (ra is None or (ra.role, ra.leader_epoch) != (rb.role,
                                                                            rb.leader_epoch)):
            role = {Role.LEADER: "leader", Role.FOLLOWER: f"follower of {rb.leader}",
                    Role.NONE: "no role"}[rb.role]
            out.append(f"broker {i} is {role} in epoch {rb.leader_epoch}")
        if a.disk.records != b.disk.records:
            out.append(f"broker {i} log {_fmt_log(b.disk.records)}")
        if rb is not None and (ra is None or ra.high_watermark != rb.high_watermark):
            out.append(f"broker {i} HW {rb.high_watermark}")
        if rb is not None and rb.role == Role.LEADER and (ra is None or ra.isr != rb.isr):
            out.append(f"broker {i} ISR {list(rb.isr)}")
    new_acks = sorted(after.ghost.acked - before.ghost.acked)
    if new_acks:
        out.append("acknowledged " + ", ".join(f"r{r}" for r in new_acks))
    return out


def format_trace(trace: list[tuple[Action, World]], violation: tuple[str, str] | None) -> str:
    lines = []
    prev: World | None = None
    for n, (action, world) in enumerate(trace):
        text = f"{n:3d}. {describe_action(action)}"
        if prev is not None:
            changes = describe_changes(prev, world)
            if changes:
                text += "\n       -> " + "; ".join(changes)
        lines.append(text)
        prev = world
    if violation is not None:
        lines.append(f"VIOLATION {violation[0]}: {violation[1]}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# JSONL


def _tuples(x: Any) -> Any:
    return tuple(_tuples(v) for v in x) if isinstance(x, list) else x


def save(path: Path, config: ProtocolConfig, bounds: Bounds, actions: list[Action],
         violation: tuple[str, str] | None) -> None:
    header = {
        "bounds": dataclasses.asdict(bounds),
        "config": {k: v for k, v in dataclasses.asdict(config).items() if k != "bugs"},
        "bugs": list(config.bugs.enabled()),
        "violation": list(violation) if violation else None,
    }
    with path.open("w") as f:
        f.write(json.dumps(header) + "\n")
        for a in actions:
            f.write(json.dumps(a) + "\n")


def load(path: Path) -> tuple[ProtocolConfig, Bounds, list[Action], tuple[str, str] | None]:
    lines = path.read_text().splitlines()
    if not lines:
        raise ValueError(f"{path}: empty trace file")
    header = json.loads(lines[0])
    bugs = Bugs(**{name: True for name in header["bugs"]})
    config = ProtocolConfig(**header["config"], bugs=bugs)
    bounds = Bounds(**header["bounds"])
    actions = [_upgrade(_tuples(json.loads(line))) for line in lines[1:] if line.strip()]
    v = header.get("violation")
    return config, bounds, actions, (v[0], v[1]) if v else None
