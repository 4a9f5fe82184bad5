"""The iptables rules a grudge becomes (no iptables needed: only the rule text)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.runtime.base import FaultUnsupported
from harness.runtime.local import LocalRuntime


def _described(tmp_path: Path, proxies: bool) -> LocalRuntime:
    rt = LocalRuntime(tmp_path, 3, proxies=proxies, network=False)
    rt.cluster.nodes = {i: rt.cluster._describe(i) for i in (1, 2, 3)}
    return rt


@pytest.mark.parametrize("proxies", [False, True])
def test_broker_pair_rules_use_addresses_and_ports(tmp_path: Path, proxies: bool) -> None:
    rt = _described(tmp_path, proxies)
    rules = rt.partition_rules({"n1": ["n2"]})  # n1 drops what n2 sends
    p1 = ",".join(map(str, rt._ports(1)))
    p2 = ",".join(map(str, rt._ports(2)))
    assert rules == [
        ["-s", "127.0.0.12", "-d", "127.0.0.11", "-p", "tcp", "-m", "multiport", "--dports",
         p1, "-j", "DROP"],
        ["-s", "127.0.0.12", "-d", "127.0.0.11", "-p", "tcp", "-m", "multiport", "--sports",
         p2, "-j", "DROP"],
    ]
    assert (len(rt._ports(1)) == 2) == proxies


def test_zookeeper_rules_need_cgroups(tmp_path: Path) -> None:
    rt = _described(tmp_path, False)
    rt.zk_reason = "no cgroup2 here"
    with pytest.raises(FaultUnsupported, match="no cgroup2 here"):
        rt.partition_rules({"n1": ["zk"]})
