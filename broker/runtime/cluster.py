"""A local cluster: one private ZooKeeper and N broker processes on 127.0.0.x.

Used by `hiwater cluster up/down`, the broker tests and the harness's local runtime. Broker
`i` (ids from 1) listens on `127.0.0.<10+i>` on its own free port, with its data directory,
log file and admin port under `base_dir`; outgoing broker connections bind to that address
so a nemesis can cut pairs of brokers. Every process is ours and is stopped by its PID.

    with LocalCluster(tmp_path, brokers=3, overrides={"min.insync.replicas": "2"}) as c:
        c.bootstrap            # "127.0.0.11:40123,127.0.0.12:...,..."
        c.kill(2); c.start_broker(2)
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.metadata.v1 import request as md_req

from broker.runtime.proc import stop_process
from broker.runtime.zkserver import ZooKeeperServer, free_ports
from broker.wire import DecodedResponse, decode_response, encode_request, response_fields

STATE_FILE = "cluster.json"
# glibc returns large freed buffers to the OS at once; on these VMs each page then faults in
# again on reuse (bench/README.md, broker section). Keeping them in the heap removes most of
# the per-request copy cost of Produce and Fetch frames.
MALLOC_TUNING = {
    "MALLOC_MMAP_THRESHOLD_": str(64 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(256 << 20),
    "MALLOC_TOP_PAD_": str(64 << 20),
}
# Only a bound: wait_ready returns as soon as every broker serves Metadata. A broker spends
# about 3 s of CPU importing (kio pulls in hypothesis) before it connects; three of them
# plus ZooKeeper's JVM on a busy 2-core machine took over 15 s, and fixtures failed.
READY_TIMEOUT_S = 45.0


class ClusterError(RuntimeError):
    pass


def broker_host(broker_id: int) -> str:
    if not 1 <= broker_id <= 200:
        raise ClusterError(f"broker id {broker_id} outside 1..200")
    return f"127.0.0.{10 + broker_id}"


def probe_metadata(host: str, port: int, timeout_s: float = 2.0) -> dict[str, Any]:
    """Metadata v1 over a plain socket: {"brokers": [...], "controller_id": N}."""
    body = md_req.MetadataRequest(topics=())
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.settimeout(timeout_s)
        s.sendall(encode_request(body, 1, "hiwater-probe"))
        head = _recv_exact(s, 4)
        (size,) = struct.unpack(">i", head)
        if not 4 <= size <= 1 << 24:
            raise ClusterError(f"bad metadata response size {size}")
        payload = _recv_exact(s, size)
    resp = decode_response(payload, 3, 1)
    if not isinstance(resp, DecodedResponse):
        raise ClusterError(f"bad metadata response: {resp}")
    b = response_fields(resp)
    return {
        "brokers": sorted(int(x.node_id) for x in b.brokers),
        "controller_id": int(b.controller_id),
    }


def _recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed")
        out += chunk
    return bytes(out)


@dataclass
class BrokerProcess:
    broker_id: int
    host: str
    port: int
    admin_port: int
    data_dir: Path
    config_path: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    pid: int | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return self.pid is not None and _alive_with(self.pid, str(self.config_path))


def _alive_with(pid: int, marker: str) -> bool:
    """True when `pid` runs and its command line mentions `marker` (never signal a PID that
    was reused by someone else's process)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return marker in cmdline


@dataclass
class LocalCluster:
    base_dir: Path
    brokers: int = 3
    overrides: dict[str, str] = field(default_factory=dict)
    zk_tick_ms: int = 500
    python: str = sys.executable
    zk: ZooKeeperServer | None = None
    nodes: dict[int, BrokerProcess] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.base_dir = Path(self.base_dir)
        if not 1 <= self.brokers <= 200:
            raise ClusterError(f"--brokers must be 1..200, got {self.brokers}")

    # -- lifecycle --------------------------------------------------------------------------

    def start(self, wait: bool = True) -> LocalCluster:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.zk = ZooKeeperServer(self.base_dir / "zookeeper", tick_time_ms=self.zk_tick_ms)
            self.zk.start()
            for i in range(1, self.brokers + 1):
                self.nodes[i] = self._describe(i)
                self.start_broker(i)
            if wait:
                self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _describe(self, broker_id: int) -> BrokerProcess:
        host = broker_host(broker_id)
        d = self.base_dir / f"broker-{broker_id}"
        d.mkdir(parents=True, exist_ok=True)
        port, admin_port = free_ports(host, 2)
        return BrokerProcess(
            broker_id, host, port, admin_port, d / "data",
            d / "server.properties", d / "broker.log")

    def _write_config(self, b: BrokerProcess) -> None:
        assert self.zk is not None
        props = {
            "broker.id": str(b.broker_id),
            "listeners": f"PLAINTEXT://{b.host}:{b.port}",
            "log.dirs": str(b.data_dir),
            "zookeeper.connect": self.zk.hosts,
            "zookeeper.session.timeout.ms": "6000",
            "default.replication.factor": str(min(3, self.brokers)),
            "offsets.topic.replication.factor": str(min(3, self.brokers)),
            "offsets.topic.num.partitions": "10",
            "group.initial.rebalance.delay.ms": "500",
            "hiwater.admin.port": str(b.admin_port),
            **self.overrides,
        }
        b.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def start_broker(self, broker_id: int) -> None:
        b = self.nodes[broker_id]
        if b.running:
            return
        self._write_config(b)
        env = dict(os.environ, PYTHONUNBUFFERED="1", **MALLOC_TUNING)
        with open(b.log_path, "ab") as out:
            b.proc = subprocess.Popen(
                [self.python, "-m", "broker.runtime.main", "--config", str(b.config_path)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, cwd=str(Path(__file__).resolve().parents[2]))
        b.pid = b.proc.pid

    def stop_broker(self, broker_id: int, timeout_s: float = 30.0) -> None:
        """Clean shutdown (SIGTERM: controlled shutdown, flush), SIGKILL after the bound."""
        b = self.nodes[broker_id]
        if b.proc is not None:
            stop_process(b.proc, timeout_s)
        elif b.pid is not None and _alive_with(b.pid, str(b.config_path)):
            _signal_and_wait(b.pid, timeout_s)
        b.proc, b.pid = None, None

    def kill(self, broker_id: int) -> None:
        """kill -9: a crash."""
        b = self.nodes[broker_id]
        if b.proc is not None and b.proc.poll() is None:
            b.proc.kill()
            b.proc.wait(10)
        b.proc, b.pid = None, None

    def pause(self, broker_id: int) -> None:
        self._signal(broker_id, signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        self._signal(broker_id, signal.SIGCONT)

    def _signal(self, broker_id: int, sig: int) -> None:
        b = self.nodes[broker_id]
        if b.pid is not None and b.running:
            os.kill(b.pid, sig)

    def stop(self) -> None:
        """Stop every broker (resumed first if paused), then ZooKeeper. Idempotent."""
        for i in sorted(self.nodes):
            with contextlib.suppress(Exception):
                self.resume(i)
        for i in sorted(self.nodes):
            with contextlib.suppress(Exception):
                self.stop_broker(i, timeout_s=15.0)
        if self.zk is not None:
            self.zk.stop()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- views ------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(self.nodes[i].address for i in sorted(self.nodes))

    def metadata(self, broker_id: int | None = None, timeout_s: float = 2.0) -> dict[str, Any]:
        ids = [broker_id] if broker_id is not None else sorted(self.nodes)
        last: Exception | None = None
        for i in ids:
            b = self.nodes[i]
            try:
                return probe_metadata(b.host, b.port, timeout_s)
            except (OSError, ClusterError) as e:
                last = e
        raise ClusterError(f"no broker answered Metadata: {last}")

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S,
                   brokers: list[int] | None = None) -> None:
        """Until every (running) broker answers Metadata listing all running brokers."""
        want = brokers if brokers is not None else [
            i for i in sorted(self.nodes) if self.nodes[i].running]
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            for i in want:
                if not self.nodes[i].running:
                    raise ClusterError(
                        f"broker {i} exited; log tail:\n{self.log_tail(i)}")
            try:
                seen = [self.metadata(i, 1.0) for i in want]
                if all(set(want) <= set(m["brokers"]) and m["controller_id"] >= 0
                       for m in seen):
                    return
                last = str(seen)
            except ClusterError as e:
                last = str(e)
            time.sleep(0.1)
        raise ClusterError(f"cluster not ready after {timeout_s}s: {last}")

    def replica_states(self, broker_id: int, timeout_s: float = 2.0) -> dict[str, Any]:
        b = self.nodes[broker_id]
        url = f"http://{b.host}:{b.admin_port}/replicas"
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            data: dict[str, Any] = json.loads(r.read())
        return data

    def controller(self) -> int:
        return int(self.metadata()["controller_id"])

    def log_tail(self, broker_id: int, lines: int = 40) -> str:
        p = self.nodes[broker_id].log_path
        if not p.exists():
            return "(no log)"
        return "\n".join(p.read_text(errors="replace").splitlines()[-lines:])

    # -- detached use (hiwater cluster up / down) -------------------------------------------

    def save_state(self) -> Path:
        assert self.zk is not None
        state = {
            "created": datetime.datetime.now(datetime.UTC).isoformat(),
            "zookeeper": {"pid": self.zk.pid, "hosts": self.zk.hosts,
                          "marker": str((self.base_dir / "zookeeper" / "zoo.cfg").resolve())},
            "brokers": [
                {"id": b.broker_id, "pid": b.pid, "host": b.host, "port": b.port,
                 "admin_port": b.admin_port, "config": str(b.config_path)}
                for b in self.nodes.values()
            ],
        }
        path = self.base_dir / STATE_FILE
        path.write_text(json.dumps(state, indent=2))
        return path


def down(base_dir: Path, timeout_s: float = 30.0) -> list[str]:
    """Stop what `up` started in `base_dir`, by the PIDs it recorded (checked against each
    process's command line first). Returns what was stopped."""
    path = Path(base_dir) / STATE_FILE
    if not path.exists():
        raise ClusterError(f"no cluster recorded in {path}")
    state = json.loads(path.read_text())
    stopped = []
    for b in state["brokers"]:
        pid = b.get("pid")
        if pid and _alive_with(int(pid), b["config"]):
            _signal_and_wait(int(pid), timeout_s)
            stopped.append(f"broker {b['id']} (pid {pid})")
    zk = state["zookeeper"]
    if zk.get("pid") and _alive_with(int(zk["pid"]), zk["marker"]):
        _signal_and_wait(int(zk["pid"]), 10.0)
        stopped.append(f"zookeeper (pid {zk['pid']})")
    path.unlink()
    return stopped


def _signal_and_wait(pid: int, timeout_s: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or _zombie(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        return " Z " in Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True


def build_cluster(base_dir: Path, brokers: int, overrides: dict[str, str]) -> LocalCluster:
    return LocalCluster(Path(base_dir), brokers, dict(overrides))
