"""Network cuts on one machine: an iptables chain of our own, and cgroups to tell brokers apart.

**Broker ↔ broker.** Every broker listens on its own 127.0.0.x and binds its outgoing
connections to it, so "drop what broker a sends to broker b" is two rules on OUTPUT (on loopback
every packet passes OUTPUT): a's requests to b's listener (`-s A -d B --dport Pb`) and a's
answers on connections b opened (`-s A --sport Pa -d B`). The ports make the rules touch only
this cluster, even when another cluster on the machine uses the same 127.0.0.x addresses.

**Broker ↔ ZooKeeper.** ZooKeeper is on 127.0.0.1 and kazoo does not bind its source address,
so the broker's ZooKeeper connection is 127.0.0.1:ephemeral → 127.0.0.1:zk (checked with
`ss -tnp`): the addresses do not say which broker it is, and a rule on the ephemeral port would
miss the reconnection. So each broker process runs in its own cgroup (v2) and the rules are
`-m cgroup --path <broker's cgroup> -d 127.0.0.1 --dport ZK -j CONNMARK --set-mark M` and
`-m connmark --mark M -j DROP`: the first marks the broker's ZooKeeper connections (the next
packet the broker sends, at the latest its ping), the second drops every packet of a marked
connection in both directions, so ZooKeeper's answers are cut too, new connections never open,
and the session expires after `zookeeper.session.timeout.ms`.

The chain is `HIWATER-<pid>-<n>`, jumped to from the top of OUTPUT; `teardown()` removes the jump,
flushes and deletes it. The cgroups are `<cgroup2 root>/hiwater-<pid>-<n>/broker-<i>`. Leftovers
of processes that died without cleaning up (SIGKILL) are removed when a new one is set up.

Needs root, the `iptables` command (nf_tables or legacy) with the `cgroup` and `connmark`
matches, and a mounted cgroup2 hierarchy; `unavailable_reason()` / `cgroup_unavailable_reason()`
say what is missing.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

CHAIN_PREFIX = "HIWATER-"
IPTABLES_TIMEOUT_S = 20.0
_seq = itertools.count(1)
_seq_lock = threading.Lock()
_STALE_RE = re.compile(r"^hiwater-(\d+)-(\d+)$", re.IGNORECASE)


class NetfilterError(RuntimeError):
    pass


def _iptables() -> str | None:
    return shutil.which("iptables")


def unavailable_reason() -> str | None:
    """None when iptables rules can be set here, else why not."""
    if os.geteuid() != 0:
        return "not root (iptables needs CAP_NET_ADMIN): network partitions are unavailable"
    exe = _iptables()
    if exe is None:
        return ("the iptables command is missing (Debian package `iptables`): network "
                "partitions are unavailable")
    try:
        r = subprocess.run([exe, "-w", "5", "-S", "OUTPUT"], capture_output=True, text=True,
                           timeout=IPTABLES_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"iptables does not run: {e}"
    if r.returncode != 0:
        return f"iptables -S OUTPUT failed: {r.stderr.strip()}"
    return None


def cgroup2_root() -> Path | None:
    try:
        mounts = Path("/proc/self/mounts").read_text()
    except OSError:
        return None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "cgroup2":
            return Path(parts[1])
    return None


def cgroup_unavailable_reason() -> str | None:
    """None when brokers can be put in cgroups of their own (for cutting them from ZooKeeper)."""
    root = cgroup2_root()
    if root is None:
        return "no cgroup2 hierarchy is mounted: isolating a broker from ZooKeeper is unavailable"
    if not os.access(root, os.W_OK):
        return f"{root} is not writable: isolating a broker from ZooKeeper is unavailable"
    return None


def _pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _unique_suffix() -> str:
    with _seq_lock:
        return f"{os.getpid()}-{next(_seq)}"


class IptablesNetwork:
    """A chain of our own hooked into OUTPUT. Thread-safe; `teardown()` is idempotent."""

    def __init__(self, suffix: str | None = None) -> None:
        self.chain = CHAIN_PREFIX + (suffix or _unique_suffix())
        if len(self.chain) > 28:
            raise NetfilterError(f"chain name {self.chain!r} is longer than 28 characters")
        exe = _iptables()
        if exe is None:
            raise NetfilterError("iptables is not installed")
        self.exe = exe
        self._lock = threading.Lock()
        self._rules: list[tuple[str, ...]] = []
        self.active = False

    # -- plumbing -------------------------------------------------------------------------------

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([self.exe, "-w", "10", *args], capture_output=True, text=True,
                           timeout=IPTABLES_TIMEOUT_S, check=False)
        if check and r.returncode != 0:
            raise NetfilterError(f"iptables {' '.join(args)}: {r.stderr.strip()}")
        return r

    @classmethod
    def remove_stale(cls) -> list[str]:
        """Remove HIWATER-<pid>-<n> chains whose process is gone. Returns their names."""
        exe = _iptables()
        if exe is None:
            return []
        r = subprocess.run([exe, "-w", "10", "-S"], capture_output=True, text=True,
                           timeout=IPTABLES_TIMEOUT_S, check=False)
        removed = []
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "-N" and parts[1].startswith(CHAIN_PREFIX):
                m = _STALE_RE.match(parts[1])
                if m and not _pid_alive(int(m.group(1))):
                    net = cls.__new__(cls)
                    net.chain, net.exe, net._lock, net._rules = parts[1], exe, threading.Lock(), []
                    net.active = True
                    net.teardown()
                    removed.append(parts[1])
        return removed

    # -- lifecycle ------------------------------------------------------------------------------

    def setup(self) -> IptablesNetwork:
        with self._lock:
            if self.active:
                return self
            with contextlib.suppress(Exception):
                self.remove_stale()
            self._run("-N", self.chain)
            self.active = True
            try:
                self._run("-I", "OUTPUT", "1", "-j", self.chain)
            except BaseException:
                self._remove_locked()
                raise
        return self

    def teardown(self) -> None:
        with self._lock:
            self._remove_locked()

    def _remove_locked(self) -> None:
        if not self.active:
            return
        for _ in range(16):  # every jump to the chain (bounded)
            if self._run("-D", "OUTPUT", "-j", self.chain, check=False).returncode != 0:
                break
        self._run("-F", self.chain, check=False)
        self._run("-X", self.chain, check=False)
        self._rules.clear()
        self.active = False

    # -- rules ------------------------------------------------------------------------------------

    def add(self, rules: Iterable[Sequence[str]]) -> list[tuple[str, ...]]:
        """Append rules not already in the chain (in order). Returns the ones added."""
        added = []
        with self._lock:
            if not self.active:
                raise NetfilterError(f"chain {self.chain} is not set up")
            for rule in rules:
                t = tuple(rule)
                if t in self._rules:
                    continue
                self._run("-A", self.chain, *t)
                self._rules.append(t)
                added.append(t)
        return added

    def flush(self) -> int:
        """Remove every rule of the chain. Returns how many there were."""
        with self._lock:
            n = len(self._rules)
            if self.active:
                self._run("-F", self.chain)
            self._rules.clear()
            return n

    @property
    def rules(self) -> list[tuple[str, ...]]:
        with self._lock:
            return list(self._rules)

    def listed(self) -> list[str]:
        """The chain's rules as `iptables -S` prints them (empty if the chain does not exist)."""
        r = self._run("-S", self.chain, check=False)
        if r.returncode != 0:
            return []
        return [line for line in r.stdout.splitlines() if not line.startswith("-N ")]

    @staticmethod
    def chain_exists(chain: str) -> bool:
        exe = _iptables()
        if exe is None:
            return False
        r = subprocess.run([exe, "-w", "10", "-S", chain], capture_output=True, text=True,
                           timeout=IPTABLES_TIMEOUT_S, check=False)
        return r.returncode == 0

    @staticmethod
    def output_jumps(chain: str) -> int:
        exe = _iptables()
        if exe is None:
            return 0
        r = subprocess.run([exe, "-w", "10", "-S", "OUTPUT"], capture_output=True, text=True,
                           timeout=IPTABLES_TIMEOUT_S, check=False)
        return sum(1 for line in r.stdout.splitlines() if line.split()[-2:] == ["-j", chain])


class BrokerCgroups:
    """One cgroup (v2, no controllers) per broker, to match its packets with `-m cgroup`."""

    def __init__(self, suffix: str | None = None, root: Path | None = None) -> None:
        found = root or cgroup2_root()
        if found is None:
            raise NetfilterError("no cgroup2 hierarchy is mounted")
        self.root = found
        self.name = "hiwater-" + (suffix or _unique_suffix())
        self.dir = self.root / self.name
        self.active = False

    def setup(self) -> BrokerCgroups:
        with contextlib.suppress(Exception):
            self.remove_stale(self.root)
        self.dir.mkdir(exist_ok=True)
        self.active = True
        return self

    def path_for(self, broker_id: int) -> str:
        """The path `iptables -m cgroup --path` wants (relative to the cgroup2 root)."""
        return f"{self.name}/broker-{broker_id}"

    def place(self, broker_id: int, pid: int) -> None:
        d = self.dir / f"broker-{broker_id}"
        d.mkdir(exist_ok=True)
        (d / "cgroup.procs").write_text(str(pid))

    def teardown(self) -> None:
        if not self.active:
            return
        self._remove_tree(self.root, self.dir)
        self.active = False

    @staticmethod
    def _remove_tree(root: Path, d: Path) -> None:
        if not d.exists():
            return
        for child in sorted(p for p in d.iterdir() if p.is_dir()):
            BrokerCgroups._remove_tree(root, child)
        with contextlib.suppress(OSError):
            for pid in (d / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (root / "cgroup.procs").write_text(pid)  # a process still there: move out
        with contextlib.suppress(OSError):
            d.rmdir()

    @classmethod
    def remove_stale(cls, root: Path) -> list[str]:
        removed = []
        for d in root.iterdir():
            m = _STALE_RE.match(d.name)
            if d.is_dir() and m and not _pid_alive(int(m.group(1))):
                cls._remove_tree(root, d)
                removed.append(d.name)
        return removed
