"""The runtime leaves nothing behind: processes, iptables chain, cgroups — even when the code
using it raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.runtime.base import FaultUnsupported
from harness.runtime.local import LocalRuntime
from harness.runtime.netfilter import IptablesNetwork
from tests.runtime_local.conftest import FAST, require_network, require_zookeeper


class Boom(Exception):
    pass


def test_chain_cgroups_and_processes_gone_after_stop_even_on_error(tmp_path: Path) -> None:
    require_zookeeper()
    require_network(zookeeper=True)
    seen: dict[str, object] = {}
    with pytest.raises(Boom), LocalRuntime(tmp_path / "c", 1, FAST) as rt:
        assert isinstance(rt, LocalRuntime) and rt.net is not None and rt.cgroups is not None
        rt.partition({"n1": ["zk"], "zk": ["n1"]})
        seen["chain"] = rt.net.chain
        seen["cgroup"] = rt.cgroups.dir
        seen["pids"] = [rt.pid("n1"), rt.cluster.zk.pid if rt.cluster.zk else None]
        assert IptablesNetwork.chain_exists(rt.net.chain)
        assert IptablesNetwork.output_jumps(rt.net.chain) == 1
        raise Boom
    chain = str(seen["chain"])
    assert not IptablesNetwork.chain_exists(chain)
    assert IptablesNetwork.output_jumps(chain) == 0
    assert not Path(str(seen["cgroup"])).exists()
    for pid in seen["pids"]:  # type: ignore[attr-defined]
        assert pid is not None and not Path(f"/proc/{pid}").exists()
    rt.stop()  # idempotent


def test_stale_chain_of_dead_process_is_removed() -> None:
    require_network()
    net = IptablesNetwork("999999999-1")  # no such pid
    net.setup()
    try:
        assert IptablesNetwork.chain_exists(net.chain)
        assert net.chain in IptablesNetwork.remove_stale()
        assert not IptablesNetwork.chain_exists(net.chain)
        assert IptablesNetwork.output_jumps(net.chain) == 0
    finally:
        net.teardown()


def test_network_false_degrades_to_unsupported(tmp_path: Path) -> None:
    rt = LocalRuntime(tmp_path / "x", 1, network=False)
    rt._setup_network()  # what start() does first; no processes needed
    assert rt.capabilities()["partition"] == "the runtime was started with network=False"
    with pytest.raises(FaultUnsupported, match="network=False"):
        rt.partition({"n1": ["n2"]})
    assert rt.heal()["healed"] == 0
    with pytest.raises(FaultUnsupported, match="proxies=True"):
        rt.add_toxic("n1", "latency", {"latency": 10})


def _sleep_in_pool_worker(seconds: float) -> int:
    import os
    import time

    time.sleep(seconds)
    return os.getpid()


def test_a_forked_pool_worker_terminated_by_sigterm_runs_none_of_its_parents_cleanups(
        tmp_path: Path) -> None:
    """`hiwater sim` and the parallel model checker fork pool workers; `Pool.terminate()`
    sends them SIGTERM. A worker must not run the cleanups its parent registered (they stopped
    the parent's cluster and removed its iptables chain under it, seen in CI)."""
    import multiprocessing
    import time

    from harness.runtime import cleanup

    marker = tmp_path / "ran"
    token = cleanup.register(lambda: marker.write_text("cleanup ran"))
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            pending = pool.map_async(_sleep_in_pool_worker, [5.0, 5.0])
            time.sleep(0.5)  # the workers are in their task (bounded: they sleep 5 s)
            pool.terminate()  # SIGTERM to the workers while they sleep
            del pending
        assert not marker.exists(), "a forked worker ran its parent's cleanup"
    finally:
        cleanup.unregister(token)
    assert not marker.exists()
