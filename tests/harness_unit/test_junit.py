"""`hiwater campaign --junit FILE`: the results as JUnit XML (harness/junit.py), parsed back
with xml.etree. The Docker campaigns of tests/docker write one through the CLI as well."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from harness.checkers import check
from harness.history import Op
from harness.junit import LIVE_INVARIANTS, junit_xml, write_junit


def o(index: int, process: Any, type_: str, f: str, value: Any) -> Op:
    return Op(index, index, process, type_, f, value)


# a lost write (tests/checkers/test_queue.py: test_lost_write_consistent)
LOSSY = [
    o(0, 0, "invoke", "send", [["send", "x", "a"]]),
    o(1, 0, "ok", "send", [["send", "x", [0, "a"]]]),
    o(2, 0, "invoke", "send", [["send", "x", "b"]]),
    o(3, 0, "ok", "send", [["send", "x", [1, "b"]]]),
    o(4, 0, "invoke", "poll", [["poll"]]),
    o(5, 0, "ok", "poll", [["poll", {"x": [[1, "b"]]}]]),
]
CLEAN = [*LOSSY[:4], o(4, 0, "invoke", "poll", [["poll"]]),
         o(5, 0, "ok", "poll", [["poll", {"x": [[0, "a"], [1, "b"]]}]])]


def _results(history: list[Op], violations: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    checked = check(history)
    bad = list(checked["queue"]["bad_anomaly_types"])
    return {"seed": 7, "options": {"name": "unit", "runtime": "docker"},
            "nemesis": {"package": "kill"}, "workload": {"final_complete": True},
            "probes": {"samples": 3, "violations": list(violations),
                       "valid?": not violations},
            **checked, "verdict": "invalid" if bad else "valid", "bad": bad,
            "exit_code": 1 if bad else 0}


def _cases(suite: ET.Element) -> dict[str, ET.Element]:
    return {f"{c.get('classname')}.{c.get('name')}": c for c in suite.iter("testcase")}


def test_anomalies_are_failures_with_their_explanation(tmp_path: Path) -> None:
    lossy = _results(LOSSY, ({"invariant": "single_leader_per_epoch", "tp": ["t", 0],
                              "leader_epoch": 3, "leaders": [1, 2]},))
    path = tmp_path / "out" / "junit.xml"
    write_junit(path, [(tmp_path / "run1", lossy), (tmp_path / "run2", _results(CLEAN))])
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    s1, s2 = root.findall("testsuite")
    assert s1.get("name") == "hiwater.unit"
    props = {p.get("name"): p.get("value") for p in s1.iter("property")}
    assert props["seed"] == "7" and props["verdict"] == "invalid"
    assert props["run_dir"] == str(tmp_path / "run1")
    cases = _cases(s1)
    # one case per checker and per live invariant, plus the run and the final reads
    assert set(cases) == {"campaign.run", "checker.queue", "workload.final-reads",
                          *(f"live-invariant.{n}" for n in LIVE_INVARIANTS)}
    failure = cases["checker.queue"].find("failure")
    assert failure is not None
    assert "lost_write" in (failure.get("type") or "")
    assert "lost_write: Lost write" in (failure.text or "")
    assert "why:" in (failure.text or "") and '"a"' in (failure.text or "")
    live = cases["live-invariant.single_leader_per_epoch"].find("failure")
    assert live is not None and "leaders" in (live.text or "")
    assert cases["live-invariant.log_end_matches_disk"].find("failure") is None
    assert s1.get("failures") == "2" and s1.get("errors") == "0"
    assert s1.get("tests") == str(len(cases))
    # the clean run: no failure anywhere
    assert s2.get("failures") == "0" and s2.get("errors") == "0"
    assert all(c.find("failure") is None for c in s2.iter("testcase"))
    assert root.get("failures") == "2"


def test_a_failed_run_and_unknown_final_reads_are_errors() -> None:
    broken = {"seed": 1, "options": {"name": "x"}, "error": "DockerError: cluster not ready",
              "verdict": "unknown", "exit_code": 3}
    incomplete = {**_results(CLEAN), "workload": {"final_complete": False,
                                                  "unreached": {"t": {"x": 3}}}}
    root = ET.fromstring(junit_xml([(None, broken), (None, incomplete)]))
    s1, s2 = root.findall("testsuite")
    err = _cases(s1)["campaign.run"].find("error")
    assert err is not None and "cluster not ready" in (err.get("message") or "")
    assert s1.get("errors") == "1"
    reads = _cases(s2)["workload.final-reads"].find("error")
    assert reads is not None and reads.get("type") == "incomplete"
