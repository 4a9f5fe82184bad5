"""`LocalRuntime`: a private ZooKeeper and N hiwater brokers as processes on this machine.

Built on `broker.runtime.cluster.LocalCluster` (broker i on 127.0.0.<10+i>, its own ports, data
dir and log under `base_dir`), adding the faults:

- processes: `kill` (SIGKILL), `start_node`, `stop_node` (SIGTERM: controlled shutdown),
  `pause`/`resume` (SIGSTOP/SIGCONT);
- disk, on a stopped node: `wipe`, `lose_unflushed`, `corrupt_segment` (`harness.runtime.disk`
  says exactly what each loses);
- network: `partition(grudge)`/`heal()` with iptables (`harness.runtime.netfilter`: rules on
  address and port pairs between brokers, a per-broker cgroup for broker ↔ ZooKeeper);
- links: with `proxies=True`, a Toxiproxy proxy in front of every broker (advertised in its
  place) and `add_toxic`/`remove_toxics` through the Toxiproxy API.

Without root, without the `iptables` command or without a cgroup2 mount, `start()` still works
and the affected faults raise `FaultUnsupported` with the reason (see `capabilities()`);
`require_network=True` makes that a start-up error instead.

Everything started is stopped by `stop()` (idempotent), also at interpreter exit or on
SIGTERM/SIGHUP (`harness.runtime.cleanup`); the iptables chain and cgroups go with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from broker.runtime.cluster import BrokerProcess, ClusterError, LocalCluster
from broker.runtime.zkserver import free_port
from harness.runtime import cleanup
from harness.runtime.base import (
    ZOOKEEPER_NODE,
    BrokerState,
    FaultReport,
    FaultUnsupported,
    Grudge,
    NodeStateError,
    Runtime,
    node_id,
    node_name,
    normalize_grudge,
)
from harness.runtime.disk import corrupt_segment_in, lose_unflushed_in, wipe_data_dir
from harness.runtime.netfilter import (
    BrokerCgroups,
    IptablesNetwork,
    NetfilterError,
    cgroup_unavailable_reason,
    unavailable_reason,
)
from harness.runtime.proxies import ToxiproxyLinks

ZK_ADDRESS = "127.0.0.1"
_mark_seq = 0
_mark_lock = threading.Lock()


class _Cluster(LocalCluster):
    """LocalCluster with two hooks: extra per-broker config lines, and a callback with the pid of
    each broker it starts (to put it in its cgroup before it connects anywhere)."""

    runtime: LocalRuntime

    def _write_config(self, b: BrokerProcess) -> None:
        super()._write_config(b)
        extra = self.runtime._extra_config(b.broker_id)
        if extra:
            lines = [ln for ln in b.config_path.read_text().splitlines()
                     if ln.split("=", 1)[0] not in extra]
            lines += [f"{k}={v}" for k, v in extra.items()]
            b.config_path.write_text("\n".join(lines) + "\n")

    def start_broker(self, broker_id: int) -> None:
        self.runtime._before_start(broker_id)
        super().start_broker(broker_id)
        pid = self.nodes[broker_id].pid
        if pid is not None:
            self.runtime._after_start(broker_id, pid)


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


class LocalRuntime(Runtime):
    zookeeper_node = ZOOKEEPER_NODE

    def __init__(
        self,
        base_dir: Path | str,
        brokers: int = 3,
        overrides: Mapping[str, str] | None = None,
        bugs: Iterable[str] = (),
        *,
        proxies: bool = False,
        network: bool = True,
        require_network: bool = False,
        toxiproxy_mode: str | None = None,
        zk_tick_ms: int = 500,
        ready_timeout_s: float = 30.0,
        python: str = sys.executable,
    ) -> None:
        self.base_dir = Path(base_dir)
        self.brokers = brokers
        self.overrides = dict(overrides or {})
        self.bugs = tuple(bugs)
        if self.bugs:
            self.overrides["hiwater.bugs"] = ",".join(self.bugs)
        self.use_proxies = proxies
        self.use_network = network
        self.require_network = require_network
        self.toxiproxy_mode = toxiproxy_mode
        self.ready_timeout_s = ready_timeout_s
        self.cluster = _Cluster(self.base_dir, brokers, dict(self.overrides), zk_tick_ms, python)
        self.cluster.runtime = self
        self.net: IptablesNetwork | None = None
        self.cgroups: BrokerCgroups | None = None
        self.links: ToxiproxyLinks | None = None
        self.proxy_ports: dict[int, int] = {}
        self.network_reason: str | None = "not started"
        self.zk_reason: str | None = "not started"
        self._marks: dict[int, int] = {}
        self._cleanup_token: int | None = None
        self._lock = threading.RLock()
        self.started = False
        self.stopped = False

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> LocalRuntime:
        with self._lock:
            if self.started:
                return self
            self.started = True
            self._cleanup_token = cleanup.register(self.stop)
            try:
                self._setup_network()
                if self.use_proxies:
                    self.links = ToxiproxyLinks(self.toxiproxy_mode).start()
                self.cluster.start(wait=False)
                self.cluster.wait_ready(self.ready_timeout_s)
            except BaseException:
                self.stop()
                raise
        return self

    def _setup_network(self) -> None:
        if not self.use_network:
            self.network_reason = self.zk_reason = "the runtime was started with network=False"
            return
        self.network_reason = unavailable_reason()
        if self.network_reason is not None:
            self.zk_reason = self.network_reason
            if self.require_network:
                raise FaultUnsupported("partition", self.network_reason)
            return
        self.net = IptablesNetwork().setup()
        suffix = self.net.chain.removeprefix("HIWATER-")  # the cgroups share the chain's suffix
        self.zk_reason = cgroup_unavailable_reason()
        if self.zk_reason is None:
            try:
                self.cgroups = BrokerCgroups(suffix).setup()
            except (OSError, NetfilterError) as e:
                self.zk_reason = f"cannot create a cgroup: {e}"
        if self.zk_reason is not None and self.require_network:
            raise FaultUnsupported("isolate-from-zookeeper", self.zk_reason)

    def stop(self) -> None:
        """Heal, stop every broker, ZooKeeper and the proxy server, remove the iptables chain
        and the cgroups. Idempotent; errors are collected and raised at the end."""
        with self._lock:
            if self.stopped or not self.started:
                self.stopped = True
                return
            self.stopped = True
            errors: list[str] = []

            def attempt(what: str, fn: Callable[[], object]) -> None:
                try:
                    fn()
                except Exception as e:
                    errors.append(f"{what}: {e}")

            if self.net is not None:
                attempt("heal", self.net.flush)
            attempt("cluster", self.cluster.stop)
            if self.links is not None:
                attempt("toxiproxy", self.links.stop)
            if self.net is not None:
                attempt("iptables", self.net.teardown)
            if self.cgroups is not None:
                attempt("cgroups", self.cgroups.teardown)
            if self._cleanup_token is not None:
                cleanup.unregister(self._cleanup_token)
            if errors:
                raise ClusterError("; ".join(errors))

    # -- hooks from _Cluster -----------------------------------------------------------------

    def _extra_config(self, broker_id: int) -> dict[str, str]:
        if not self.use_proxies:
            return {}
        host = self.cluster.nodes[broker_id].host
        return {"advertised.listeners": f"PLAINTEXT://{host}:{self._proxy_port(broker_id)}"}

    def _proxy_port(self, broker_id: int) -> int:
        if broker_id not in self.proxy_ports:
            self.proxy_ports[broker_id] = free_port(self.cluster.nodes[broker_id].host)
        return self.proxy_ports[broker_id]

    def _before_start(self, broker_id: int) -> None:
        if self.links is not None and node_name(broker_id) not in self.links.listen:
            b = self.cluster.nodes[broker_id]
            self.links.add_proxy(node_name(broker_id), (b.host, self._proxy_port(broker_id)),
                                 (b.host, b.port))

    def _after_start(self, broker_id: int, pid: int) -> None:
        if self.cgroups is not None:
            try:
                self.cgroups.place(broker_id, pid)
            except OSError as e:
                self.zk_reason = f"cannot place broker {broker_id} in its cgroup: {e}"

    # -- views -------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        if self.use_proxies:
            return ",".join(f"{self.cluster.nodes[i].host}:{self._proxy_port(i)}"
                            for i in sorted(self.cluster.nodes))
        return self.cluster.bootstrap

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(node_name(i) for i in range(1, self.brokers + 1))

    def _id(self, node: str) -> int:
        i = node_id(node)
        if i not in self.cluster.nodes:
            raise ValueError(f"no node {node!r} (nodes: {', '.join(self.nodes)})")
        return i

    def capabilities(self) -> dict[str, str | None]:
        toxic = None if self.links is not None else "the runtime was started without proxies=True"
        return {
            "kill": None, "start": None, "stop": None, "pause": None, "resume": None,
            "wipe": None, "lose-unflushed": None, "corrupt": None,
            "partition": self.network_reason,
            "isolate-from-zookeeper": self.network_reason or self.zk_reason,
            "toxic": toxic,
        }

    def is_running(self, node: str) -> bool:
        return self.cluster.nodes[self._id(node)].running

    def is_paused(self, node: str) -> bool:
        b = self.cluster.nodes[self._id(node)]
        return b.pid is not None and b.running and _proc_state(b.pid) in ("T", "t")

    def pid(self, node: str) -> int | None:
        b = self.cluster.nodes[self._id(node)]
        return b.pid if b.running else None

    def data_dirs(self, node: str) -> list[Path]:
        """The node's `log.dirs` as its config file says."""
        b = self.cluster.nodes[self._id(node)]
        dirs = [b.data_dir]
        if b.config_path.exists():
            for ln in b.config_path.read_text().splitlines():
                key, _, value = ln.partition("=")
                if key.strip() in ("log.dirs", "log.dir") and value.strip():
                    dirs = [Path(v.strip()) for v in value.split(",") if v.strip()]
        return dirs

    def replica_states(self, node: str, timeout_s: float = 2.0) -> BrokerState:
        return cast(BrokerState, self.cluster.replica_states(self._id(node), timeout_s))

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Until every running broker answers Metadata listing every running broker."""
        self.cluster.wait_ready(self.ready_timeout_s if timeout_s is None else timeout_s)

    def log_tail(self, node: str, lines: int = 40) -> str:
        return self.cluster.log_tail(self._id(node), lines)

    def collect_logs(self, run_dir: Path) -> list[Path]:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for i, b in sorted(self.cluster.nodes.items()):
            for src, name in ((b.log_path, f"{node_name(i)}.log"),
                              (b.config_path, f"{node_name(i)}.server.properties")):
                if src.exists():
                    shutil.copyfile(src, run_dir / name)
                    written.append(run_dir / name)
        zk_log = self.base_dir / "zookeeper" / "zookeeper.out"
        if zk_log.exists():
            shutil.copyfile(zk_log, run_dir / "zookeeper.log")
            written.append(run_dir / "zookeeper.log")
        net = {"chain": self.net.chain if self.net else None,
               "rules": [list(r) for r in self.net.rules] if self.net else [],
               "network_unavailable": self.network_reason,
               "zookeeper_isolation_unavailable": self.zk_reason}
        (run_dir / "runtime.json").write_text(json.dumps(
            {"nodes": list(self.nodes), "bootstrap": self.bootstrap, "network": net,
             "proxies": {node_name(i): p for i, p in sorted(self.proxy_ports.items())}},
            indent=2))
        written.append(run_dir / "runtime.json")
        return written

    # -- process faults ------------------------------------------------------------------------

    def kill(self, node: str) -> FaultReport:
        i = self._id(node)
        with self._lock:
            if not self.cluster.nodes[i].running:
                return {"node": node, "result": "already-down"}
            pid = self.cluster.nodes[i].pid
            self.cluster.kill(i)
        return {"node": node, "result": "killed", "pid": pid}

    def start_node(self, node: str, wait: bool = False) -> FaultReport:
        i = self._id(node)
        if not self.cluster.nodes[i].running:
            # fix: a broker killed moments ago still owns /brokers/ids/<id> until its ZooKeeper
            # session expires; started before that, it finds its id in use and exits (as Kafka
            # does), so kill -> start, and wipe/lose-unflushed/corrupt (which restart at once),
            # left the node down for the rest of the run. Wait (bounded) for that first.
            self._await_unregistered(i)
        with self._lock:
            if self.cluster.nodes[i].running:
                return {"node": node, "result": "already-running"}
            self.cluster.start_broker(i)
        if wait:
            self.cluster.wait_ready(self.ready_timeout_s)
        return {"node": node, "result": "started", "pid": self.cluster.nodes[i].pid}

    def _await_unregistered(self, broker_id: int) -> None:
        """Until ZooKeeper no longer holds `/brokers/ids/<id>` (its old session expired),
        bounded by ZooKeeper's largest session (20 ticks) and a margin; best effort."""
        zk = self.cluster.zk
        if zk is None or zk.port is None:
            return
        from kazoo.client import KazooClient

        deadline = time.monotonic() + 20 * self.cluster.zk_tick_ms / 1000.0 + 3.0
        kz = KazooClient(hosts=zk.hosts, timeout=2.0)
        try:
            kz.start(timeout=5.0)
            while (kz.exists(f"/brokers/ids/{broker_id}") is not None
                   and time.monotonic() < deadline):
                time.sleep(0.1)
        except Exception:
            pass  # ZooKeeper unreachable: start anyway, as before
        finally:
            with contextlib.suppress(Exception):
                kz.stop()
                kz.close()

    def stop_node(self, node: str, timeout_s: float = 30.0) -> FaultReport:
        i = self._id(node)
        with self._lock:
            b = self.cluster.nodes[i]
            if not b.running:
                return {"node": node, "result": "already-down"}
            if b.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(b.pid, signal.SIGCONT)
            t0 = time.monotonic()
            self.cluster.stop_broker(i, timeout_s)
        return {"node": node, "result": "stopped", "seconds": round(time.monotonic() - t0, 3)}

    def pause(self, node: str) -> FaultReport:
        i = self._id(node)
        if not self.cluster.nodes[i].running:
            return {"node": node, "result": "down"}
        self.cluster.pause(i)
        return {"node": node, "result": "paused"}

    def resume(self, node: str) -> FaultReport:
        i = self._id(node)
        if not self.cluster.nodes[i].running:
            return {"node": node, "result": "down"}
        was = self.is_paused(node)
        self.cluster.resume(i)
        return {"node": node, "result": "resumed" if was else "not-paused"}

    # -- disk faults ---------------------------------------------------------------------------

    def _require_down(self, node: str, fault: str) -> None:
        if self.is_running(node):
            raise NodeStateError(f"{fault} needs {node} down (kill or stop it first)")

    def wipe(self, node: str) -> FaultReport:
        self._require_down(node, "wipe")
        out: dict[str, Any] = {"node": node, "files": 0, "bytes": 0}
        for d in self.data_dirs(node):
            r = wipe_data_dir(d)
            out["files"] += r["files"]
            out["bytes"] += r["bytes"]
        return out

    def lose_unflushed(self, node: str) -> FaultReport:
        self._require_down(node, "lose-unflushed")
        lost: dict[str, Any] = {}
        for d in self.data_dirs(node):
            lost.update(lose_unflushed_in(d))
        return {"node": node, "lost": lost}

    def corrupt_segment(self, node: str, seed: int = 0, kind: str = "header",
                        topic: str | None = None) -> FaultReport:
        rng = random.Random(seed)
        dirs = self.data_dirs(node)
        d = dirs[rng.randrange(len(dirs))]
        out = corrupt_segment_in(d, rng, kind, topic)
        out["node"] = node
        out["node_running"] = self.is_running(node)
        return out

    # -- network faults ------------------------------------------------------------------------

    def _ports(self, broker_id: int) -> list[int]:
        ports = [self.cluster.nodes[broker_id].port]
        if self.use_proxies:
            ports.append(self._proxy_port(broker_id))
        return ports

    def _mark(self, broker_id: int) -> int:
        global _mark_seq
        if broker_id not in self._marks:
            with _mark_lock:
                _mark_seq += 1
                seq = _mark_seq
            self._marks[broker_id] = (0x40000000 | ((os.getpid() & 0xFFFF) << 12)
                                      | ((seq & 0xF) << 8) | broker_id)
        return self._marks[broker_id]

    def partition_rules(self, grudge: Grudge) -> list[list[str]]:
        """The iptables rules (for our chain) that carry out `grudge`."""
        g = normalize_grudge(grudge, (*self.nodes, ZOOKEEPER_NODE))
        rules: list[list[str]] = []
        for dst, srcs in g.items():
            for src in srcs:
                if ZOOKEEPER_NODE in (src, dst):
                    b = self._id(dst if src == ZOOKEEPER_NODE else src)
                    if self.cgroups is None:
                        raise FaultUnsupported("isolate-from-zookeeper",
                                               self.zk_reason or "no cgroups")
                    zk = self.cluster.zk
                    if zk is None or zk.port is None:
                        raise NodeStateError("ZooKeeper is not running")
                    mark = f"{self._mark(b):#x}"
                    rules.append(["-m", "cgroup", "--path", self.cgroups.path_for(b), "-p", "tcp",
                                  "-d", ZK_ADDRESS, "--dport", str(zk.port),
                                  "-j", "CONNMARK", "--set-mark", mark])
                    rules.append(["-m", "connmark", "--mark", mark, "-j", "DROP"])
                    continue
                s, d = self._id(src), self._id(dst)
                sh, dh = self.cluster.nodes[s].host, self.cluster.nodes[d].host
                rules.append(["-s", sh, "-d", dh, "-p", "tcp", "-m", "multiport", "--dports",
                              ",".join(map(str, self._ports(d))), "-j", "DROP"])
                rules.append(["-s", sh, "-d", dh, "-p", "tcp", "-m", "multiport", "--sports",
                              ",".join(map(str, self._ports(s))), "-j", "DROP"])
        return rules

    def partition(self, grudge: Grudge) -> FaultReport:
        if self.net is None:
            raise FaultUnsupported("partition", self.network_reason or "no network control")
        g = normalize_grudge(grudge, (*self.nodes, ZOOKEEPER_NODE))
        added = self.net.add(self.partition_rules(g))
        return {"isolated": {k: list(v) for k, v in g.items()}, "rules": len(added)}

    def heal(self) -> FaultReport:
        if self.net is None:
            return {"healed": 0, "note": self.network_reason}
        return {"healed": self.net.flush()}

    def add_toxic(self, node: str, toxic_type: str, attributes: Mapping[str, object], *,
                  stream: str = "downstream", toxicity: float = 1.0,
                  source: str | None = None) -> FaultReport:
        if self.links is None:
            raise FaultUnsupported("toxic", "the runtime was started without proxies=True")
        if source is not None:
            raise FaultUnsupported("toxic", "the local runtime has one link per broker, not "
                                   "per pair (the docker runtime has both)")
        self._id(node)
        name = self.links.add_toxic(node, toxic_type, attributes, stream=stream,
                                    toxicity=toxicity)
        return {"node": node, "toxic": name, "type": toxic_type, "stream": stream,
                "attributes": dict(attributes), "toxicity": toxicity}

    def remove_toxics(self, node: str | None = None) -> FaultReport:
        if self.links is None:
            return {"removed": {}}
        return {"removed": self.links.remove_toxics(node)}
